package stock_test

import (
	"strconv"
	"strings"
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
	inv := mustNew(t, rdb)
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

// Ending a sale (CloseSKU) drops the per-buyer counters, which only judge
// the limit of new orders, on every bucket; holds taken before still
// confirm, cancel and expire, refunds still work, none of them brings a
// counter back, and the books stay balanced.
func TestRetention_closeSKUDropsBuyerCounters(t *testing.T) {
	inv, rdb, prefix := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sale", 100, stock.WithBuyerLimit(3)))
	require.NoError(t, inv.Create(ctx, "hot", 100, stock.WithBuyerLimit(3), stock.WithBuckets(2)))
	for i := range 10 {
		b := "u" + strconv.Itoa(i)
		for _, sku := range []string{"sale", "hot"} {
			_, err := inv.Deduct(ctx, order("d-"+sku+b, b, sku, 1))
			require.NoError(t, err)
		}
	}
	_, err := inv.Reserve(ctx, order("h-held", "u1", "sale", 2), time.Hour)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("h-conf", "u2", "sale", 2), time.Hour)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("h-exp", "u3", "sale", 1), time.Second)
	require.NoError(t, err)
	buyers := func() []string {
		var ks []string
		for _, k := range keysUnder(t, rdb, prefix) {
			if strings.Contains(k, ":buyers:") {
				ks = append(ks, k)
			}
		}
		return ks
	}
	require.Len(t, buyers(), 3) // sale, and both buckets of hot

	require.NoError(t, inv.CloseSKU(ctx, "sale"))
	require.NoError(t, inv.CloseSKU(ctx, "hot"))
	require.Empty(t, buyers(), "a closed SKU keeps its per-buyer counters")

	_, err = inv.Deduct(ctx, order("late", "u9", "sale", 1))
	require.ErrorIs(t, err, stock.ErrSKUClosed)
	_, err = inv.Cancel(ctx, order("h-held", "u1", "sale", 2))
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("h-conf", "u2", "sale", 2))
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // h-exp's deadline passes
	_, err = inv.Reclaim(ctx, "sale")
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("d-saleu4", "u4", "sale", 1))
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("d-hotu5", "u5", "hot", 1))
	require.NoError(t, err)
	require.Empty(t, buyers(), "a counter came back after the close")
	require.Equal(t, stock.Levels{Available: 89, Reserved: 0, Sold: 12, Refunded: 1}, level(t, inv, "sale"))
	audited(t, inv, "sale", "hot")
	require.NoError(t, inv.CloseSKU(ctx, "sale")) // closing again is a no-op
}
