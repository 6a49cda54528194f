package stock_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
	"github.com/stretchr/testify/require"
)

// WithRetry and WithClusterBudget take the same shape in every module and
// refuse values outside their bounds: every call fails with ErrInvalid and
// nothing reaches Redis.
func TestOptions_retryBounds(t *testing.T) {
	ctx := t.Context()
	for name, opt := range map[string]stock.Option{
		"no attempt":        stock.WithRetry(0, 0, 0),
		"too many attempts": stock.WithRetry(101, 0, 0),
		"min above max":     stock.WithRetry(3, time.Second, time.Millisecond),
		"backoff too long":  stock.WithRetry(3, 0, 2*time.Minute),
		"budget too long":   stock.WithClusterBudget(2 * time.Minute),
		"negative budget":   stock.WithClusterBudget(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			inv, rdb, prefix := newInventory(t, opt)
			require.ErrorIs(t, inv.Create(ctx, "sku", 10), stock.ErrInvalid)
			require.Empty(t, keysUnder(t, rdb, prefix))
		})
	}
	inv, _, _ := newInventory(t, stock.WithRetry(1, 0, 0), stock.WithClusterBudget(0))
	require.NoError(t, inv.Create(ctx, "sku", 10))
}
