package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// Pair is a primary and one replica that replicates from it.
//
// Replication is asynchronous, as in production: a write acknowledged by
// the primary reaches the replica a moment later unless the client waits
// for it with WAIT. Failover swaps the roles.
type Pair struct {
	// Primary accepts writes.
	Primary *Server
	// Replica replicates Primary and answers reads (replica-read-only).
	Replica *Server
}

// NewPair starts a synced primary+replica pair for a test and stops both in
// tb.Cleanup. opts apply to both servers (Port and Dir must be zero).
func NewPair(tb testing.TB, opts Options) *Pair {
	tb.Helper()
	p, err := StartPair(context.Background(), opts)
	return forTest(tb, p, err)
}

// StartPair starts a primary and a replica of it, and returns once the
// replica's link is up and the initial sync is done. The caller must Close
// it. opts apply to both servers (Port and Dir must be zero).
func StartPair(ctx context.Context, opts Options) (*Pair, error) {
	if opts.Port != 0 || opts.Dir != "" {
		return nil, errors.New("redistest: StartPair: Port and Dir must be zero")
	}
	primary, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	replica, err := startServer(ctx, opts, func(s *Server) { s.replicaOf = primary.Addr() })
	if err != nil {
		_ = primary.Close()
		return nil, err
	}
	p := &Pair{Primary: primary, Replica: replica}
	if err := replica.waitLinkUp(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// Sync waits until the replica has every write the primary has accepted so
// far (WAIT 1 on the primary).
func (p *Pair) Sync(ctx context.Context) error {
	for {
		v, err := p.Primary.do(ctx, "WAIT", 1, 1000)
		if err != nil {
			return fmt.Errorf("redistest: WAIT: %w", err)
		}
		if n, _ := v.(int64); n >= 1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Failover promotes the replica (REPLICAOF NO ONE) and then makes the old
// primary a replica of it, the way an operator or Sentinel would; afterwards
// p.Primary is the new primary and p.Replica the old one.
//
// It does not wait for the replica to catch up first: writes the replica has
// not received yet are lost, exactly as in an unplanned failover (use WAIT,
// or Sync, before Failover when a test needs them). An old primary that is
// paused is killed; one that is not running stays down, and a later Restart
// brings it back as a replica of the new primary. Clients still connected
// to the old primary get READONLY errors for writes.
func (p *Pair) Failover(ctx context.Context) error {
	old, next := p.Primary, p.Replica
	if _, err := next.do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("redistest: promote %s: %w", next.Addr(), err)
	}
	next.setReplicaOf("")
	old.setReplicaOf(next.Addr())
	p.Primary, p.Replica = next, old

	old.mu.Lock()
	paused := old.paused
	old.mu.Unlock()
	if paused {
		return old.Kill()
	}
	if old.PID() == 0 {
		return nil // down: Restart brings it back as a replica
	}
	host, port, _ := net.SplitHostPort(next.Addr())
	if _, err := old.do(ctx, "REPLICAOF", host, port); err != nil {
		return fmt.Errorf("redistest: demote %s: %w", old.Addr(), err)
	}
	return old.waitLinkUp(ctx)
}

// Close stops both servers.
func (p *Pair) Close() error {
	return errors.Join(p.Primary.Close(), p.Replica.Close())
}

func (s *Server) setReplicaOf(addr string) {
	s.mu.Lock()
	s.replicaOf = addr
	s.mu.Unlock()
}

// waitLinkUp waits until this replica reports master_link_status:up (the
// initial sync is done).
func (s *Server) waitLinkUp(ctx context.Context) error {
	return poll(ctx, 30*time.Second, func() (bool, error) {
		info, err := s.info(ctx, "replication")
		if err != nil {
			return false, nil // still loading
		}
		return infoField(info, "master_link_status") == "up", nil
	}, "replica "+s.Addr()+" link up")
}

// poll calls cond every 20ms until it returns true or an error, ctx ends or
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error), what string) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("redistest: waiting for %s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
