package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// The tests in this file hold Until and Release to what Redis did: Until is
// never after the key's expiry as Redis has it, and Release returns nil only
// when one of its sends ended the hold.

// sendModes are the two ways a go-redis client sends a command: with its own
// re-sends after a failure (the default, MaxRetries 3), and once.
var sendModes = []struct {
	name   string
	adjust func(*redis.Options)
}{
	{"defaults", func(*redis.Options) {}},
	{"sendsOnce", func(o *redis.Options) { o.MaxRetries = -1 }},
}

// leaseKind is one kind of lease, for tests that hold every kind to the
// same rule.
type leaseKind struct {
	name string
	// lock returns the lock of this kind called name on locks.
	lock func(locks *lock.Client, name string, opts ...lock.Option) acquirer
	// taken is what a lease of this kind is told when another owner holds
	// the lock after it: ErrLeaseTaken, or ErrLeaseExpired for permits.
	taken error
	// rival, when not nil, is the lock a rival takes to show the lease is
	// over (readers share: a rival of a reader is a writer).
	rival func(locks *lock.Client, name string, opts ...lock.Option) acquirer
}

// rivalOf returns the lock a rival of k takes.
func (k leaseKind) rivalOf(locks *lock.Client, name string, opts ...lock.Option) acquirer {
	if k.rival != nil {
		return k.rival(locks, name, opts...)
	}
	return k.lock(locks, name, opts...)
}

// readLock is an RWMutex's read side as an acquirer.
type readLock struct{ m *lock.RWMutex }

func (r readLock) Acquire(ctx context.Context) (*lock.Lease, error) { return r.m.AcquireRead(ctx) }
func (r readLock) TryAcquire(ctx context.Context) (*lock.Lease, error) {
	return r.m.TryAcquireRead(ctx)
}

var leaseKinds = []leaseKind{
	{"mutex", func(c *lock.Client, n string, o ...lock.Option) acquirer { return c.Mutex(n, o...) }, lock.ErrLeaseTaken, nil},
	{"fair", func(c *lock.Client, n string, o ...lock.Option) acquirer {
		return c.Mutex(n, append(o, lock.WithFair(true))...)
	}, lock.ErrLeaseTaken, nil},
	{"rwWrite", func(c *lock.Client, n string, o ...lock.Option) acquirer { return c.RWMutex(n, o...) }, lock.ErrLeaseTaken, nil},
	{"rwRead", func(c *lock.Client, n string, o ...lock.Option) acquirer { return readLock{c.RWMutex(n, o...)} }, lock.ErrLeaseExpired,
		func(c *lock.Client, n string, o ...lock.Option) acquirer { return c.RWMutex(n, o...) }},
	{"semaphore", func(c *lock.Client, n string, o ...lock.Option) acquirer { return c.Semaphore(n, 1, o...) }, lock.ErrLeaseExpired, nil},
}

// expiryOf returns when the key of name's mutex expires, on this process's
// clock, at the latest: the reply to PTTL came after Redis read it.
func expiryOf(t *testing.T, rdb redis.UniversalClient, key string) time.Time {
	t.Helper()
	pttl, err := rdb.PTTL(t.Context(), key).Result()
	require.NoError(t, err)
	return time.Now().Add(pttl + time.Millisecond) // PTTL rounds down
}

