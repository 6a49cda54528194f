package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

type readAcquirer struct{ m *lock.RWMutex }

func (r readAcquirer) Acquire(ctx context.Context) (*lock.Lease, error) { return r.m.AcquireRead(ctx) }
func (r readAcquirer) TryAcquire(ctx context.Context) (*lock.Lease, error) {
	return r.m.TryAcquireRead(ctx)
}

func TestRWMutex_readersShareWritersExclude(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	ctx := t.Context()
	m := locks.RWMutex("catalog", lock.WithTTL(time.Minute))
	var readers []*lock.Lease
	for range 3 {
		l, err := m.TryAcquireRead(ctx)
		require.NoError(t, err)
		require.Zero(t, l.Fence().Token)
		readers = append(readers, l)
	}
	_, err := m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "readers exclude a writer")
	for _, l := range readers {
		require.NoError(t, l.Extend(ctx))
		require.NoError(t, l.Release(ctx))
	}
	w, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NotZero(t, w.Fence().Token)
	_, err = m.TryAcquireRead(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "a writer excludes readers")
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "and writers")

	// A writer's release wakes every waiting reader (their wait cap, the
	// writer's TTL, is longer than their context).
	var waits []<-chan error
	for range 3 {
		waits = append(waits, waitFor(readAcquirer{m}))
	}
	eventually(t, func() bool { return numSub(t, m.Channel()) == 1 }, "readers subscribed")
	time.Sleep(20 * time.Millisecond) // let all three queue up; not needed for correctness
	require.NoError(t, w.Release(ctx))
	for _, got := range waits {
		require.NoError(t, <-got)
	}
	w2, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, w2.Fence().Token, w.Fence().Token)
	require.NoError(t, w2.Release(ctx))
}

// TestRWMutex_writerPreferred: once a writer waits, new readers wait too;
// the writer gets the lock when the last reader leaves.
func TestRWMutex_writerPreferred(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	ctx := t.Context()
	m := locks.RWMutex("prefs", lock.WithTTL(time.Minute))
	r1 := mustTake(t, m.TryAcquireRead)
	writer := waitFor(m)
	eventually(t, func() bool {
		l, err := m.TryAcquireRead(ctx)
		if err == nil {
			require.NoError(t, l.Release(ctx))
			return false
		}
		require.ErrorIs(t, err, lock.ErrNotAcquired)
		return true
	}, "new readers refused while the writer waits")
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, <-writer)
}

// TestRWMutex_writerWithdraws: a writer that gives up stops blocking
// readers at once.
func TestRWMutex_writerWithdraws(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	ctx := t.Context()
	m := locks.RWMutex("withdraw", lock.WithTTL(time.Minute))
	r1 := mustTake(t, m.TryAcquireRead)
	requireGiveUp(t, m)
	r2, err := m.TryAcquireRead(ctx)
	require.NoError(t, err, "the waiting writer's mark is gone")
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))
}

// TestRWMutex_ConcurrentSafe: writers and readers on two Clients; a writer
// is never inside with anyone else.
func TestRWMutex_ConcurrentSafe(t *testing.T) {
	clients := twoClients(t, testPrefix(t))
	var readers, writers atomic.Int64
	// Even workers write, odd ones read.
	contend(t, 8, 20, func(w int) func(context.Context) (*lock.Lease, error) {
		m := clients[w%2].RWMutex("shared")
		if w%2 == 0 {
			return m.Acquire
		}
		return m.AcquireRead
	}, func(w int, _ *lock.Lease) {
		if w%2 == 0 {
			if writers.Add(1) != 1 || readers.Load() != 0 {
				t.Error("writer not alone")
			}
			time.Sleep(100 * time.Microsecond)
			writers.Add(-1)
		} else {
			readers.Add(1)
			if writers.Load() != 0 {
				t.Error("reader inside with a writer")
			}
			time.Sleep(100 * time.Microsecond)
			readers.Add(-1)
		}
	})
}
