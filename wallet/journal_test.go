package wallet_test

import (
	"fmt"
	"testing"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

func TestLedger_Entries_paging(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	for i := range 25 {
		_, err := led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c%d", i), Account: "a", Amount: int64(i + 1)})
		require.NoError(t, err)
	}
	var all []wallet.Entry
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, next, err := led.Entries(ctx, "a", cursor, 7)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, all, 26)
	seen := map[string]bool{}
	for i, e := range all[1:] {
		require.Equal(t, fmt.Sprintf("c%d", i), e.TxID, "oldest first, no gaps, no repeats")
		require.False(t, seen[e.ID])
		seen[e.ID] = true
	}
	_, _, err := led.Entries(ctx, "nobody", "", 5)
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
}

func TestLedger_Checkpoint_trimsBehindAndVerifyReplaysFromIt(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	for i := range 10 {
		_, err := led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c%d", i), Account: "a", Amount: 10})
		require.NoError(t, err)
	}
	id, trimmed, err := led.Checkpoint(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, int64(11), trimmed)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 30})
	require.NoError(t, err)

	ents, _, err := led.Entries(ctx, "a", "", 100)
	require.NoError(t, err)
	require.Len(t, ents, 2)
	require.Equal(t, id, ents[0].ID)
	require.Equal(t, wallet.KindCheckpoint, ents[0].Kind)
	require.Equal(t, int64(100), ents[0].Posted)
	require.Equal(t, int64(70), ents[1].Posted)
	require.NoError(t, led.Verify(ctx, "a"))

	// The stored balance disagrees with the journal since the checkpoint.
	require.NoError(t, rdb.HIncrBy(ctx, prefix+":wallet:v2:{a}:acct:a", "posted", 5).Err())
	err = led.Verify(ctx, "a")
	var me *wallet.MismatchError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, wallet.ErrMismatch)
	require.Equal(t, "totals", me.Field)
	require.NoError(t, rdb.HIncrBy(ctx, prefix+":wallet:v2:{a}:acct:a", "cr", 5).Err())
	err = led.Verify(ctx, "a")
	require.ErrorAs(t, err, &me)
	require.Equal(t, "posted", me.Field)
	require.Equal(t, int64(70), me.Want)
	require.Equal(t, int64(75), me.Got)
	_, _, err = led.Checkpoint(ctx, "nobody")
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
}

func TestLedger_Verify_detectsMissingEntry(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	var mid string
	for i := range 5 {
		res, err := led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c%d", i), Account: "a", Amount: 10})
		require.NoError(t, err)
		if i == 2 {
			mid = res.EntryID
		}
	}
	require.NoError(t, led.Verify(ctx, "a"))
	require.NoError(t, rdb.XDel(ctx, prefix+":wallet:v2:{a}:journal:a", mid).Err())
	err := led.Verify(ctx, "a")
	var me *wallet.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, "posted", me.Field)
	require.NotEmpty(t, me.EntryID)
	require.ErrorIs(t, led.Verify(ctx, "nobody"), wallet.ErrAccountNotFound)
}
