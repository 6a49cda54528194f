package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

func queueLen(t testing.TB, m *lock.Mutex) int64 {
	n, err := sharedClient(t).ZCard(context.Background(), m.QueueKey()).Result()
	require.NoError(t, err)
	return n
}

// TestMutex_Fair_FIFO: waiters from two Clients get the lock in the order
// they arrived, and the releaser cannot cut in.
func TestMutex_Fair_FIFO(t *testing.T) {
	prefix := testPrefix(t)
	clients := twoClients(t, prefix, lock.WithFair(true))
	ctx := t.Context()
	m := clients[0].Mutex("fifo", lock.WithTTL(time.Minute))
	held, err := m.TryAcquire(ctx)
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	const waiters = 6
	for i := range waiters {
		wm := clients[i%2].Mutex("fifo", lock.WithTTL(time.Minute))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := wm.Acquire(ctx)
			if !assertNoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assertNoError(t, l.Release(ctx))
		})
		eventually(t, func() bool { return queueLen(t, m) == int64(i+1) }, fmt.Sprintf("waiter %d queued", i))
	}
	require.NoError(t, held.Release(ctx))
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "the releaser goes to the back")
	wg.Wait()
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
	require.Zero(t, queueLen(t, m))
}

// TestMutex_Fair_deadWaiterEvicted: a waiter that crashed while at the head
// of the queue is evicted, and the next waiter gets the lock.
func TestMutex_Fair_deadWaiterEvicted(t *testing.T) {
	locks := newLocks(t, sharedClient(t), lock.WithFair(true))
	ctx := t.Context()
	m, held := tryMutex(t, locks, "evict", lock.WithTTL(time.Minute))
	_, _, err := m.EnqueueAs(ctx, lock.NewOwner()) // queued, then silent
	require.NoError(t, err)
	got := waitFor(m)
	eventually(t, func() bool { return queueLen(t, m) == 2 }, "live waiter queued")
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-got)
}

// TestMutex_Fair_withdraw: a waiter that gives up leaves the queue, so the
// lock is not kept free for it.
func TestMutex_Fair_withdraw(t *testing.T) {
	locks := newLocks(t, sharedClient(t), lock.WithFair(true))
	ctx := t.Context()
	m, held := tryMutex(t, locks, "withdraw", lock.WithTTL(time.Minute))
	requireGiveUp(t, m)
	require.Zero(t, queueLen(t, m))
	require.NoError(t, held.Release(ctx))
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// TestMutex_Fair_ConcurrentSafe: fair mode keeps mutual exclusion and
// strictly increasing tokens under contention.
func TestMutex_Fair_ConcurrentSafe(t *testing.T) {
	locks := newLocks(t, sharedClient(t), lock.WithFair(true))
	m := locks.Mutex("fair-counter")
	var (
		mu     sync.Mutex
		inside bool
		last   uint64
	)
	contend(t, 6, 15, func(int) func(context.Context) (*lock.Lease, error) { return m.Acquire }, func(_ int, l *lock.Lease) {
		mu.Lock()
		if inside || l.Fence().Token <= last {
			t.Error("exclusion or token order broken")
		}
		inside, last = true, l.Fence().Token
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		inside = false
		mu.Unlock()
	})
}
