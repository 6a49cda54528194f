package stock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redkit-go/redkit/stock"
)

func level(t *testing.T, inv *stock.Inventory, sku string) stock.Levels {
	t.Helper()
	lv, err := inv.Level(t.Context(), sku)
	require.NoError(t, err)
	return lv
}

func audited(t *testing.T, inv *stock.Inventory, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		rep, err := inv.Audit(t.Context(), sku)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%s: %v", sku, rep.Problems)
		require.NoError(t, inv.Verify(t.Context(), sku))
	}
}

// waitPast polls the Redis server's clock until it is past deadline.
func waitPast(t *testing.T, rdb redis.UniversalClient, deadline time.Time) {
	t.Helper()
	waitFor(t, func() bool {
		now, err := rdb.Time(t.Context()).Result()
		require.NoError(t, err)
		return now.After(deadline.Add(time.Millisecond))
	})
}

func TestInventory_Reserve_confirm(t *testing.T) {
	inv, rdb, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/a", 10))
	require.NoError(t, inv.Create(ctx, "g/b", 10))
	o := order("o1", "u1", "g/a", 3, "g/b", 2)
	res, err := inv.Reserve(ctx, o, time.Minute)
	require.NoError(t, err)
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(time.Minute), res.Deadline, 30*time.Second)
	require.Equal(t, stock.Levels{Available: 7, Reserved: 3}, level(t, inv, "g/a"))

	again, err := inv.Reserve(ctx, o, time.Minute)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Deadline, again.Deadline)

	res, err = inv.Confirm(ctx, o)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 7, Sold: 3}, res.Levels["g/a"])
	require.Equal(t, stock.Levels{Available: 8, Sold: 2}, res.Levels["g/b"])
	res, err = inv.Confirm(ctx, o)
	require.NoError(t, err)
	require.True(t, res.Replayed)

	var ce *stock.ConflictError
	_, err = inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "g/a", Qty: 1}})
	require.ErrorAs(t, err, &ce)
	_, err = inv.Cancel(ctx, o)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "state", ce.Field)
	require.Equal(t, "confirmed", ce.State)
	_, err = inv.Deduct(ctx, o)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "kind", ce.Field)
	audited(t, inv, "g/a", "g/b")
}

func TestInventory_Confirm_partialReturnsTheRest(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/a", 10, stock.WithBuyerLimit(3)))
	require.NoError(t, inv.Create(ctx, "g/b", 10))
	o := order("o1", "u1", "g/a", 3, "g/b", 2)
	_, err := inv.Reserve(ctx, o, time.Minute)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "u1", "g/a", 1))
	require.ErrorIs(t, err, stock.ErrBuyerLimit, "reserved units count toward the limit")

	_, err = inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "g/a", Qty: 4}})
	require.ErrorIs(t, err, stock.ErrInvalid)
	_, err = inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "g/c", Qty: 1}})
	require.ErrorIs(t, err, stock.ErrInvalid)

	res, err := inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "g/a", Qty: 1}})
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 9, Sold: 1}, res.Levels["g/a"])
	require.Equal(t, stock.Levels{Available: 10}, res.Levels["g/b"])
	// Two units of allowance came back.
	_, err = inv.Deduct(ctx, order("o3", "u1", "g/a", 2))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o4", "u1", "g/a", 1))
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	audited(t, inv, "g/a", "g/b")
}

func TestInventory_Cancel(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 5, stock.WithBuyerLimit(2)))
	o := order("o1", "u1", "sku", 2)
	_, err := inv.Reserve(ctx, o, time.Minute)
	require.NoError(t, err)
	res, err := inv.Cancel(ctx, o)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 5}, res.Levels["sku"])
	res, err = inv.Cancel(ctx, o)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	_, err = inv.Confirm(ctx, o)
	require.ErrorIs(t, err, stock.ErrCancelled)
	_, err = inv.Reserve(ctx, o, time.Minute)
	require.ErrorIs(t, err, stock.ErrCancelled)
	// The allowance came back.
	_, err = inv.Deduct(ctx, order("o2", "u1", "sku", 2))
	require.NoError(t, err)
	audited(t, inv, "sku")
}

