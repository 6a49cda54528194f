package stock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/stock"
)

// SKUs, order and buyer IDs, operation IDs and quantities never reach
// telemetry: not the package's own spans and metrics, and not go-redis
// command traces switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	tel := otelxtest.New(t)
	tp, mp := tel.TracerProvider, tel.MeterProvider
	_, _, prefix := newInventory(t)
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
	inv := mustNew(t, rdb, stock.WithKeyPrefix(prefix), stock.WithTracerProvider(tp), stock.WithMeterProvider(mp))
	t.Cleanup(func() { _ = inv.Close() })
	ctx := t.Context()

	const sku, hot = "zq-shop/zq-sku-1", "zq-shop/zq-sku-hot"
	require.NoError(t, inv.Create(ctx, sku, 918273000, stock.WithBuyerLimit(4711000)))
	require.NoError(t, inv.Create(ctx, hot, 918273000, stock.WithBuckets(4)))
	_, err := inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000)) // replay
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("zq-order-2", "zq-buyer-1", sku, 1)) // over the buyer limit
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	_, err = inv.Deduct(ctx, order("zq-order-3", "zq-buyer-2", hot, 4711000))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000), time.Minute)
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "zq-op-1", sku, 4711000)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, "zq-op-2", sku, 4711000, stock.WithFence(lock.Fence{Name: "zq-lock", Token: 4242424}))
	require.NoError(t, err)
	_, err = inv.Level(ctx, sku)
	require.NoError(t, err)
	_, err = inv.Audit(ctx, sku)
	require.NoError(t, err)
	require.NoError(t, inv.CloseSKU(ctx, sku))
	_, err = inv.Deduct(ctx, order("zq-order-5", "zq-buyer-4", sku, 1))
	require.ErrorIs(t, err, stock.ErrSKUClosed)

	tel.RequireRecorded(t, "stock.deduct", "stock.reserve", "evalsha", "redkit.stock.operations") // the scan sees what was recorded
	tel.RequireNoSecrets(t, "zq-", "918273", "4711000", "4242424")
}