// TestLease_Until_shorterRenewalLowersIt: TTL 3s, max hold 4s, watchdog on;
// Extend at 2.5s sets the key's expiry to 5.5s, then the watchdog's renewal
// at 3s sets only the 1s left of the max hold. Until must follow the key
// down: a lease believed held (Err nil, before Until) while Redis lets
// another owner acquire is two owners at once.
func TestLease_Until_shorterRenewalLowersIt(t *testing.T) {
	p := testPrefix(t)
	rdb := sharedClient(t)
	locks := mustNew(t, rdb, lock.WithKeyPrefix(p))
	defer locks.Close()
	other := mustNew(t, sharedClient(t), lock.WithKeyPrefix(p))
	defer other.Close()
	ctx := t.Context()
	m := locks.Mutex("report", lock.WithTTL(3*time.Second), lock.WithMaxHold(4*time.Second))
	acquired := time.Now()
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	time.Sleep(time.Until(acquired.Add(2500 * time.Millisecond)))
	require.NoError(t, l.Extend(ctx))
	extended := expiryOf(t, rdb, m.LockKey())

	// The watchdog's renewal near 3s lowers the key's expiry.
	var expiry time.Time
	eventually(t, func() bool {
		expiry = expiryOf(t, rdb, m.LockKey())
		return expiry.Before(extended.Add(-time.Second))
	}, "the watchdog's renewal with the rest of the max hold")
	require.Falsef(t, l.Until().After(expiry),
		"BUG: Until is %v after the key's expiry in Redis", l.Until().Sub(expiry))

	om := other.Mutex("report", lock.WithTTL(time.Minute))
	for {
		ol, err := om.TryAcquire(ctx)
		if err == nil {
			believedHeld := l.Err() == nil && time.Now().Before(l.Until())
			left := time.Until(l.Until())
			require.NoError(t, ol.Release(ctx))
			require.Falsef(t, believedHeld, "BUG: another owner acquired while the lease is held (%v before its Until)", left)
			break
		}
		require.ErrorIs(t, err, lock.ErrNotAcquired)
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, l.Err(), lock.ErrLeaseExpired)
}

// TestLease_Release_afterRedisLostIt_takenAgain: Redis restarts without
// persistence and forgets the lock and its fence counter; another process
// acquires the name and draws token 1 again. The lost lease's Release must
// say ErrLeaseTaken on go-redis's defaults too, where every release may
// have been sent twice: the holder's token is not above the lease's, so no
// earlier send of the release can have deleted the lock.
func TestLease_Release_afterRedisLostIt_takenAgain(t *testing.T) {
	for _, mode := range sendModes {
		for _, k := range leaseKinds {
			if k.taken != lock.ErrLeaseTaken {
				continue // permits have no token
			}
			t.Run(mode.name+"/"+k.name, func(t *testing.T) {
				s := redistest.New(t, redistest.Options{})
				p := testPrefix(t)
				locks := mustNew(t, s.Client(mode.adjust), lock.WithKeyPrefix(p))
				defer locks.Close()
				other := mustNew(t, s.Client(), lock.WithKeyPrefix(p))
				defer other.Close()
				ctx := t.Context()
				opts := []lock.Option{lock.WithTTL(10 * time.Minute), lock.WithWatchdog(false)}
				l, err := k.lock(locks, "forgotten", opts...).TryAcquire(ctx)
				require.NoError(t, err)
				require.NoError(t, s.Kill())
				require.NoError(t, s.Restart(ctx))
				ol, err := k.lock(other, "forgotten", opts...).TryAcquire(ctx)
				require.NoError(t, err)
				require.Equal(t, l.Fence().Token, ol.Fence().Token, "setup: the counter started again")
				require.NoError(t, l.Err(), "still valid here")

				rerr := l.Release(ctx)
				require.ErrorIsf(t, rerr, lock.ErrLeaseTaken, "BUG: the lost lease's Release returned %v", rerr)
				require.NoError(t, ol.Extend(ctx), "the other owner's lock is intact")
				require.NoError(t, ol.Release(ctx))
			})
		}
	}
}

// occupy runs a BLPOP on rdb's only connection until release is called, and
// returns once the server is running it.
func occupy(t *testing.T, rdb *redis.Client, direct *redis.Client, list string) (release func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rdb.BLPop(context.Background(), time.Minute, list).Err()
	}()
	eventually(t, func() bool {
		clients, err := direct.ClientList(t.Context()).Result()
		require.NoError(t, err)
		return strings.Contains(clients, "cmd=blpop")
	}, "the pool's only connection runs BLPOP")
	return func() {
		require.NoError(t, direct.RPush(context.Background(), list, "x").Err())
		<-done
	}
}

