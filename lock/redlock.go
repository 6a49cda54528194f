package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
)

// Redlock is a lock over N independent Redis masters (no replication
// between them), after the Redlock algorithm: an acquire tries every master
// in parallel with one owner ID and holds the lock when a majority
// (N/2+1) granted it while time is left on the TTL; otherwise it releases
// whatever it got. Renewals and releases go to every master the same way,
// and a renewal that no longer reaches a majority ends the lease.
//
// Caveats, stated plainly:
//
//   - Redlock leases have no fencing token (Fence().Token is 0): the masters
//     share no counter. Anything that must not be written by a stale holder
//     needs a Mutex on one primary with fencing, not Redlock.
//   - Safety rests on timing assumptions: bounded process pauses, bounded
//     network delay and clocks that run at about the same rate on every
//     master (the drift allowance is 1% of the TTL plus 2ms). A master that
//     restarts without persistence forgets locks it granted, which can hand
//     a majority to a second owner; run the masters with AOF (appendfsync
//     always) or keep a restarted master out for one TTL.
//   - Waiting is by jittered polling (no notifications across masters).
type Redlock struct {
	coord *Client   // the leases' watchdog, tracking and telemetry
	peers []*Client // one per master
	err   error
}

// NewRedlock returns a Redlock over the given masters (at least 1; use an
// odd number, typically 3 or 5). The go-redis clients stay owned by the
// caller. Options as for New; waiting polls with a 10ms..200ms backoff unless
// WithPolling says otherwise.
func NewRedlock(masters []redis.UniversalClient, opts ...Option) *Redlock {
	opts = append([]Option{WithPolling(10*time.Millisecond, 200*time.Millisecond)}, opts...)
	rl := &Redlock{}
	if len(masters) == 0 {
		rl.err = fmt.Errorf("%w: redlock needs at least one master", ErrInvalid)
		masters = []redis.UniversalClient{nil}
	}
	rl.coord = New(masters[0], opts...)
	for _, m := range masters {
		if m != nil {
			rl.peers = append(rl.peers, New(m, opts...))
		}
	}
	return rl
}

// Close stops the background work of the Redlock and its leases, like
// Client.Close.
func (rl *Redlock) Close() error {
	err := rl.coord.Close()
	for _, p := range rl.peers {
		err = errors.Join(err, p.Close())
	}
	return err
}

// RedlockMutex is a named lock over a Redlock's masters; like Mutex, a
// factory of leases, safe to share.
type RedlockMutex struct{ r *resource }

// Mutex returns the Redlock mutex called name (same grammar as Mutex names).
// Options as for Client.Mutex; WithFair and WithReplicaAck do not apply.
func (rl *Redlock) Mutex(name string, opts ...Option) *RedlockMutex {
	r := rl.coord.resource(mutexKind, "redlock", name, opts)
	if r.err == nil {
		r.err = rl.err
	}
	for _, p := range rl.peers {
		pr := p.resource(mutexKind, "redlock", name, opts)
		if pr.err == nil {
			pr.acquireKeys = append(pr.acquireKeys, p.space.Key(keys.Group(name), "redlock-seq", name))
			pr.cfg.ack = r.cfg.ack
		}
		// A master that is down must not hold up the others: no retries
		// beyond go-redis's own.
		pr.policy = retry.Policy{Attempts: 1}.For(p.rdb)
		r.peers = append(r.peers, pr)
	}
	return &RedlockMutex{r: r}
}

// Name returns the lock's name.
func (m *RedlockMutex) Name() string { return m.r.name }

// TryAcquire takes the lock if a majority of masters grant it, and returns
// ErrNotAcquired otherwise (having released what it got).
func (m *RedlockMutex) TryAcquire(ctx context.Context) (*Lease, error) { return m.r.tryAcquire(ctx) }

// Acquire takes the lock, polling until a majority grants it or ctx ends.
func (m *RedlockMutex) Acquire(ctx context.Context) (*Lease, error) { return m.r.acquire(ctx) }

func (r *resource) quorum() int { return len(r.peers)/2 + 1 }

// eachPeer runs fn on every master in parallel.
func (r *resource) eachPeer(fn func(i int, p *resource)) {
	var wg sync.WaitGroup
	for i, p := range r.peers {
		wg.Go(func() { fn(i, p) })
	}
	wg.Wait()
}

func (r *resource) attemptQuorum(ctx context.Context, owner string) (*Lease, time.Duration, error) {
	start := time.Now()
	type result struct {
		ok  bool
		n   int64
		err error
	}
	out := make([]result, len(r.peers))
	r.eachPeer(func(i int, p *resource) {
		ok, n, _, err := p.acquireOnce(ctx, owner, false)
		out[i] = result{ok, n, err}
	})
	var (
		got  int
		wait time.Duration
		errs []error
	)
	for _, o := range out {
		switch {
		case o.ok:
			got++
		case o.err != nil:
			errs = append(errs, o.err)
		case wait == 0 || time.Duration(o.n)*time.Millisecond < wait:
			wait = time.Duration(o.n) * time.Millisecond
		}
	}
	validity := r.cfg.ttl - time.Since(start) - driftFor(r.cfg.ttl)
	if got >= r.quorum() && validity > 0 {
		return r.newLease(ctx, owner, 0, start)
	}
	if got > 0 {
		r.abandon(ctx, owner)
	}
	if len(errs) > len(r.peers)-r.quorum() {
		return nil, 0, fmt.Errorf("lock: redlock %s: %d of %d masters failed: %w", r.name, len(errs), len(r.peers), errors.Join(errs...))
	}
	return nil, wait, nil
}

// extendQuorum: 1 when a majority extended; 0 or 2 when the answers rule a
// majority out (2 if some master has another owner); an error otherwise.
func (r *resource) extendQuorum(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	status := make([]int64, len(r.peers))
	errs := make([]error, len(r.peers))
	r.eachPeer(func(i int, p *resource) { status[i], errs[i] = p.extend(ctx, owner, ttl) })
	return r.tally(status, errs, r.quorum())
}

// releaseQuorum: 1 when any master released (or had released) it, else as
// extendQuorum with a quorum of one.
func (r *resource) releaseQuorum(ctx context.Context, owner string) (int64, error) {
	status := make([]int64, len(r.peers))
	errs := make([]error, len(r.peers))
	r.eachPeer(func(i int, p *resource) { status[i], errs[i] = p.release(ctx, owner) })
	return r.tally(status, errs, 1)
}

func (r *resource) tally(status []int64, errs []error, need int) (int64, error) {
	var done, definite int
	taken := false
	for i := range status {
		switch {
		case errs[i] != nil:
		case status[i] == 1:
			done++
		default:
			definite++
			taken = taken || status[i] == 2
		}
	}
	switch {
	case done >= need:
		return 1, nil
	case definite > len(status)-need:
		if taken {
			return 2, nil
		}
		return 0, nil
	default:
		return 0, fmt.Errorf("lock: redlock %s: %w", r.name, errors.Join(errs...))
	}
}
