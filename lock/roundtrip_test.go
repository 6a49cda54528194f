package lock_test

import (
	"fmt"
	"time"

	"context"
	"github.com/redkit-go/redkit/lock"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// rtCounter is a go-redis hook counting commands sent: one per round trip
// for single commands, one per pipeline.
type rtCounter struct{ n atomic.Int64 }

func (c *rtCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*rtCounter)(nil)

// countedClient returns a client of the shared server with a round-trip
// counter.
func countedClient(t testing.TB) (*redis.Client, *rtCounter) {
	rdb := sharedClient(t)
	c := &rtCounter{}
	rdb.AddHook(c)
	return rdb, c
}

// TestMutex_roundTrips: an uncontended acquire and a release cost one round
// trip each, fence token included.
func TestMutex_roundTrips(t *testing.T) {
	rdb, rt := countedClient(t)
	locks := newLocks(t, rdb)
	warmUp(t, locks)
	m := locks.Mutex("rt")
	rt.n.Store(0)
	l, err := m.TryAcquire(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, rt.n.Load(), "acquire")
	require.NoError(t, l.Release(t.Context()))
	require.EqualValues(t, 2, rt.n.Load(), "release")
	rt.n.Store(0)
	l, err = m.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	require.EqualValues(t, 2, rt.n.Load(), "Acquire of a free lock")
}

// TestLease_watchdogBatchesRenewals: 20 leases of one slot group are renewed
// together, one round trip per round of renewals.
func TestLease_watchdogBatchesRenewals(t *testing.T) {
	rdb, rt := countedClient(t)
	locks := newLocks(t, rdb, lock.WithTTL(1500*time.Millisecond))
	warmUp(t, locks)
	var leases []*lock.Lease
	for i := range 20 {
		l, err := locks.Mutex(fmt.Sprintf("batch/job-%d", i)).TryAcquire(t.Context())
		require.NoError(t, err)
		leases = append(leases, l)
	}
	first := leases[len(leases)-1].Until()
	rt.n.Store(0)
	eventually(t, func() bool {
		for _, l := range leases {
			if !l.Until().After(first) {
				return false
			}
		}
		return true
	}, "every lease renewed")
	renewals := rt.n.Load()
	require.Less(t, renewals, int64(len(leases)), "renewals share round trips")
	for _, l := range leases {
		require.NoError(t, l.Err())
		require.NoError(t, l.Release(t.Context()))
	}
}