// TestLease_Release_sendWaitedInPool: Release is called well before Until,
// but its one send waits for the pool's only connection; meanwhile the lock
// expires and another owner takes it. The send runs after that, finds the
// lock taken, and no reply was lost and nothing was re-sent: Release must
// not say nil, on go-redis's defaults as on send-once. It is decided by
// when its send ran, not by when Release was called.
func TestLease_Release_sendWaitedInPool(t *testing.T) {
	for _, mode := range sendModes {
		for _, k := range leaseKinds {
			t.Run(mode.name+"/"+k.name, func(t *testing.T) {
				direct := sharedClient(t)
				o := &redis.Options{Addr: shared.Addr(), PoolSize: 1, PoolTimeout: time.Minute}
				mode.adjust(o)
				rdb := redis.NewClient(o)
				t.Cleanup(func() { _ = rdb.Close() })
				p := testPrefix(t)
				locks := mustNew(t, rdb, lock.WithKeyPrefix(p))
				defer locks.Close()
				other := mustNew(t, direct, lock.WithKeyPrefix(p))
				defer other.Close()
				ctx := t.Context()
				const ttl = 1500 * time.Millisecond
				mine := k.lock(locks, "pooled", lock.WithTTL(ttl), lock.WithWatchdog(false))
				warm, err := mine.TryAcquire(ctx) // scripts loaded
				require.NoError(t, err)
				require.NoError(t, warm.Release(ctx))

				l, err := mine.TryAcquire(ctx)
				require.NoError(t, err)
				unblock := occupy(t, rdb, direct, p+":list")
				released := make(chan error, 1)
				go func() { released <- l.Release(context.Background()) }()
				require.Eventually(t, func() bool { return !time.Now().Before(l.Until()) }, 20*time.Second, time.Millisecond)
				// The lock expires in Redis and another owner takes it while
				// the release still waits for a connection.
				var ol *lock.Lease
				eventually(t, func() bool {
					ol, err = k.rivalOf(other, "pooled", lock.WithTTL(time.Minute)).TryAcquire(ctx)
					return err == nil
				}, "another owner takes the expired lock")
				select {
				case err := <-released:
					t.Fatalf("setup: Release returned before its send could run: %v", err)
				default:
				}
				unblock()
				rerr := <-released
				require.ErrorIsf(t, rerr, k.taken, "BUG: a release whose send ran after the lock was lost and taken returned %v", rerr)
				require.NoError(t, ol.Extend(ctx), "the other owner's lock is intact")
				require.NoError(t, ol.Release(ctx))
			})
		}
	}
}

// TestLease_Release_redisPausedPastTTL: Redis is paused (SIGSTOP) when
// Release is called, before Until, and resumed after the lock's TTL has run
// out, within the client's read timeout. The release then runs on a lock
// that expired with nobody after it: ErrLeaseExpired, not nil, on go-redis's
// defaults as on send-once, for every kind of lease.
func TestLease_Release_redisPausedPastTTL(t *testing.T) {
	for _, mode := range sendModes {
		for _, k := range leaseKinds {
			t.Run(mode.name+"/"+k.name, func(t *testing.T) {
				s := redistest.New(t, redistest.Options{})
				rdb := s.Client(func(o *redis.Options) {
					o.ReadTimeout = 20 * time.Second
					mode.adjust(o)
				})
				p := testPrefix(t)
				locks := mustNew(t, rdb, lock.WithKeyPrefix(p), lock.WithReleaseTimeout(time.Minute))
				defer locks.Close()
				ctx := t.Context()
				const ttl = 500 * time.Millisecond
				mine := k.lock(locks, "paused", lock.WithTTL(ttl), lock.WithWatchdog(false))
				warm, err := mine.TryAcquire(ctx)
				require.NoError(t, err)
				require.NoError(t, warm.Release(ctx))

				l, err := mine.TryAcquire(ctx)
				require.NoError(t, err)
				expiry := time.Now().Add(ttl)
				require.NoError(t, s.Pause())
				t.Cleanup(func() { _ = s.Resume() })
				released := make(chan error, 1)
				go func() { released <- l.Release(context.Background()) }()
				time.Sleep(time.Until(expiry.Add(200 * time.Millisecond)))
				require.NoError(t, s.Resume())
				rerr := <-released
				require.ErrorIsf(t, rerr, lock.ErrLeaseExpired, "BUG: a release that ran after the lock expired returned %v", rerr)
				after := mustNew(t, s.Client(), lock.WithKeyPrefix(p))
				defer after.Close()
				fl, err := k.lock(after, "paused").TryAcquire(ctx)
				require.NoError(t, err, "nobody holds it")
				require.NoError(t, fl.Release(ctx))
			})
		}
	}
}
