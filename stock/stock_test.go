package stock_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

func TestInventory_Create_idempotentAndConflict(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku-1", 10, stock.WithBuyerLimit(2)))
	_, err := inv.Deduct(ctx, order("o1", "b1", "sku-1", 2))
	require.NoError(t, err)
	// A retried Create with the same settings is a no-op: nothing is reset.
	require.NoError(t, inv.Create(ctx, "sku-1", 10, stock.WithBuyerLimit(2)))
	lv, err := inv.Level(ctx, "sku-1")
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 8, Sold: 2}, lv)

	err = inv.Create(ctx, "sku-1", 11, stock.WithBuyerLimit(2))
	var ce *stock.ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, stock.ErrConflict)
	require.Equal(t, "initial", ce.Field)
	err = inv.Create(ctx, "sku-1", 10)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "limit", ce.Field)
}

func TestInventory_Deduct_allOrNothing(t *testing.T) {
	inv := stocked(t, "shop/a", 5, "shop/b", 1)
	ctx := t.Context()

	_, err := inv.Deduct(ctx, order("o1", "u1", "shop/a", 2, "shop/b", 2))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	var ie *stock.ItemError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "shop/b", ie.SKU)
	for _, sku := range []string{"shop/a", "shop/b"} {
		lv, err := inv.Level(ctx, sku)
		require.NoError(t, err)
		require.Zero(t, lv.Sold, sku)
	}

	res, err := inv.Deduct(ctx, order("o2", "u1", "shop/b", 1, "shop/a", 2))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, map[string]stock.Levels{
		"shop/a": {Available: 3, Sold: 2},
		"shop/b": {Available: 0, Sold: 1},
	}, res.Levels)
}

func TestInventory_Deduct_idempotent(t *testing.T) {
	inv := stocked(t, "g/x", 3, "g/y", 3)
	ctx := t.Context()

	first, err := inv.Deduct(ctx, order("o1", "u1", "g/x", 1, "g/y", 2))
	require.NoError(t, err)
	require.False(t, first.Replayed)

	// Same order, items listed in another order: the same order, replayed.
	again, err := inv.Deduct(ctx, order("o1", "u1", "g/y", 2, "g/x", 1))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Levels, again.Levels)
	lv, err := inv.Level(ctx, "g/x")
	require.NoError(t, err)
	require.Equal(t, int64(1), lv.Sold)

	var ce *stock.ConflictError
	_, err = inv.Deduct(ctx, order("o1", "u1", "g/x", 2, "g/y", 2))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "items", ce.Field)
	_, err = inv.Deduct(ctx, order("o1", "u2", "g/x", 1, "g/y", 2))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buyer", ce.Field)
	_, err = inv.Restock(ctx, "o1", "g/x", 1)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "kind", ce.Field)
	lv, err = inv.Level(ctx, "g/x")
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 2, Sold: 1}, lv)
}

func TestInventory_Deduct_refusalStaysRefused(t *testing.T) {
	inv := stocked(t, "sku", 1)
	ctx := t.Context()
	o := order("o1", "u1", "sku", 2)
	res, err := inv.Deduct(ctx, o)
	require.ErrorIs(t, err, stock.ErrSoldOut)
	require.False(t, res.Replayed)

	_, err = inv.Restock(ctx, "r1", "sku", 5)
	require.NoError(t, err)
	// Enough stock now, but the order was refused: it stays refused.
	res, err = inv.Deduct(ctx, o)
	require.ErrorIs(t, err, stock.ErrSoldOut)
	require.True(t, res.Replayed)
	lv, err := inv.Level(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 6}, lv)
}

func TestInventory_Deduct_buyerLimit(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 100, stock.WithBuyerLimit(3)))
	_, err := inv.Deduct(ctx, order("o1", "u1", "sku", 2))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "u1", "sku", 2))
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	_, err = inv.Deduct(ctx, order("o3", "u1", "sku", 1))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o4", "u2", "sku", 3))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o5", "u3", "sku", 4))
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
}

func TestInventory_CloseSKU(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.ErrorIs(t, inv.CloseSKU(ctx, "sku"), stock.ErrSKUNotFound)
	require.NoError(t, inv.Create(ctx, "sku", 10))
	require.NoError(t, inv.CloseSKU(ctx, "sku"))
	require.NoError(t, inv.CloseSKU(ctx, "sku"))
	_, err := inv.Deduct(ctx, order("o1", "u1", "sku", 1))
	require.ErrorIs(t, err, stock.ErrSKUClosed)
	_, err = inv.Restock(ctx, "r1", "sku", 1)
	require.ErrorIs(t, err, stock.ErrSKUClosed)
	res, err := inv.WriteOff(ctx, "w1", "sku", 10)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{}, res.Levels["sku"])
}

func TestInventory_RestockWriteOff_idempotent(t *testing.T) {
	inv := stocked(t, "sku", 0)
	ctx := t.Context()
	res, err := inv.Restock(ctx, "r1", "sku", 7)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	res, err = inv.Restock(ctx, "r1", "sku", 7)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, int64(7), res.Levels["sku"].Available)

	_, err = inv.WriteOff(ctx, "w1", "sku", 8)
	require.ErrorIs(t, err, stock.ErrSoldOut)
	res, err = inv.WriteOff(ctx, "w2", "sku", 3)
	require.NoError(t, err)
	require.Equal(t, int64(4), res.Levels["sku"].Available)
	var ce *stock.ConflictError
	_, err = inv.WriteOff(ctx, "w2", "sku", 4)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "items", ce.Field)
	_, err = inv.Restock(ctx, "x", "nope", 1)
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
}

func TestInventory_Level_notFound(t *testing.T) {
	inv, _, _ := newInventory(t)
	_, err := inv.Level(t.Context(), "missing")
	require.True(t, errors.Is(err, stock.ErrSKUNotFound))
}
