// Package redisconn connects an example service to Redis: the server or
// Cluster named by REDIS_URL, or, when it is unset, an embedded in-process
// Redis (miniredis) so the example runs with zero setup.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Env is the environment variable Open reads when given an empty URL.
const Env = "REDIS_URL"

// Conn is an open connection to Redis.
type Conn struct {
	// Client is a *redis.Client or, for a Cluster, a *redis.ClusterClient.
	Client redis.UniversalClient
	// Embedded is true when Client talks to the in-process miniredis.
	Embedded bool
	// Cluster is true when Client is a Cluster client.
	Cluster bool
	// Describe says what Client is connected to, for a service's first log
	// line; it never contains a password.
	Describe string

	mr       *miniredis.Miniredis
	stopTick chan struct{} // closed by Close: stops the embedded server's TTL clock
	tickDone chan struct{}
	once     sync.Once
}

// TTLTick is how often the embedded server's TTLs are advanced by the
// wall-clock time that has passed: a key expires at most TTLTick after its
// TTL ran out, never before.
const TTLTick = 50 * time.Millisecond

// Open connects to url:
//
//   - "" starts an embedded miniredis on a loopback port whose TTLs follow
//     the wall clock (see TTLTick), so that reservations, holds and leases
//     really expire; its TIME is the wall clock too;
//   - "redis://[user:pass@]host:port[/db]", "rediss://..." (TLS),
//     "unix:///path/to/redis.sock" or a bare "host:port" connects to one
//     server; when that server reports cluster_enabled:1, Open switches to a
//     Cluster client seeded with it;
//   - a comma-separated list of addresses or URLs ("10.0.0.1:7000,10.0.0.2:7000")
//     connects to a Cluster seeded with all of them.
//
// Open checks that the server answers before it returns. A server that
// refuses INFO (an ACL without it, some managed services) but answers PING is
// taken to be a single server.
//
// Every client Open makes has ContextTimeoutEnabled: a call ends when its
// context does, whatever the client's own timeouts and retries say. Without
// it go-redis waits for each read up to its ReadTimeout (3 s by default)
// and re-sends up to MaxRetries times, so a call on a paused server outlives
// the deadline of the HTTP request that made it, and the server's write
// timeout cuts the connection before the request is answered.
func Open(ctx context.Context, url string) (*Conn, error) {
	url = strings.TrimSpace(url)
	if url == "" {
		return embedded()
	}
	if strings.Contains(url, ",") {
		return cluster(ctx, strings.Split(url, ","))
	}
	opt, err := redis.ParseURL(withScheme(url))
	if err != nil {
		return nil, fmt.Errorf("redisconn: %s: %w", Env, err)
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		if perr := c.Ping(ctx).Err(); perr != nil {
			_ = c.Close()
			return nil, fmt.Errorf("redisconn: %s: %w", opt.Addr, perr)
		}
		info = "" // INFO refused: a single server as far as we can tell
	}
	if strings.Contains(info, "cluster_enabled:1") {
		_ = c.Close()
		return cluster(ctx, []string{url})
	}
	return &Conn{Client: c, Describe: "Redis at " + opt.Addr}, nil
}

// Close closes the client and stops the embedded server, if any. Calling it
// again does nothing.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.Client.Close()
		if c.mr != nil {
			close(c.stopTick)
			<-c.tickDone
			c.mr.Close()
		}
	})
	return err
}

func embedded() (*Conn, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("redisconn: embedded Redis: %w", err)
	}
	c := &Conn{
		Client:   redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true}),
		Embedded: true,
		Describe: "embedded in-process Redis (miniredis) at " + mr.Addr() + "; set " + Env + " to use a real one",
		mr:       mr,
		stopTick: make(chan struct{}),
		tickDone: make(chan struct{}),
	}
	go c.tickTTLs()
	return c, nil
}

// tickTTLs advances the embedded server's TTLs by the time that has passed,
// every TTLTick, until Close. miniredis's own ClockTTL mode does the same on
// every command, and each time it walks and sorts every key: with a few
// thousand order markers (each with a TTL) a command then takes milliseconds
// and the service slows down as it runs. One walk per tick costs next to
// nothing.
func (c *Conn) tickTTLs() {
	defer close(c.tickDone)
	t := time.NewTicker(TTLTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.stopTick:
			return
		case <-t.C:
			now := time.Now()
			c.mr.FastForward(now.Sub(last))
			last = now
		}
	}
}

func cluster(ctx context.Context, urls []string) (*Conn, error) {
	var o *redis.ClusterOptions
	for _, u := range urls {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		opt, err := redis.ParseURL(withScheme(u))
		if err != nil {
			return nil, fmt.Errorf("redisconn: %s: %w", Env, err)
		}
		if o == nil {
			o = &redis.ClusterOptions{
				Username:              opt.Username,
				Password:              opt.Password,
				TLSConfig:             opt.TLSConfig,
				ContextTimeoutEnabled: true,
			}
		}
		o.Addrs = append(o.Addrs, opt.Addr)
	}
	if o == nil {
		return nil, errors.New("redisconn: " + Env + " lists no address")
	}
	c := redis.NewClusterClient(o)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redisconn: cluster %s: %w", strings.Join(o.Addrs, ","), err)
	}
	return &Conn{Client: c, Cluster: true, Describe: "Redis Cluster at " + strings.Join(o.Addrs, ",")}, nil
}

// withScheme lets REDIS_URL be a bare host:port.
func withScheme(u string) string {
	if strings.Contains(u, "://") {
		return u
	}
	return "redis://" + u
}
