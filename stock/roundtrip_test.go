package stock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

// Every write is one round trip once its script is loaded; a fresh server
// costs one more (NOSCRIPT, then EVAL) on the first call only.
func TestInventory_oneRoundTripPerOperation(t *testing.T) {
	_, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	counted := shared.Client()
	rt := &roundTrips{}
	counted.AddHook(rt)
	inv := mustNew(t, counted, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	defer inv.Close()

	require.NoError(t, inv.Create(ctx, "sku", 100, stock.WithBuyerLimit(50)))
	steps := []struct {
		name string
		call func() error
	}{
		{"deduct", func() error { _, err := inv.Deduct(ctx, order("o1", "u", "sku", 1)); return err }},
		{"deduct replay", func() error { _, err := inv.Deduct(ctx, order("o1", "u", "sku", 1)); return err }},
		{"reserve", func() error { _, err := inv.Reserve(ctx, order("o2", "u", "sku", 1), time.Minute); return err }},
		{"confirm", func() error { _, err := inv.Confirm(ctx, order("o2", "u", "sku", 1)); return err }},
		{"refund", func() error { _, err := inv.Refund(ctx, order("o1", "u", "sku", 1)); return err }},
		{"restock", func() error { _, err := inv.Restock(ctx, "r1", "sku", 1); return err }},
		{"level", func() error { _, err := inv.Level(ctx, "sku"); return err }},
	}
	for _, s := range steps {
		// Load the script (first use), then count a second, identical-shaped call.
		before := rt.n.Load()
		require.NoError(t, s.call(), s.name)
		require.LessOrEqual(t, rt.n.Load()-before, int64(2), s.name)
		before = rt.n.Load()
		require.NoError(t, s.call(), s.name)
		require.Equal(t, int64(1), rt.n.Load()-before, s.name)
	}
}

// Once every bucket of a SKU is empty, a refusal costs four round trips
// whatever the bucket count: the home bucket's "short", one pipelined read
// of every bucket, and the final decision; plus the order ID's claim in
// bucket 0's tag.
func TestInventory_buckets_soldOutRoundTrips(t *testing.T) {
	_, _, prefix := newInventory(t)
	ctx := t.Context()
	counted := shared.Client()
	rt := &roundTrips{}
	counted.AddHook(rt)
	inv := mustNew(t, counted, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	defer inv.Close()

	const b = 8
	require.NoError(t, inv.Create(ctx, "hot", 2*b, stock.WithBuckets(b)))
	sold := 0
	for i := 0; sold < 2*b; i++ { // buyers of every bucket until all is sold
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("o-%d", i), fmt.Sprintf("u-%d", i), "hot", 1))
		if err == nil {
			sold++
			continue
		}
		require.ErrorIs(t, err, stock.ErrSoldOut)
		require.Less(t, i, 10*b, "units left in some bucket were never found")
	}
	lv, err := inv.Level(ctx, "hot")
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Sold: 2 * b}, lv)

	for k := range b {
		before := rt.n.Load()
		_, err = inv.Deduct(ctx, order(fmt.Sprintf("late-%d", k), buyerOfBucket(k, b), "hot", 1))
		require.ErrorIs(t, err, stock.ErrSoldOut)
		require.Equal(t, int64(4), rt.n.Load()-before, "a sold-out refusal in bucket %d", k)
	}
}
