package wallet_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// WithRetry and WithClusterBudget take the same shape in every module and
// refuse values outside their bounds: every call fails with ErrInvalid and
// nothing reaches Redis.
func TestOptions_retryBounds(t *testing.T) {
	ctx := t.Context()
	for name, opt := range map[string]wallet.Option{
		"no attempt":        wallet.WithRetry(0, 0, 0),
		"too many attempts": wallet.WithRetry(101, 0, 0),
		"min above max":     wallet.WithRetry(3, time.Second, time.Millisecond),
		"backoff too long":  wallet.WithRetry(3, 0, 2*time.Minute),
		"budget too long":   wallet.WithClusterBudget(2 * time.Minute),
		"negative budget":   wallet.WithClusterBudget(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			led, rdb, prefix := newLedger(t, opt)
			require.ErrorIs(t, led.Open(ctx, "alice", wallet.WithCurrency("EUR")), wallet.ErrInvalid)
			require.Empty(t, keysUnder(t, rdb, prefix))
		})
	}
	led, _, _ := newLedger(t, wallet.WithRetry(1, 0, 0), wallet.WithClusterBudget(0))
	require.NoError(t, led.Open(ctx, "alice", wallet.WithCurrency("EUR")))
}
