package wallet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/wallet"
)

// Account and transaction IDs, hold IDs, amounts, currencies and memos never
// reach telemetry: not the package's own spans and metrics, and not go-redis
// command traces switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	tel := otelxtest.New(t)
	tp, mp := tel.TracerProvider, tel.MeterProvider
	_, _, prefix := newLedger(t)
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix), wallet.WithTracerProvider(tp), wallet.WithMeterProvider(mp))
	t.Cleanup(func() { _ = led.Close() })
	ctx := t.Context()

	const alice, till, bob = "zq-shop/zq-alice", "zq-shop/zq-till", "zq-other/zq-bob"
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("ZQX"), wallet.WithOverdraft(313370)))
	}
	_, err := led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"}) // replay
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "zq-tx-2", Account: alice, Amount: 123456789, Currency: "ZQX"})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "zq-tx-3", Account: alice, Amount: 8765432100})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-4", From: alice, To: till, Amount: 555555})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-5", From: alice, To: bob, Amount: 666666}) // cross-group
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-1", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Capture(ctx, alice, "zq-hold-1", 7777777)
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-2", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Void(ctx, alice, "zq-hold-2", wallet.WithFence(lock.Fence{Name: "zq-lock", Token: 4242424}))
	require.NoError(t, err)
	_, err = led.Balance(ctx, alice)
	require.NoError(t, err)
	_, _, err = led.Entries(ctx, alice, "", 10)
	require.NoError(t, err)
	require.NoError(t, led.Verify(ctx, alice))
	_, err = led.TrialBalance(ctx, alice, till)
	require.NoError(t, err)

	tel.RequireRecorded(t, "wallet.debit", "wallet.transfer", "evalsha", "redkit.wallet.operations") // the scan sees what was recorded
	tel.RequireNoSecrets(t, "zq-", "ZQX", "313370", "987654321", "123456789", "8765432100",
		"555555", "666666", "7777777", "4242424")
}