func TestInventory_Cancel_beforeReserveLeavesTombstone(t *testing.T) {
	inv := stocked(t, "sku", 5)
	ctx := t.Context()
	o := order("o1", "u1", "sku", 2)
	_, err := inv.Cancel(ctx, o)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, o, time.Minute)
	require.ErrorIs(t, err, stock.ErrCancelled)
	require.Equal(t, stock.Levels{Available: 5}, level(t, inv, "sku"))
	_, err = inv.Confirm(ctx, o)
	require.ErrorIs(t, err, stock.ErrCancelled)
	_, err = inv.Confirm(ctx, order("unknown", "u1", "sku", 1))
	require.ErrorIs(t, err, stock.ErrOrderNotFound)
	require.NotErrorIs(t, err, stock.ErrSKUNotFound)
	audited(t, inv, "sku")
}

func TestInventory_Confirm_afterDeadline(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 5, stock.WithBuyerLimit(2)))
	o := order("o1", "u1", "sku", 2)
	res, err := inv.Reserve(ctx, o, time.Second)
	require.NoError(t, err)
	waitPast(t, rdb, res.Deadline)
	require.Equal(t, int64(2), level(t, inv, "sku").Reserved, "nothing reclaimed it yet")
	_, err = inv.Confirm(ctx, o)
	require.ErrorIs(t, err, stock.ErrHoldExpired)
	_, err = inv.Confirm(ctx, o)
	require.ErrorIs(t, err, stock.ErrHoldExpired)
	require.Equal(t, stock.Levels{Available: 5}, level(t, inv, "sku"))
	_, err = inv.Cancel(ctx, o) // cancelling an expired hold is fine
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "u1", "sku", 2))
	require.NoError(t, err)
	audited(t, inv, "sku")
}

// Deduct reclaims expired holds of its SKU first, so sales never wait for
// the reclaimer.
func TestInventory_Deduct_reclaimsExpiredHoldsLazily(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 4, stock.WithBuyerLimit(2)))
	res, err := inv.Reserve(ctx, order("o1", "u1", "sku", 2), time.Second)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("o2", "u2", "sku", 2), time.Hour)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o3", "u3", "sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	waitPast(t, rdb, res.Deadline)
	out, err := inv.Deduct(ctx, order("o4", "u1", "sku", 2)) // u1's allowance is back too
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 0, Reserved: 2, Sold: 2}, out.Levels["sku"])
	es, _, err := inv.Entries(ctx, "sku", "", 100)
	require.NoError(t, err)
	require.Equal(t, stock.KindExpire, es[len(es)-2].Kind)
	require.Equal(t, "o1", es[len(es)-2].Op)
	audited(t, inv, "sku")
}

