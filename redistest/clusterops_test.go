package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// Each operation ends with the slot served by another master and the data
// intact, seen through a client that reloads its map.
func TestCluster_operations(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	const key = "{ops}:k"
	for i := range 25 {
		require.NoError(t, rdb.Set(ctx, key+string(rune('a'+i)), i, 0).Err())
	}
	owner := func() string {
		for {
			rdb.ReloadState(ctx)
			time.Sleep(50 * time.Millisecond)
			m, err := rdb.MasterForKey(ctx, key)
			if err == nil && m.Ping(ctx).Err() == nil && m.Set(ctx, key+"probe", 1, 0).Err() == nil {
				return m.Options().Addr
			}
		}
	}
	before := owner()
	to, n, err := c.MoveSlotWith(ctx, key, redistest.MoveOptions{Batch: 3, Pause: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 26, n, "every key of the slot migrated")
	require.NotEqual(t, before, to.Addr())
	require.Equal(t, to.Addr(), owner())
	for _, mode := range []redistest.FailoverMode{redistest.FailoverPlain, redistest.FailoverForce, redistest.FailoverTakeover} {
		before := owner()
		require.NoError(t, c.Failover(ctx, key, mode), mode)
		require.NotEqual(t, before, owner(), mode)
	}
	before = owner()
	killed, err := c.KillMaster(ctx, key)
	require.NoError(t, err)
	require.Equal(t, before, killed.Addr())
	require.NotEqual(t, before, owner())
	require.NoError(t, c.Rejoin(ctx, killed))
	require.Equal(t, "24", rdb.Get(ctx, key+"y").Val())

	stop := c.Reshard(context.WithoutCancel(ctx), []string{key}, redistest.MoveOptions{Batch: 1})
	time.Sleep(300 * time.Millisecond)
	st := stop()
	require.NoError(t, st.Err)
	require.Positive(t, st.Moves)
	require.Equal(t, "24", rdb.Get(ctx, key+"y").Val())
}
