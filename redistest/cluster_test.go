package redistest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestCluster_routesKeysToAllShards(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	require.Len(t, c.Masters(), 3)
	require.Len(t, c.Nodes(), 3)
	cc := c.Client()
	const n = 300
	for i := range n {
		require.NoError(t, cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err())
	}
	var total int64
	for _, m := range c.Masters() {
		size, err := m.Client().DBSize(ctx).Result()
		require.NoError(t, err)
		require.Positive(t, size, "master %s got no keys", m.Addr())
		total += size
	}
	require.Equal(t, int64(n), total)
	// Each key sits on the master that owns its slot.
	for _, m := range c.Masters() {
		keys, err := m.Client().Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			owner, err := cc.MasterForKey(ctx, k)
			require.NoError(t, err)
			require.Equal(t, m.Addr(), owner.Options().Addr)
		}
	}
	info, err := cc.ClusterInfo(ctx).Result()
	require.NoError(t, err)
	require.Contains(t, info, "cluster_state:ok")
}

func TestCluster_FailoverShard_keepsDataAndClient(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	ctx := t.Context()
	require.Len(t, c.Nodes(), 6)
	cc := c.Client()
	for i := range 100 {
		require.NoError(t, cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	const key = "k0"
	before, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	oldAddr := before.Options().Addr

	require.NoError(t, c.FailoverShard(ctx, key))

	after, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	require.NotEqual(t, oldAddr, after.Options().Addr)
	var masterAddrs []string
	for _, m := range c.Masters() {
		masterAddrs = append(masterAddrs, m.Addr())
	}
	require.Contains(t, masterAddrs, after.Options().Addr)
	require.NotContains(t, masterAddrs, oldAddr)

	for i := range 100 {
		v, err := cc.Get(ctx, fmt.Sprintf("k%d", i)).Int()
		require.NoError(t, err)
		require.Equal(t, i, v)
	}
	require.NoError(t, cc.Set(ctx, key, "new", 0).Err())
	require.Equal(t, "new", cc.Get(ctx, key).Val())
}

func TestCluster_FailoverShard_needsReplica(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 1})
	require.Error(t, c.FailoverShard(t.Context(), "k"))
}
