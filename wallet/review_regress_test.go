package wallet_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// A conflict answered by the first step of a transfer across groups is a
// decision like the same conflict inside one group: with too few replicas
// acknowledging (none attached here, WAIT 1 counts 0) both carry
// ErrReplicaAck next to the conflict.
func TestRegress_Transfer_acrossGroups_conflictKeepsReplicaAckShortfall(t *testing.T) {
	ctx := t.Context()
	led, _, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g1/a": 1000, "g1/x": 0, "g2/b": 0})
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "in-group", From: "g1/a", To: "g1/x", Amount: 10})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "cross", From: "g1/a", To: "g2/b", Amount: 10})
	require.NoError(t, err)
	acked := wallet.New(shared.Client(), wallet.WithKeyPrefix(prefix), wallet.WithReplicaAck(1, 20*time.Millisecond))
	t.Cleanup(func() { _ = acked.Close() })
	for _, tr := range []wallet.Transfer{
		{ID: "in-group", From: "g1/a", To: "g1/x", Amount: 11},
		{ID: "cross", From: "g1/a", To: "g2/b", Amount: 11},
	} {
		_, err := acked.Transfer(ctx, tr)
		require.ErrorIs(t, err, wallet.ErrConflict, tr.ID)
		require.ErrorIs(t, err, wallet.ErrReplicaAck, tr.ID)
	}
}

// A page that ends at the journal's newest entry returns no cursor, full
// or not; a page followed by more entries returns the cursor of its last.
func TestRegress_Entries_pageEndingAtNewestEntryHasNoCursor(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 10}) // journal: open, credit
	page, next, err := led.Entries(ctx, "g/a", "", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Empty(t, next, "the page holds the whole journal")
	page, next, err = led.Entries(ctx, "g/a", "", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, page[0].ID, next)
	page, next, err = led.Entries(ctx, "g/a", next, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, wallet.KindCredit, page[0].Kind)
	require.Empty(t, next)
}
