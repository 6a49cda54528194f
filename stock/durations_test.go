package stock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/stock"
)

// Every public operation records redkit.stock.operation.duration, in
// seconds with otelx.DurationBuckets, by operation and outcome: applied
// (ok), refused (sold_out, ...), replayed and error.
func TestInventory_operationDurations(t *testing.T) {
	rec := otelxtest.New(t)
	inv, _, _ := newInventory(t, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()

	require.NoError(t, inv.Create(ctx, "sku", 1))
	o := order("o1", "b1", "sku", 1)
	_, err := inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "b1", "sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Deduct(ctx, order("o3", "b1", "sku", 0))
	require.ErrorIs(t, err, stock.ErrInvalid)
	_, err = inv.Level(ctx, "sku")
	require.NoError(t, err)
	_, err = inv.Level(ctx, "no-such-sku")
	require.ErrorIs(t, err, stock.ErrNotFound)
	_, err = inv.Reclaim(ctx, "sku")
	require.NoError(t, err)
	_, err = inv.Audit(ctx, "sku")
	require.NoError(t, err)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{order("o4", "b1", "sku", 1)}) {
		require.ErrorIs(t, r.Err, stock.ErrSoldOut)
	}

	require.Equal(t, map[string]uint64{
		"create ok":       1,
		"deduct ok":       1,
		"deduct replayed": 1,
		"deduct sold_out": 1,
		"deduct invalid":  1,
		"level ok":        1,
		"level not_found": 1,
		"reclaim ok":      1,
		"audit ok":        1,
		"deduct_batch ok": 1,
	}, rec.Durations(t, "redkit.stock.operation.duration"))
}

// redkit.stock.units.sold counts the units Deduct, DeductBatch and Confirm
// sold, once per order: replays and refusals add nothing.
func TestInventory_unitsSoldCounter(t *testing.T) {
	rec := otelxtest.New(t)
	inv, _, _ := newInventory(t, stock.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10))
	o := order("o1", "b1", "sku", 2)
	for range 2 {
		_, err := inv.Deduct(ctx, o)
		require.NoError(t, err)
	}
	_, err := inv.Deduct(ctx, order("o2", "b1", "sku", 11))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{order("o3", "b1", "sku", 1), o}) {
		require.NoError(t, r.Err)
	}
	held := order("o4", "b1", "sku", 3)
	_, err = inv.Reserve(ctx, held, time.Minute)
	require.NoError(t, err)
	for range 2 {
		_, err = inv.ConfirmPartial(ctx, held, []stock.Item{{SKU: "sku", Qty: 2}})
		require.NoError(t, err)
	}

	got := map[string]int64{}
	for _, p := range rec.Metrics(t)["redkit.stock.units.sold"].(metricdata.Sum[int64]).DataPoints {
		op, _ := p.Attributes.Value("redkit.operation")
		got[op.AsString()] += p.Value
	}
	require.Equal(t, map[string]int64{"deduct": 3, "confirm": 2}, got)
	lv, err := inv.Level(ctx, "sku")
	require.NoError(t, err)
	require.EqualValues(t, 5, lv.Sold)
}
