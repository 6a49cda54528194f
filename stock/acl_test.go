package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// The user in stock/redis.acl can run everything the package does and
// nothing else; Check, refused CONFIG GET, reports unknown settings instead
// of failing.
func TestACL_redisACL_leastPrivilege(t *testing.T) {
	s, password := redistest.NewWithACL(t, "redis.acl")
	rdb := s.Client(func(o *redis.Options) { o.Username, o.Password = "redkit-stock", password })
	admin := s.Client()
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithReclaimInterval(10*time.Millisecond))
	t.Cleanup(func() { _ = inv.Close() })

	const sku, hot = "shop-7/sku-1", "shop-7/sku-hot"
	require.NoError(t, inv.Create(ctx, sku, 100, stock.WithBuyerLimit(50)))
	require.NoError(t, inv.Create(ctx, hot, 100, stock.WithBuckets(4)))
	_, err := inv.Deduct(ctx, order("o-1", "u-1", sku, 2))
	require.NoError(t, err)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{order("o-2", "u-2", sku, 1), order("o-3", "u-3", hot, 30)}) {
		require.NoError(t, r.Err)
	}
	_, err = inv.Deduct(ctx, order("o-4", "u-4", hot, 60)) // refills between buckets
	if err != nil {
		require.ErrorIs(t, err, stock.ErrSoldOut)
	}
	_, err = inv.Reserve(ctx, order("o-5", "u-5", sku, 3), time.Minute)
	require.NoError(t, err)
	_, err = inv.ConfirmPartial(ctx, order("o-5", "u-5", sku, 3), []stock.Item{{SKU: sku, Qty: 2}})
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("o-6", "u-6", sku, 1), time.Second)
	require.NoError(t, err)
	_, err = inv.Cancel(ctx, order("o-7", "u-7", sku, 1)) // before its reserve: a tombstone
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("o-1", "u-1", sku, 2))
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "op-1", sku, 10)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, "op-2", sku, 1, stock.WithFence(lock.Fence{Name: "shop-7/inventory", Token: 7}))
	require.NoError(t, err)
	require.NoError(t, admin.ScriptFlush(ctx).Err()) // the next scripts are loaded again
	_, err = inv.Deduct(ctx, order("o-8", "u-8", sku, 1))
	require.NoError(t, err)
	_, err = inv.Reclaim(ctx, sku)
	require.NoError(t, err)
	_, err = inv.Level(ctx, hot)
	require.NoError(t, err)
	for _, k := range []string{sku, hot} {
		rep, err := inv.Audit(ctx, k)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%+v", rep)
		_, err = inv.Checkpoint(ctx, k)
		require.NoError(t, err)
		_, err = inv.Trim(ctx, k)
		require.NoError(t, err)
	}
	_, _, err = inv.Entries(ctx, sku, "", 100)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	got := 0
	err = inv.Consume(cctx, stock.Consumer{Group: "warehouse", Name: "c-1", SKUs: []string{sku, hot}},
		func(_ context.Context, es []stock.Entry) error {
			if got += len(es); got > 0 {
				cancel()
			}
			return nil
		})
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Positive(t, got)
	acked := mustNew(t, rdb, stock.WithReplicaAck(1, 10*time.Millisecond)) // WAIT: no replica acknowledges
	_, err = acked.Deduct(ctx, order("o-9", "u-9", sku, 1))
	require.ErrorIs(t, err, stock.ErrReplicaAck)
	require.NoError(t, acked.Close())
	require.NoError(t, inv.CloseSKU(ctx, sku))

	rep, err := inv.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	require.NotEmpty(t, rep.Findings)
	for _, f := range rep.Findings {
		require.Equal(t, health.Unknown, f.Severity, "%+v", f)
	}
	if testing.Verbose() {
		t.Log(admin.Info(ctx, "commandstats").Val())
	}

	redistest.RequireLeastPrivilege(t, rdb, "redkit:wallet:v1:{x}:acct:x", map[string]error{
		"DEL of a SKU": rdb.Del(ctx, "redkit:stock:v1:{shop-7}:sku:"+sku).Err(),
	})
}
