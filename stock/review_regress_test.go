package stock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// One fence token is judged per slot group: token 6 accepted through a SKU
// of group "shop" without buckets makes token 5 stale through every bucket
// of a SKU of the same group split into buckets, for orders and restocks.
func TestFence_groupTokenStaleThroughEveryBucket(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const b = 2
	require.NoError(t, inv.Create(ctx, "shop/cold", 10))
	require.NoError(t, inv.Create(ctx, "shop/hot", 10, stock.WithBuckets(b)))
	f5 := stock.WithFence(lock.Fence{Name: "ops", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "ops", Token: 6})
	_, err := inv.Deduct(ctx, order("o-new", "alice", "shop/cold", 1), f6)
	require.NoError(t, err)
	before := level(t, inv, "shop/hot")
	for k := range b {
		buyer := buyerOfBucket(k, b)
		_, err := inv.Deduct(ctx, order("o-stale-"+buyer, buyer, "shop/hot", 1), f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "deduct through bucket %d", k)
		_, err = inv.Restock(ctx, opOfBucket("r-stale", k, b), "shop/hot", 3, f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "restock through bucket %d", k)
	}
	require.Equal(t, before, level(t, inv, "shop/hot"))
}

// The same with only SKUs split into buckets: token 6 accepted through a
// SKU of 2 buckets makes token 5 stale through buckets 2 and 3 of a SKU of
// 4 buckets, whose fence keys the first never touched.
func TestFence_groupTokenStaleThroughWiderSKU(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "shop/a", 10, stock.WithBuckets(2)))
	require.NoError(t, inv.Create(ctx, "shop/b", 40, stock.WithBuckets(4)))
	f5 := stock.WithFence(lock.Fence{Name: "ops", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "ops", Token: 6})
	_, err := inv.Restock(ctx, "r-new", "shop/a", 1, f6)
	require.NoError(t, err)
	for k := range 4 {
		buyer := buyerOfBucket(k, 4)
		_, err := inv.Deduct(ctx, order("o-stale-"+buyer, buyer, "shop/b", 1), f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "deduct through bucket %d", k)
	}
	require.Equal(t, stock.Levels{Available: 40}, level(t, inv, "shop/b"))
}

// CloseSKU is a write: with WithReplicaAck it waits for the replicas, and
// with the replica cut off (frozen, its link dropped) it reports
// ErrReplicaAck rather than nil.
func TestReplicaAck_closeSKUWaits(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	rdb := p.Primary.Client()
	defer rdb.Close()
	inv := stock.New(rdb, stock.WithKeyPrefix("cl"), stock.WithReclaimInterval(0),
		stock.WithReplicaAck(1, 300*time.Millisecond))
	defer inv.Close()
	const sku = "shop/tv"
	require.NoError(t, inv.Create(ctx, sku, 10))
	require.NoError(t, p.Replica.Pause())
	defer func() { _ = p.Replica.Resume() }()
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	err := inv.CloseSKU(ctx, sku)
	require.ErrorIs(t, err, stock.ErrReplicaAck)
	// The close did happen on the primary.
	_, err = inv.Deduct(ctx, order("after-close", "u", sku, 1))
	require.ErrorIs(t, err, stock.ErrClosed)
}

var _ = errors.Is
var _ = fmt.Sprint
