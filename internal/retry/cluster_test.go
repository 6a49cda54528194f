package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/redistest"
)

// A script whose two keys are split by a slot migration in progress gets
// TRYAGAIN on every send until the last key has moved: key by key with a
// pause, that outlasts go-redis's own retries and Attempts, and Do goes on
// within ClusterBudget. The script runs once: both counters are 1.
func TestDo_cluster_absorbsSplitSlot(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	const a, b = "{mig}a", "{mig}b"
	require.NoError(t, rdb.Set(ctx, a, 0, 0).Err())
	require.NoError(t, rdb.Set(ctx, b, 0, 0).Err())
	src, err := rdb.MasterForKey(ctx, a)
	require.NoError(t, err)

	moved := make(chan error, 1)
	go func() {
		_, _, err := c.MoveSlotWith(context.WithoutCancel(ctx), a, redistest.MoveOptions{Batch: 1, Pause: 2 * time.Second})
		moved <- err
	}()
	slot := int(redistest.KeySlot(a))
	require.Eventually(t, func() bool {
		return src.ClusterCountKeysInSlot(ctx, slot).Val() == 1
	}, 10*time.Second, 5*time.Millisecond, "one of the two keys migrated")

	p := retry.DefaultPolicy().For(rdb)
	tries := 0
	err = retry.Do(ctx, p, func(ctx context.Context, _ int) error {
		tries++
		return rdb.Eval(ctx, "redis.call('INCR', KEYS[1]) return redis.call('INCR', KEYS[2])", []string{a, b}).Err()
	})
	require.NoError(t, err, "after %d calls", tries)
	require.Greater(t, tries, p.Attempts, "the split outlasted Attempts")
	require.NoError(t, <-moved)
	require.Equal(t, "1", rdb.Get(ctx, a).Val())
	require.Equal(t, "1", rdb.Get(ctx, b).Val())

}
