package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

func TestSemaphore_permits(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	ctx := t.Context()
	s := locks.Semaphore("pool", 3)
	var held []*lock.Lease
	for range 3 {
		l, err := s.TryAcquire(ctx)
		require.NoError(t, err)
		require.Zero(t, l.Fence().Token, "permits carry no fence")
		held = append(held, l)
	}
	_, err := s.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)

	got := waitFor(s)
	require.NoError(t, held[0].Release(ctx))
	require.NoError(t, <-got, "a release wakes a waiter")
	for _, l := range held[1:] {
		require.NoError(t, l.Extend(ctx))
		require.NoError(t, l.Release(ctx))
	}
	require.NoError(t, held[1].Release(ctx), "a second Release returns the first result")
}

func TestSemaphore_expiredPermitIsFreed(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	s := locks.Semaphore("leaky", 1, lock.WithTTL(50*time.Millisecond), lock.WithWatchdog(false))
	dead, err := s.TryAcquire(ctx) // its holder "crashes"
	require.NoError(t, err)
	// The waiter's own lease is long: under load a 50ms one could lapse
	// before its Release below, which would then rightly say "expired".
	l, err := locks.Semaphore("leaky", 1, lock.WithTTL(time.Minute), lock.WithWatchdog(false)).Acquire(ctx)
	require.NoError(t, err, "the permit came back at its TTL")
	<-dead.Done()
	require.ErrorIs(t, dead.Err(), lock.ErrLeaseExpired)
	require.ErrorIs(t, dead.Extend(ctx), lock.ErrLeaseExpired)
	require.ErrorIs(t, dead.Release(ctx), lock.ErrLeaseExpired)
	require.NoError(t, l.Release(ctx))
}

func TestSemaphore_Extend_neverRecreates(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	s := locks.Semaphore("lapsed", 2, lock.WithTTL(30*time.Millisecond), lock.WithWatchdog(false))
	l, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	<-l.Done()
	// Wait for Redis's expiry too, then check extend does not bring it back.
	require.Eventually(t, func() bool {
		_, err := s.TryAcquire(ctx)
		return err == nil
	}, 20*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, l.Extend(ctx), lock.ErrLeaseExpired)
}

// TestSemaphore_ConcurrentSafe: 8 goroutines on two Clients share 3
// permits; never more than 3 hold one at a time.
func TestSemaphore_ConcurrentSafe(t *testing.T) {
	clients := twoClients(t, testPrefix(t))
	var inside, peak atomic.Int64
	contend(t, 8, 25, func(w int) func(context.Context) (*lock.Lease, error) {
		return clients[w%2].Semaphore("workers", 3).Acquire
	}, func(int, *lock.Lease) {
		n := inside.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		inside.Add(-1)
	})
	require.LessOrEqual(t, peak.Load(), int64(3))
}

func TestSemaphore_badInput(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	for _, n := range []int{0, -1, lock.MaxPermits + 1} {
		_, err := locks.Semaphore("ok", n).TryAcquire(t.Context())
		require.ErrorIs(t, err, lock.ErrInvalid, "permits %d", n)
	}
	_, err := locks.Semaphore("a b", 1).Acquire(t.Context())
	require.ErrorIs(t, err, lock.ErrInvalid)
}
