package wallet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/wallet"
)

// Every public operation records redkit.wallet.operation.duration, in
// seconds with otelx.DurationBuckets, by operation and outcome: applied
// (ok), refused (insufficient_funds, ...), replayed and error.
func TestLedger_operationDurations(t *testing.T) {
	rec := otelxtest.New(t)
	led, _, _ := newLedger(t, wallet.WithTracerProvider(rec.TracerProvider), wallet.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()

	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	require.NoError(t, led.Open(ctx, "b", wallet.WithCurrency("CNY")))
	_, err := led.Credit(ctx, wallet.Tx{ID: "c1", Account: "a", Amount: 10})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c1", Account: "a", Amount: 10})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 11})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "a", To: "b", Amount: 4})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "a", Amount: -1})
	require.ErrorIs(t, err, wallet.ErrInvalid)

	_, _, err = led.Entries(ctx, "a", "", 10)
	require.NoError(t, err)
	_, err = led.TrialBalance(ctx, "a", "b")
	require.NoError(t, err)
	_, err = led.Balance(ctx, "a")
	require.NoError(t, err)
	_, _, err = led.Entries(ctx, "nobody", "", 10)
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)

	require.Equal(t, map[string]uint64{
		"balance ok":                1,
		"entries ok":                1,
		"entries account_not_found": 1,
		"trial_balance ok":          1,
		"open ok":                   2,
		"credit ok":                 1,
		"credit replayed":           1,
		"debit insufficient_funds":  1,
		"debit invalid":             1,
		"transfer ok":               1,
	}, rec.Durations(t, "redkit.wallet.operation.duration"))
}
