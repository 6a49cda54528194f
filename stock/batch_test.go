package stock_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

func TestInventory_DeductBatch(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "a/sku", 5, stock.WithBuyerLimit(3)))
	require.NoError(t, inv.Create(ctx, "b/sku", 2))
	// A fresh server connection has no scripts loaded: the pipeline must
	// load them and resend only what failed with NOSCRIPT.
	require.NoError(t, rdb.ScriptFlush(ctx).Err())

	orders := []stock.Order{
		order("o1", "u1", "a/sku", 2),
		order("o2", "u1", "a/sku", 2), // limit 3
		order("o3", "u2", "b/sku", 2),
		order("o4", "u3", "b/sku", 1),             // sold out
		order("o5", "u4", "a/sku", 1, "b/sku", 1), // cross group
		order("o1", "u1", "a/sku", 2),             // replay of o1
		order("", "u1", "a/sku", 1),               // invalid
	}
	res := mustNew(t, rdb, stock.WithKeyPrefix(prefix)).DeductBatch(ctx, orders)
	require.Len(t, res, len(orders))
	require.NoError(t, res[0].Err)
	require.Equal(t, stock.Levels{Available: 3, Sold: 2}, res[0].Levels["a/sku"])
	require.ErrorIs(t, res[1].Err, stock.ErrBuyerLimit)
	require.NoError(t, res[2].Err)
	require.ErrorIs(t, res[3].Err, stock.ErrSoldOut)
	require.ErrorIs(t, res[4].Err, stock.ErrCrossGroup)
	require.NoError(t, res[5].Err)
	require.True(t, res[5].Replayed)
	require.ErrorIs(t, res[6].Err, stock.ErrInvalid)
	require.Equal(t, stock.Levels{Available: 3, Sold: 2}, level(t, inv, "a/sku"))
	require.Equal(t, stock.Levels{Available: 0, Sold: 2}, level(t, inv, "b/sku"))
	audited(t, inv, "a/sku", "b/sku")
}

func TestInventory_DeductBatch_largeConcurrentSafe(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 500, stock.WithBuyerLimit(2)))
	var orders []stock.Order
	for i := range 1000 {
		orders = append(orders, order(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i%300), "sku", 1))
	}
	done := make(chan []stock.BatchResult, 2)
	for range 2 { // the same batch twice at once: every order applied once
		go func() { done <- inv.DeductBatch(ctx, orders) }()
	}
	a, b := <-done, <-done
	sold := int64(0)
	for i := range orders {
		require.Equal(t, a[i].Err == nil, b[i].Err == nil, orders[i].ID)
		require.True(t, a[i].Replayed || b[i].Replayed || a[i].Err != nil, orders[i].ID)
		if a[i].Err == nil {
			sold++
		}
	}
	require.Equal(t, int64(500), sold)
	require.Equal(t, stock.Levels{Available: 0, Sold: 500}, level(t, inv, "sku"))
	audited(t, inv, "sku")
}
