package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestKinds_Cluster_underResharding: the lock kinds beside the plain
// Mutex (TestMutex_Cluster_underResharding) on an ordinary ClusterClient
// while their slots are moved again and again, key by key with a pause:
// an RWMutex's writers (with Extend) and readers, a Semaphore of 2
// permits, and a fair Mutex whose waiters queue. No error reaches the
// caller; no reader holds beside a writer, no two writers, never more
// than 2 permits, at most one fair holder; and the fence tokens of each
// name strictly increase. The TTL is short: under this load on a Cluster a
// waiter now and then sleeps until its TTL cap instead of being woken (a
// notification not delivered), which costs time, never safety.
func TestKinds_Cluster_underResharding(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	locks := mustNew(t, rdb)
	defer locks.Close()
	tags := []string{"{kr1}", "{kr2}", "{kr3}"}
	for _, tag := range tags {
		for i := range 10 {
			require.NoError(t, rdb.Set(ctx, fmt.Sprintf("%s:fill:%d", tag, i), i, 0).Err())
		}
	}
	stop := c.Reshard(ctx, tags, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond})
	rw := locks.RWMutex("kr1/doc", lock.WithTTL(2*time.Second))
	sem := locks.Semaphore("kr2/pool", 2, lock.WithTTL(2*time.Second))
	fair := locks.Mutex("kr3/queue", lock.WithTTL(2*time.Second), lock.WithFair(true))
	const workers, rounds = 4, 8
	var (
		wg                     sync.WaitGroup
		mu                     sync.Mutex
		errs                   []error
		writers, readers, sems int
		fairs                  int
		last                   = map[string]uint64{}
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		errs = append(errs, fmt.Errorf(format, a...))
		mu.Unlock()
	}
	// hold runs acquire, checks and counts the holder with enter, waits a
	// little, and releases.
	hold := func(what string, acquire func(context.Context) (*lock.Lease, error), enter func(int) string, extend bool) {
		l, err := acquire(ctx)
		if err != nil {
			fail("acquire %s: %w", what, err)
			return
		}
		mu.Lock()
		if bad := enter(1); bad != "" {
			errs = append(errs, fmt.Errorf("%s: %s", what, bad))
		}
		if f := l.Fence(); f.Token != 0 {
			if f.Token <= last[what] {
				errs = append(errs, fmt.Errorf("%s: token %d after %d", what, f.Token, last[what]))
			}
			last[what] = f.Token
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		if extend {
			if err := l.Extend(ctx); err != nil {
				fail("extend %s: %w", what, err)
			}
		}
		mu.Lock()
		enter(-1)
		mu.Unlock()
		if err := l.Release(ctx); err != nil {
			fail("release %s: %w", what, err)
		}
	}
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				switch (w + i) % 4 {
				case 0:
					hold("writer", rw.Acquire, func(d int) string {
						writers += d
						if d > 0 && (writers > 1 || readers > 0) {
							return fmt.Sprintf("%d writers, %d readers", writers, readers)
						}
						return ""
					}, true)
				case 1:
					hold("reader", rw.AcquireRead, func(d int) string {
						readers += d
						if d > 0 && writers > 0 {
							return "a reader beside a writer"
						}
						return ""
					}, false)
				case 2:
					hold("semaphore", sem.Acquire, func(d int) string {
						sems += d
						if sems > 2 {
							return fmt.Sprintf("%d permits held", sems)
						}
						return ""
					}, false)
				case 3:
					hold("fair", fair.Acquire, func(d int) string {
						fairs += d
						if fairs > 1 {
							return "two fair holders"
						}
						return ""
					}, false)
				}
			}
		})
	}
	wg.Wait()
	st := stop()
	require.NoError(t, st.Err)
	t.Logf("%d acquisitions while %d slot moves migrated %d keys; %d errors", workers*rounds, st.Moves, st.Keys, len(errs))
	require.Positive(t, st.Moves)
	require.Empty(t, errs)
}
