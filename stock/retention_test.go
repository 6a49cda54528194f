package stock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// Operation markers expire after the idempotency window (held reservations:
// after their TTL plus the window); nothing else an order writes expires or
// lingers.
func TestInventory_markersExpireAfterWindow(t *testing.T) {
	inv, rdb, prefix := newInventory(t, stock.WithIdempotencyWindow(2*time.Minute))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10))
	ttl := func(id string) time.Duration {
		d, err := rdb.PTTL(ctx, prefix+":stock:v1:{sku}:op:"+id).Result()
		require.NoError(t, err)
		return d
	}
	_, err := inv.Deduct(ctx, order("o1", "u", "sku", 1))
	require.NoError(t, err)
	require.InDelta(t, 2*time.Minute, ttl("o1"), float64(30*time.Second))
	_, err = inv.Deduct(ctx, order("o2", "u", "sku", 100)) // refusals too
	require.ErrorIs(t, err, stock.ErrSoldOut)
	require.InDelta(t, 2*time.Minute, ttl("o2"), float64(30*time.Second))
	_, err = inv.Restock(ctx, "r1", "sku", 1)
	require.NoError(t, err)
	require.InDelta(t, 2*time.Minute, ttl("r1"), float64(30*time.Second))
	_, err = inv.Reserve(ctx, order("h1", "u", "sku", 1), time.Hour)
	require.NoError(t, err)
	require.InDelta(t, time.Hour+2*time.Minute, ttl("h1"), float64(30*time.Second))
	_, err = inv.Cancel(ctx, order("h1", "u", "sku", 1))
	require.NoError(t, err)
	require.InDelta(t, 2*time.Minute, ttl("h1"), float64(30*time.Second))

	// A marker gone (the window passed): the same ID is a new operation.
	require.NoError(t, rdb.Del(ctx, prefix+":stock:v1:{sku}:op:o1").Err())
	res, err := inv.Deduct(ctx, order("o1", "u", "sku", 1))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, int64(2), level(t, inv, "sku").Sold)

	// Only the SKU's own keys and the markers exist.
	for _, k := range keysUnder(t, rdb, prefix) {
		d, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		if d < 0 {
			require.Regexp(t, `:(sku|journal|buyers|holds):sku$`, k)
		}
	}
}

// The same sale on a 3-master Cluster: SKUs of several groups land on
// different nodes, and every key of an order stays in one slot.
func TestInventory_clusterConcurrentSafe(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.PoolSize = 16 })
	inv := stock.New(rdb)
	defer inv.Close()
	ctx := t.Context()
	groups := []string{"a", "b", "c", "d", "e", "f"}
	for _, g := range groups {
		require.NoError(t, inv.Create(ctx, g+"/x", 20, stock.WithBuyerLimit(2)))
		require.NoError(t, inv.Create(ctx, g+"/y", 20))
	}
	for _, g := range groups {
		s := runSale(t, inv, g+"/x", 200, 16)
		s.verify(t, inv, g+"/x", 20, 2)
		res, err := inv.Deduct(ctx, order("multi-"+g, "u", g+"/y", 3, g+"/x", 0+1))
		if err == nil {
			require.Equal(t, int64(17), res.Levels[g+"/y"].Available)
		} else {
			require.ErrorIs(t, err, stock.ErrSoldOut)
		}
		_, err = inv.Reserve(ctx, order("hold-"+g, "u", g+"/y", 2), time.Minute)
		require.NoError(t, err)
		_, err = inv.Confirm(ctx, order("hold-"+g, "u", g+"/y", 2))
		require.NoError(t, err)
		audited(t, inv, g+"/x", g+"/y")
	}
}
