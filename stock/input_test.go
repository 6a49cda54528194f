package stock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

func TestInventory_badInput_nothingWritten(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	many := stock.Order{ID: "o", Buyer: "u"}
	for i := 0; i <= stock.MaxItems; i++ {
		many.Items = append(many.Items, stock.Item{SKU: "g/s" + strings.Repeat("x", i), Qty: 1})
	}
	orders := map[string]stock.Order{
		"zero qty":        order("o", "u", "sku", 0),
		"negative qty":    order("o", "u", "sku", -1),
		"qty over 2^53-1": {ID: "o", Buyer: "u", Items: []stock.Item{{SKU: "sku", Qty: 1 << 53}}},
		"empty order ID":  order("", "u", "sku", 1),
		"empty buyer":     order("o", "", "sku", 1),
		"brace in ID":     order("o{x}", "u", "sku", 1),
		"brace in SKU":    order("o", "u", "{sku}", 1),
		"space in buyer":  order("o", "u 1", "sku", 1),
		"glob in SKU":     order("o", "u", "sku*", 1),
		"two slashes":     order("o", "u", "a/b/c", 1),
		"long ID":         order(strings.Repeat("o", 129), "u", "sku", 1),
		"no items":        {ID: "o", Buyer: "u"},
		"too many items":  many,
		"duplicate sku":   order("o", "u", "sku", 1, "sku", 1),
	}
	for name, o := range orders {
		_, err := inv.Deduct(ctx, o)
		require.ErrorIs(t, err, stock.ErrInvalid, name)
	}
	_, err := inv.Deduct(ctx, order("o", "u", "a/x", 1, "b/y", 1))
	require.ErrorIs(t, err, stock.ErrCrossGroup)

	require.ErrorIs(t, inv.Create(ctx, "sku", -1), stock.ErrInvalid)
	require.ErrorIs(t, inv.Create(ctx, "sku", 1<<53), stock.ErrInvalid)
	require.ErrorIs(t, inv.Create(ctx, "s{k}u", 1), stock.ErrInvalid)
	require.ErrorIs(t, inv.Create(ctx, "sku", 1, stock.WithBuyerLimit(-1)), stock.ErrInvalid)
	_, err = inv.Restock(ctx, "op", "sku", 0)
	require.ErrorIs(t, err, stock.ErrInvalid)
	_, err = inv.WriteOff(ctx, "", "sku", 1)
	require.ErrorIs(t, err, stock.ErrInvalid)
	require.ErrorIs(t, inv.CloseSKU(ctx, ""), stock.ErrInvalid)
	_, err = inv.Level(ctx, "a b")
	require.ErrorIs(t, err, stock.ErrInvalid)

	require.Empty(t, keysUnder(t, rdb, prefix))
}

func TestNew_invalidOptions(t *testing.T) {
	for name, opt := range map[string]stock.Option{
		"prefix with colon": stock.WithKeyPrefix("a:b"),
		"empty prefix":      stock.WithKeyPrefix(""),
		"short window":      stock.WithIdempotencyWindow(time.Second),
		"long window":       stock.WithIdempotencyWindow(31 * 24 * time.Hour),
	} {
		inv, err := stock.New(shared.Client(), opt)
		require.ErrorIs(t, err, stock.ErrInvalid, name)
		require.Nil(t, inv, name)
	}
}
