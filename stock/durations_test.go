package stock_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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
	}, rec.Durations(t, "redkit.stock.operation.duration"))
}
