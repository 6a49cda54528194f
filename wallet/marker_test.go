package wallet_test

import (
	"testing"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// Markers written as hashes by the version before string markers (the
// upgrade path doc.go describes) are still answered: the same call is a
// replay with the stored outcome, another is a conflict naming the field;
// and a posting's string marker is a conflict ("kind") for a transfer
// across groups under the same ID, and the other way round.
func TestLedger_hashMarkersFromBeforeStillAnswered(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 100, "g/b": 0, "h/c": 0})
	key := func(id string) string { return prefix + ":wallet:v2:{g}:tx:" + id }
	// As post.lua and transfer.lua wrote them before.
	require.NoError(t, rdb.HSet(ctx, key("d-old"), "k", "debit", "a", "g/a", "b", "", "n", "7", "c", "", "m", "memo",
		"nonce", "0123456789abcdef", "s", "ok", "t", "1764030000000", "e", "1764030000000-0", "p", "93", "h", "0").Err())
	require.NoError(t, rdb.HSet(ctx, key("r-old"), "k", "debit", "a", "g/a", "b", "", "n", "700", "c", "", "m", "",
		"nonce", "0123456789abcdef", "s", "insufficient", "t", "1764030000000").Err())
	require.NoError(t, rdb.HSet(ctx, key("t-old"), "k", "transfer", "a", "g/a", "b", "g/b", "n", "5", "c", "", "m", "",
		"nonce", "0123456789abcdef", "s", "ok", "t", "1764030000000", "e", "1764030000000-1", "p", "88", "h", "0",
		"e2", "1764030000000-2", "p2", "5", "h2", "0").Err())

	res, err := led.Debit(ctx, wallet.Tx{ID: "d-old", Account: "g/a", Amount: 7, Memo: "memo"})
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, "1764030000000-0", res.EntryID)
	require.Equal(t, wallet.Balance{Posted: 93, Available: 93, Currency: "CNY"}, res.Balance)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d-old", Account: "g/a", Amount: 8, Memo: "memo"})
	var ce *wallet.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "amount", ce.Field)
	_, err = led.Debit(ctx, wallet.Tx{ID: "r-old", Account: "g/a", Amount: 700})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	res, err = led.Transfer(ctx, wallet.Transfer{ID: "t-old", From: "g/a", To: "g/b", Amount: 5})
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, int64(88), res.Balance.Posted)
	require.Equal(t, int64(5), res.To.Posted)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t-old", From: "g/a", To: "g/b", Amount: 5, Memo: "x"})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "memo", ce.Field)
	require.Equal(t, int64(100), balanceOf(t, led, "g/a").Posted, "nothing applied")

	// String markers against the cross-group record's hash, both ways.
	_, err = led.Debit(ctx, wallet.Tx{ID: "d-new", Account: "g/a", Amount: 1})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "d-new", From: "g/a", To: "h/c", Amount: 1})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "kind", ce.Field)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x-new", From: "g/a", To: "h/c", Amount: 1})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "x-new", Account: "g/a", Amount: 1})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "kind", ce.Field)
	require.NoError(t, led.Verify(ctx, "g/a"))

	// A memo holding the string marker's separators reads back whole.
	tricky := wallet.Tx{ID: "c-memo", Account: "g/b", Amount: 3, Memo: "a\nok\n3:b:\n"}
	first, err := led.Credit(ctx, tricky)
	require.NoError(t, err)
	again, err := led.Credit(ctx, tricky)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Balance, again.Balance)
	require.Equal(t, first.EntryID, again.EntryID)
	tricky.Memo = "a\nok\n3:b:"
	_, err = led.Credit(ctx, tricky)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "memo", ce.Field)
}
