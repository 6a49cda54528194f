package wallet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/wallet"
)

// A journal entry keeps every field its call sent, so the call can be sent
// again from the entry alone: sent so, it is answered as a replay.
func TestLedger_Entries_keepEveryFieldOfTheCall(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t, wallet.WithIdempotencyWindow(time.Hour))
	require.Equal(t, time.Hour, led.IdempotencyWindow())
	require.NoError(t, led.Open(ctx, "f/a", wallet.WithCurrency("EUR")))
	calls := []struct {
		kind string
		tx   wallet.Tx
	}{
		{"credit", wallet.Tx{ID: "c-none", Account: "f/a", Amount: 50}},
		{"credit", wallet.Tx{ID: "c-cur", Account: "f/a", Amount: 50, Currency: "EUR"}},
		{"debit", wallet.Tx{ID: "d-memo", Account: "f/a", Amount: 5, Memo: "gift\x00card"}},
		{"debit", wallet.Tx{ID: "d-both", Account: "f/a", Amount: 5, Currency: "EUR", Memo: "a:b\nc"}},
	}
	post := func(kind string, tx wallet.Tx) (wallet.Result, error) {
		if kind == "credit" {
			return led.Credit(ctx, tx)
		}
		return led.Debit(ctx, tx)
	}
	for _, c := range calls {
		_, err := post(c.kind, c.tx)
		require.NoError(t, err)
	}
	es, _, err := led.Entries(ctx, "f/a", "", wallet.MaxPage)
	require.NoError(t, err)
	require.Len(t, es, len(calls)+1)
	for i, c := range calls {
		e := es[i+1]
		require.Equal(t, c.tx.ID, e.TxID)
		require.Equal(t, c.tx.Currency, e.Currency, c.tx.ID)
		require.Equal(t, c.tx.Memo, e.Memo, c.tx.ID)
		amount := e.Delta
		if amount < 0 {
			amount = -amount
		}
		res, err := post(e.Kind, wallet.Tx{ID: e.TxID, Account: "f/a", Amount: amount, Currency: e.Currency, Memo: e.Memo})
		require.NoError(t, err, c.tx.ID)
		require.True(t, res.Replayed, c.tx.ID)
	}
}
