package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	goredisv9 "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/lock"
)

// lockTTL is long enough that no lock of a run expires while held.
const lockTTL = 10 * time.Second

// pollEvery is how often the polling locks (the hand-written baseline,
// redislock and redsync, whose own default is a random 50–250 ms) try again
// while the lock is held: the same interval for every one of them.
const pollEvery = 5 * time.Millisecond

// locker is one lock implementation under test.
type locker interface {
	// handle returns what one goroutine uses to lock key.
	handle(key string) lockHandle
	close() error
}

// lockHandle takes the lock: once, or (wait) waiting until it is free or ctx
// ends. It returns the release.
type lockHandle interface {
	take(ctx context.Context, wait bool) (release func(context.Context) error, err error)
}

var errNotObtained = errors.New("lock not obtained")

// baselineLock is the hand-written lock: SET NX PX with a random owner, and a
// compare-and-delete script to release.
type baselineLock struct{ rdb *redis.Client }

var compareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func (l baselineLock) close() error { return nil }

func (l baselineLock) handle(key string) lockHandle { return baselineHandle{l.rdb, key} }

type baselineHandle struct {
	rdb *redis.Client
	key string
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (h baselineHandle) once(ctx context.Context) (func(context.Context) error, error) {
	owner := randomOwner()
	ok, err := h.rdb.SetNX(ctx, h.key, owner, lockTTL).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNotObtained
	}
	return func(ctx context.Context) error {
		return compareAndDelete.Run(ctx, h.rdb, []string{h.key}, owner).Err()
	}, nil
}

func (h baselineHandle) take(ctx context.Context, wait bool) (func(context.Context) error, error) {
	for {
		rel, err := h.once(ctx)
		if !wait || !errors.Is(err, errNotObtained) {
			return rel, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// redsyncLock is go-redsync/redsync over one go-redis pool.
type redsyncLock struct{ rs *redsync.Redsync }

func (l redsyncLock) close() error { return nil }

func (l redsyncLock) handle(key string) lockHandle { return redsyncHandle{l.rs, key} }

type redsyncHandle struct {
	rs  *redsync.Redsync
	key string
}

func (h redsyncHandle) take(ctx context.Context, wait bool) (func(context.Context) error, error) {
	tries := 1
	if wait {
		tries = 1 << 30 // until ctx ends
	}
	m := h.rs.NewMutex(h.key, redsync.WithExpiry(lockTTL), redsync.WithTries(tries), redsync.WithRetryDelay(pollEvery))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock refused")
		}
		return err
	}, nil
}

// redislockLock is bsm/redislock.
type redislockLock struct{ c *redislock.Client }

func (l redislockLock) close() error { return nil }

func (l redislockLock) handle(key string) lockHandle { return redislockHandle{l.c, key} }

type redislockHandle struct {
	c   *redislock.Client
	key string
}

func (h redislockHandle) take(ctx context.Context, wait bool) (func(context.Context) error, error) {
	var opt *redislock.Options // no retry
	if wait {
		opt = &redislock.Options{RetryStrategy: redislock.LinearBackoff(pollEvery)}
	}
	lk, err := h.c.Obtain(ctx, h.key, lockTTL, opt)
	if err != nil {
		return nil, err
	}
	return lk.Release, nil
}

// redkitLock is redkit's lock.Mutex (fence token included, watchdog on).
type redkitLock struct{ c *lock.Client }

func (l redkitLock) close() error { return l.c.Close() }

func (l redkitLock) handle(key string) lockHandle { return redkitHandle{l.c.Mutex(key)} }

type redkitHandle struct{ m *lock.Mutex }

func (h redkitHandle) take(ctx context.Context, wait bool) (func(context.Context) error, error) {
	var (
		l   *lock.Lease
		err error
	)
	if wait {
		l, err = h.m.Acquire(ctx)
	} else {
		l, err = h.m.TryAcquire(ctx)
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// lockImpls are the implementations compared, by name.
var lockImpls = []struct {
	name string
	what string
	make func(rdb *redis.Client, prefix string) locker
}{
	{"baseline", "SET NX PX + compare-and-delete script; waits by polling every 5ms",
		func(rdb *redis.Client, _ string) locker { return baselineLock{rdb} }},
	{"redsync", "go-redsync/redsync v4.18.1, one pool; waits by polling every 5ms (WithRetryDelay)",
		func(rdb *redis.Client, _ string) locker { return redsyncLock{redsync.New(goredisv9.NewPool(rdb))} }},
	{"redislock", "bsm/redislock v0.9.4; waits with LinearBackoff(5ms)",
		func(rdb *redis.Client, _ string) locker { return redislockLock{redislock.New(rdb)} }},
	{"redkit", "redkit lock.Mutex: fence token, watchdog, notified waiting",
		func(rdb *redis.Client, p string) locker {
			return redkitLock{must(lock.New(rdb, lock.WithKeyPrefix(p), lock.WithTTL(lockTTL)))}
		}},
	{"redkit-fair", "redkit lock.Mutex in fair (FIFO) mode",
		func(rdb *redis.Client, p string) locker {
			return redkitLock{must(lock.New(rdb, lock.WithKeyPrefix(p), lock.WithTTL(lockTTL), lock.WithFair(true)))}
		}},
}

// lockCases are the lock rows: uncontended pairs with 1 and 16 goroutines,
// and 16 goroutines handing one lock around.
func lockCases() []Case {
	var out []Case
	for _, impl := range lockImpls {
		for _, g := range []int{1, 16} {
			out = append(out, Case{
				Name:      fmt.Sprintf("lock/%s/uncontended-%d", impl.name, g),
				What:      fmt.Sprintf("acquire+release pairs/s, %s, own keys; %s", goroutines(g), impl.what),
				Yardstick: fmt.Sprintf("lock/baseline/uncontended-%d", g),
				Also:      []string{fmt.Sprintf("lock/redislock/uncontended-%d", g)},
				Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
					return lockUncontended(ctx, env, d, g, impl.make)
				},
			})
		}
		out = append(out, Case{
			Name: fmt.Sprintf("lock/%s/handoff-16", impl.name),
			What: "16 goroutines on one key, immediate release: handoffs/s (acquisitions that followed another " +
				"goroutine's hold; a goroutine taking its own lock straight back does not count); p50/p99 = wait of " +
				"those acquisitions (a wait still going on at the end counts as far as it got); " + impl.what,
			Yardstick: "lock/baseline/handoff-16",
			Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
				return lockHandoff(ctx, env, d, 16, impl.make)
			},
		})
	}
	return out
}

func lockUncontended(ctx context.Context, env *Env, d time.Duration, workers int,
	mk func(*redis.Client, string) locker) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	p := prefix("lock")
	l := mk(rdb, p)
	defer l.close()
	handles := make([]lockHandle, workers)
	for w := range handles {
		handles[w] = l.handle(fmt.Sprintf("%s:own-%d", p, w))
		// Warm up: load scripts, open the connections.
		rel, err := handles[w].take(ctx, false)
		if err != nil {
			return Sample{}, fmt.Errorf("warm-up: %w", err)
		}
		if err := rel(ctx); err != nil {
			return Sample{}, fmt.Errorf("warm-up release: %w", err)
		}
	}
	s := drive(ctx, d, workers, rt, true, func(ctx context.Context, w int) error {
		rel, err := handles[w].take(ctx, false)
		if err != nil {
			return err
		}
		return rel(context.WithoutCancel(ctx))
	})
	return s, nil
}

