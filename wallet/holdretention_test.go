package wallet_test

import (
	"context"
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// Hold records are forgotten one window after they are decided, also for
// accounts nobody calls again and when the Ledger that decided them is
// gone (restarted: its reclaimer's schedule with it): a refused hold, a
// captured one, a voided one, and holds refused before the account was
// opened. An account with a hold still open keeps its records.
func TestRegress_HoldRecords_quietAccountsForgottenAfterWindow(t *testing.T) {
	ctx := t.Context()
	const window = 300 * time.Millisecond
	_, rdb, prefix := newLedger(t)
	first := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	wallet.SetWindow(first, window)
	t.Cleanup(func() { _ = first.Close() })
	holdKeys := func(account string) []string {
		return []string{prefix + ":wallet:v2:{" + account + "}:holds:" + account,
			prefix + ":wallet:v2:{" + account + "}:hidx:" + account}
	}
	accounts := []string{"refused", "captured", "voided", "early", "open"}
	// "early": a hold refused before the account existed.
	_, err := first.Hold(ctx, hold("h0", "early", 5))
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
	funds := map[string]int64{}
	for _, a := range accounts {
		funds[a] = 10
	}
	openFunded(t, first, funds)
	_, err = first.Hold(ctx, hold("h1", "refused", 11))
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	for _, a := range []string{"captured", "voided", "open"} {
		_, err = first.Hold(ctx, wallet.HoldReq{ID: "h1", Account: a, Amount: 4, TTL: time.Hour})
		require.NoError(t, err)
	}
	_, err = first.Capture(ctx, "captured", "h1", 3)
	require.NoError(t, err)
	_, err = first.Void(ctx, "voided", "h1")
	require.NoError(t, err)
	// "open" also has a decided hold beside its open one.
	_, err = first.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "open", Amount: 1, TTL: time.Hour})
	require.NoError(t, err)
	_, err = first.Void(ctx, "open", "h2")
	require.NoError(t, err)
	for _, a := range accounts {
		require.Equal(t, int64(2), rdb.Exists(ctx, holdKeys(a)...).Val(), a)
	}
	// The Ledger restarts: the old one is gone, the new one touches none
	// of these accounts.
	require.NoError(t, first.Close())
	second := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	wallet.SetWindow(second, window)
	t.Cleanup(func() { _ = second.Close() })

	waitFor(t, func() bool {
		for _, a := range accounts[:4] {
			if rdb.Exists(ctx, holdKeys(a)...).Val() != 0 {
				return false
			}
		}
		return true
	})
	// The open hold's account keeps its records: the hold still resolves
	// once.
	require.Equal(t, int64(2), rdb.Exists(ctx, holdKeys("open")...).Val())
	res, err := second.Capture(ctx, "open", "h1", 4)
	require.NoError(t, err)
	require.Equal(t, int64(0), res.Balance.Held)
	for _, a := range accounts {
		require.NoError(t, second.Verify(context.WithoutCancel(ctx), a), a)
	}
	// Now nothing is open there either: its records go one window later.
	waitFor(t, func() bool { return rdb.Exists(ctx, holdKeys("open")...).Val() == 0 })
}
