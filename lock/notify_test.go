package lock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestMutex_oneAttemptPerRelease: five local waiters, one release: exactly
// one acquire attempt follows, by the first waiter in line, and the others
// keep waiting without touching Redis. All waiters of the Client share one
// pub/sub connection, whatever the number of names.
func TestMutex_oneAttemptPerRelease(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	prefix := testPrefix(t)
	holders := mustNew(t, s.Client(), lock.WithKeyPrefix(prefix))
	defer holders.Close()
	rt := &rtCounter{}
	rdb := s.Client()
	rdb.AddHook(rt)
	locks := mustNew(t, rdb, lock.WithKeyPrefix(prefix))
	defer locks.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	held, err := holders.Mutex("one", lock.WithTTL(time.Minute)).TryAcquire(ctx)
	require.NoError(t, err)
	_, err = holders.Mutex("two", lock.WithTTL(time.Minute)).TryAcquire(ctx)
	require.NoError(t, err)

	m := locks.Mutex("one", lock.WithTTL(time.Minute))
	var (
		mu     sync.Mutex
		winner []int
		wg     sync.WaitGroup
	)
	for i := range 5 {
		wg.Go(func() {
			if _, err := m.Acquire(ctx); err == nil {
				mu.Lock()
				winner = append(winner, i)
				mu.Unlock()
			}
		})
		eventually(t, func() bool { return locks.Waiters(m) == i+1 }, fmt.Sprintf("waiter %d queued", i))
	}
	wg.Go(func() { _, _ = locks.Mutex("two").Acquire(ctx) })

	eventually(t, func() bool { return pubsubConns(t, s) == 1 }, "one subscriber connection")
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 1, pubsubConns(t, s), "one subscriber connection for every name")

	rt.n.Store(0)
	require.NoError(t, held.Release(ctx))
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(winner) == 1 }, "a waiter got the lock")
	time.Sleep(100 * time.Millisecond) // room for extra attempts, if any were made
	require.EqualValues(t, 1, rt.n.Load(), "one acquire attempt for one release")
	require.Equal(t, []int{0}, winner, "the first waiter in line")
	require.Equal(t, 4, locks.Waiters(m))

	cancel()
	wg.Wait()
}

func pubsubConns(t testing.TB, s *redistest.Server) int {
	list, err := s.Client().ClientList(context.Background()).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " flags=P ") { // a connection in subscribe mode
			n++
		}
	}
	return n
}