// Holds expire with the reclaimer stopped; a reclaimer started later returns
// them all. Demand exceeds supply, so in the end sold + available = supply.
func TestInventory_Reclaimer_returnsExpiredHoldsConcurrentSafe(t *testing.T) {
	_, rdb, prefix := newInventory(t)
	ctx := t.Context()
	stopped := mustNew(t, rdb, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	defer stopped.Close()
	require.NoError(t, stopped.Create(ctx, "sku", 50, stock.WithBuyerLimit(3)))
	var mu sync.Mutex
	var last time.Time
	confirmed := int64(0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for k := range 13 {
				i := w*13 + k
				o := order(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i%40), "sku", 1+i%2)
				// Long enough that no hold expires during the loop, even on a
				// loaded machine: then the Reserves themselves reclaim nothing.
				res, err := stopped.Reserve(ctx, o, 2*time.Second)
				if err != nil {
					continue
				}
				mu.Lock()
				if res.Deadline.After(last) {
					last = res.Deadline
				}
				mu.Unlock()
				if i%3 == 0 {
					_, err := stopped.Confirm(ctx, o)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					confirmed += o.Items[0].Qty
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	waitPast(t, rdb, last)
	require.NotZero(t, level(t, stopped, "sku").Reserved)

	reader := sdkmetric.NewManualReader()
	started := mustNew(t, rdb, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(20*time.Millisecond),
		stock.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	started.Watch("sku")
	waitFor(t, func() bool { return level(t, stopped, "sku").Reserved == 0 })
	require.NoError(t, started.Close())
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	var reclaimed int64
	var lagged uint64
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch m.Name {
		case "redkit.stock.reclaim.holds":
			reclaimed = m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
		case "redkit.stock.reclaim.lag":
			lagged = m.Data.(metricdata.Histogram[float64]).DataPoints[0].Count
		}
	}
	require.Positive(t, reclaimed)
	require.Positive(t, lagged)
	lv := level(t, stopped, "sku")
	require.Equal(t, int64(50), lv.Sold+lv.Available)
	require.Equal(t, confirmed, lv.Sold)
	audited(t, stopped, "sku")
	n, err := rdb.HLen(ctx, prefix+":stock:v1:{sku}:buyers:sku").Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(40))

}

func TestInventory_Refund(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/a", 10, stock.WithBuyerLimit(2)))
	o := order("o1", "u1", "g/a", 2)
	_, err := inv.Deduct(ctx, o)
	require.NoError(t, err)
	res, err := inv.Refund(ctx, o)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 10, Sold: 2, Refunded: 2}, res.Levels["g/a"])
	res, err = inv.Refund(ctx, o)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 10, Sold: 2, Refunded: 2}, level(t, inv, "g/a"))

	// A confirmed reservation refunds what was confirmed.
	h := order("o2", "u1", "g/a", 2)
	_, err = inv.Reserve(ctx, h, time.Minute)
	require.NoError(t, err, "the refund gave the allowance back")
	var ce *stock.ConflictError
	_, err = inv.Refund(ctx, h)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "held", ce.State)
	_, err = inv.ConfirmPartial(ctx, h, []stock.Item{{SKU: "g/a", Qty: 1}})
	require.NoError(t, err)
	res, err = inv.Refund(ctx, h)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 10, Sold: 3, Refunded: 3}, res.Levels["g/a"])
	_, err = inv.Refund(ctx, order("never", "u1", "g/a", 1))
	require.ErrorIs(t, err, stock.ErrOrderNotFound)
	audited(t, inv, "g/a")
}

// More expired holds than one script call reclaims (64 per SKU): the order
// is not refused while units are still coming back.
func TestInventory_Deduct_manyExpiredHolds(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 150))
	var last time.Time
	for i := range 150 {
		res, err := inv.Reserve(ctx, order(fmt.Sprintf("h%d", i), "u", "sku", 1), 2*time.Second)
		require.NoError(t, err)
		last = res.Deadline
	}
	waitPast(t, rdb, last)
	res, err := inv.Deduct(ctx, order("big", "u", "sku", 150))
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Sold: 150}, res.Levels["sku"])
	audited(t, inv, "sku")
}

// A reservation that was refused stays refused for Confirm; Cancel of it is
// a no-op.
func TestInventory_Confirm_refusedReservation(t *testing.T) {
	inv := stocked(t, "sku", 1)
	ctx := t.Context()
	o := order("o1", "u", "sku", 2)
	_, err := inv.Reserve(ctx, o, time.Minute)
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Confirm(ctx, o)
	require.ErrorIs(t, err, stock.ErrSoldOut)
	res, err := inv.Cancel(ctx, o)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	res, err = inv.Cancel(ctx, o)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 1}, level(t, inv, "sku"))
	audited(t, inv, "sku")
}