// handoffs records who held the lock, and when, for the contended case.
type handoffs struct {
	mu          sync.Mutex
	last        int // worker that held last; -1 before the first
	lastRelease time.Time
	acquired    int
	reacquired  int
	handoffs    int             // acquisitions that followed another goroutine's hold
	gaps, waits []time.Duration // of the handoffs only
	winners     map[int]bool    // workers that acquired at least once
}

// got is called by worker w right after it obtained the lock.
func (h *handoffs) got(w int, asked, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acquired++
	h.winners[w] = true
	switch {
	case h.last == w:
		h.reacquired++
	case h.last >= 0:
		h.handoffs++
		h.waits = append(h.waits, now.Sub(asked))
		h.gaps = append(h.gaps, now.Sub(h.lastRelease))
	}
}

// cut is called when a wait was still going on at the end of the run: its
// wait so far counts, as a lower bound, so that starved waiters show.
func (h *handoffs) cut(asked, now time.Time) {
	h.mu.Lock()
	h.waits = append(h.waits, now.Sub(asked))
	h.mu.Unlock()
}

// releasing is called by worker w just before it sends the release.
func (h *handoffs) releasing(w int, now time.Time) {
	h.mu.Lock()
	h.last, h.lastRelease = w, now
	h.mu.Unlock()
}

func lockHandoff(ctx context.Context, env *Env, d time.Duration, workers int,
	mk func(*redis.Client, string) locker) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	p := prefix("lock")
	l := mk(rdb, p)
	defer l.close()
	key := p + ":hot"
	handles := make([]lockHandle, workers)
	for w := range handles {
		handles[w] = l.handle(key)
	}
	rel, err := handles[0].take(ctx, false)
	if err != nil {
		return Sample{}, fmt.Errorf("warm-up: %w", err)
	}
	if err := rel(ctx); err != nil {
		return Sample{}, fmt.Errorf("warm-up release: %w", err)
	}
	var (
		holders Holders
		rec     = handoffs{last: -1, winners: map[int]bool{}}
	)
	s := drive(ctx, d, workers, rt, false, func(ctx context.Context, w int) error {
		asked := time.Now()
		rel, err := handles[w].take(ctx, true)
		if err != nil {
			if ctx.Err() != nil {
				rec.cut(asked, time.Now())
			}
			return err
		}
		holders.Enter()
		rec.got(w, asked, time.Now())
		holders.Exit()
		rec.releasing(w, time.Now())
		// The release must happen even when the run's deadline has passed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return rel(rctx)
	})
	s.Violations = holders.Violations()
	s.Ops = int64(rec.handoffs)
	s.P50, s.P99 = percentile(rec.waits, 50), percentile(rec.waits, 99)
	if len(rec.gaps) > 0 {
		s.Extra = append(s.Extra, Figure{Name: "gap p50", Value: ms(percentile(rec.gaps, 50)), Unit: "ms"})
	}
	if starved := workers - len(rec.winners); starved > 0 {
		s.Extra = append(s.Extra, Figure{Name: "never acquired", Value: float64(starved), Unit: " goroutines"})
	}
	if rec.acquired > 0 {
		s.Extra = append(s.Extra, Figure{Name: "acquisitions/s", Value: float64(rec.acquired) / s.Elapsed.Seconds()},
			Figure{Name: "re-acquired", Value: 100 * float64(rec.reacquired) / float64(rec.acquired), Unit: "%"})
	}
	return s, nil
}

// must returns v, or panics with err: for constructors given fixed options
// that are valid by construction.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
