package wallet_test

import (
	"context"
	"strings"
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

// After the window the same ID names a new transfer across groups, also
// while the destination still keeps its record of the first one (two
// windows): the new transfer is credited afresh, never answered from the
// old record (same fields: "credited" without a credit; another amount:
// refused as a foreign transfer on every call and Recover).
func TestRegress_Transfer_acrossGroups_idReusedAfterWindowIsNewTransfer(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	wallet.SetWindow(led, 500*time.Millisecond)
	openFunded(t, led, map[string]int64{"g1/alice": 1000, "g2/bob": 0})
	for _, id := range []string{"pay-1", "pay-2"} {
		_, err := led.Transfer(ctx, wallet.Transfer{ID: id, From: "g1/alice", To: "g2/bob", Amount: 100})
		require.NoError(t, err)
	}
	src := func(id string) string { return prefix + ":wallet:v2:{g1}:tx:" + id }
	waitFor(t, func() bool { return rdb.Exists(ctx, src("pay-1"), src("pay-2")).Val() == 0 })
	require.EqualValues(t, 2, rdb.Exists(ctx, prefix+":wallet:v2:{g2}:xin:g1/pay-1", prefix+":wallet:v2:{g2}:xin:g1/pay-2").Val(),
		"the destination still keeps both records")

	res, err := led.Transfer(ctx, wallet.Transfer{ID: "pay-1", From: "g1/alice", To: "g2/bob", Amount: 100})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, int64(300), res.To.Posted)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "pay-2", From: "g1/alice", To: "g2/bob", Amount: 70})
	require.NoError(t, err)
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	a, b := balanceOf(t, led, "g1/alice"), balanceOf(t, led, "g2/bob")
	require.Equal(t, int64(630), a.Posted)
	require.Zero(t, a.Held)
	require.Equal(t, int64(370), b.Posted)
	tb, err := led.TrialBalance(ctx, "g1/alice", "g2/bob")
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
	require.NoError(t, led.Verify(ctx, "g1/alice"))
	require.NoError(t, led.Verify(ctx, "g2/bob"))
}

// A call stalled before its credit step while Recover finished its
// transfer, and the window passed, and a new transfer under the same ID
// began (its process crashed after the first step): the stalled call,
// resuming, must not finish the new transfer with the old one's credit
// (that posted the source without crediting the destination).
func TestRegress_Transfer_acrossGroups_stalledCallLeavesLaterTransferUnderSameIDAlone(t *testing.T) {
	ctx := t.Context()
	_, direct, prefix := newLedger(t)
	const window = 500 * time.Millisecond
	release := make(chan struct{})
	stalled := make(chan struct{})
	rdb := shared.Client()
	rdb.AddHook(&stepHook{match: isCredit, before: func(context.Context) { close(stalled); <-release }})
	t.Cleanup(func() { _ = rdb.Close() })
	caller := wallet.New(rdb, wallet.WithKeyPrefix(prefix))
	other := wallet.New(shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = caller.Close(); _ = other.Close() })
	wallet.SetWindow(caller, window)
	wallet.SetWindow(other, window)
	openFunded(t, other, map[string]int64{"a/src": 100, "b/dst": 0})

	done := make(chan error, 1)
	go func() {
		_, err := caller.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30})
		done <- err
	}()
	<-stalled
	n, err := other.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	waitFor(t, func() bool { return direct.Exists(ctx, prefix+":wallet:v2:{a}:tx:x1").Val() == 0 })
	_, err = other.TransferSteps(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 20}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(20), balanceOf(t, other, "a/src").Held)

	close(release)
	err = <-done
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome, "its transfer was finished by Recover: %v", err)
	n, err = other.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a, b := balanceOf(t, other, "a/src"), balanceOf(t, other, "b/dst")
	require.Equal(t, int64(50), a.Posted)
	require.Zero(t, a.Held)
	require.Equal(t, int64(50), b.Posted, "both transfers credited, each once")
	tb, err := other.TrialBalance(ctx, "a/src", "b/dst")
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
}

// isBegin matches the first step of a transfer across groups (the only
// script given the group's in-flight index, as its sixth key).
func isBegin(args []any) bool {
	ks := scriptKeys(args)
	return len(ks) >= 6 && strings.HasSuffix(ks[5], ":xpend")
}

// A transfer across groups whose destination fills up between the
// Ledger's read of it and the credit step is voided and remembered: a
// stored refusal of its own (ErrDestinationFull), not ErrInvalid, which
// means nothing written and nothing remembered. The caller pauses right
// after its read of the destination, while another transfer fills it.
func TestRegress_Transfer_acrossGroups_destinationFilledAfterReadIsStoredRefusal(t *testing.T) {
	ctx := t.Context()
	_, _, prefix := newLedger(t)
	other := wallet.New(shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = other.Close() })
	openFunded(t, other, map[string]int64{"g1/a": 1000, "g3/c": 1000, "g2/b": maxAmount - 100})
	rdb := shared.Client()
	rdb.AddHook(&stepHook{match: isBegin, before: func(ctx context.Context) {
		_, err := other.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g1/a", To: "g2/b", Amount: 100})
		require.NoError(t, err)
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	led := wallet.New(rdb, wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led.Close() })

	t2 := wallet.Transfer{ID: "t2", From: "g3/c", To: "g2/b", Amount: 50}
	_, err := led.Transfer(ctx, t2)
	require.ErrorIs(t, err, wallet.ErrDestinationFull)
	require.NotErrorIs(t, err, wallet.ErrInvalid)
	require.Equal(t, []string{wallet.KindOpen, wallet.KindCredit, wallet.KindTransferHold, wallet.KindTransferVoid},
		kinds(t, led, "g3/c"))
	_, err = other.Debit(ctx, wallet.Tx{ID: "drain", Account: "g2/b", Amount: 1000})
	require.NoError(t, err)
	res, err := led.Transfer(ctx, t2)
	require.ErrorIs(t, err, wallet.ErrDestinationFull, "the refusal is remembered")
	require.True(t, res.Replayed)
	c := balanceOf(t, led, "g3/c")
	require.Equal(t, int64(1000), c.Posted)
	require.Zero(t, c.Held)
}
