package redistest

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// do runs one command on a short-lived connection of its own, so that
// faults and control commands never share (or kill) the connections a test
// uses.
func (s *Server) do(ctx context.Context, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1, TLSConfig: s.tlsConfig()})
	defer c.Close()
	return c.Do(ctx, args...).Result()
}

func (s *Server) info(ctx context.Context, section string) (string, error) {
	v, err := s.do(ctx, "INFO", section)
	if err != nil {
		return "", fmt.Errorf("redistest: INFO %s on %s: %w", section, s.addr, err)
	}
	str, _ := v.(string)
	return str, nil
}

// KillClients closes every normal client connection to the server (CLIENT
// KILL TYPE normal), as a server-side timeout, a proxy restart or a network
// blip would. Commands in flight on those connections fail; go-redis clients
// reconnect on their next command. Replication links and pub/sub
// connections are left alone (see KillPubSubClients).
func (s *Server) KillClients(ctx context.Context) error {
	return s.killType(ctx, "normal")
}

// KillPubSubClients closes every connection in subscribe mode (CLIENT KILL
// TYPE pubsub), which makes subscribers see their connection drop.
func (s *Server) KillPubSubClients(ctx context.Context) error {
	return s.killType(ctx, "pubsub")
}

func (s *Server) killType(ctx context.Context, typ string) error {
	// The filter form of CLIENT KILL skips the calling connection (SKIPME yes).
	if _, err := s.do(ctx, "CLIENT", "KILL", "TYPE", typ); err != nil {
		return fmt.Errorf("redistest: CLIENT KILL TYPE %s: %w", typ, err)
	}
	return nil
}
