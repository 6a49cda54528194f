package wallet_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
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
	acked := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix), wallet.WithReplicaAck(1, 20*time.Millisecond))
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
	caller := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	other := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
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
	other := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = other.Close() })
	openFunded(t, other, map[string]int64{"g1/a": 1000, "g3/c": 1000, "g2/b": maxAmount - 100})
	rdb := shared.Client()
	rdb.AddHook(&stepHook{match: isBegin, before: func(ctx context.Context) {
		_, err := other.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g1/a", To: "g2/b", Amount: 100})
		require.NoError(t, err)
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
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

// Verify sees an entry removed from the middle of the journal also when
// its deltas are zero (a close) or cancel out with another removed one (a
// hold and its void), from the opening entry and from a checkpoint: the
// journal's entries are counted against the stream's entries-added
// counter, which removing entries does not lower. Run too as the ACL user
// of redis.acl, which may read that counter.
func TestRegress_Verify_entryRemovedFromJournalDetected(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kinds      []string // entries to remove
		checkpoint bool     // Checkpoint before the holds
		acl        bool
	}{
		{name: "close entry", kinds: []string{wallet.KindClose}},
		{name: "hold and its void", kinds: []string{wallet.KindHold, wallet.KindVoid}},
		{name: "close entry after a checkpoint", kinds: []string{wallet.KindClose}, checkpoint: true},
		{name: "hold and its void after a checkpoint", kinds: []string{wallet.KindHold, wallet.KindVoid}, checkpoint: true},
		{name: "hold and its void as the ACL user", kinds: []string{wallet.KindHold, wallet.KindVoid}, checkpoint: true, acl: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			led, rdb, prefix := newLedger(t)
			if tc.acl {
				s, password := redistest.NewWithACL(t, "redis.acl")
				user := s.Client(func(o *redis.Options) { o.Username, o.Password = "redkit-wallet", password })
				rdb, prefix = s.Client(), "redkit"
				led = mustNew(t, user)
				t.Cleanup(func() { _ = led.Close() })
			}
			journal := prefix + ":wallet:v2:{g}:journal:g/a"
			openFunded(t, led, map[string]int64{"g/a": 100})
			if tc.checkpoint {
				_, _, err := led.Checkpoint(ctx, "g/a")
				require.NoError(t, err)
			}
			// hold h1, void h1, hold h2, close, void h2
			for _, id := range []string{"h1", "h2"} {
				_, err := led.Hold(ctx, wallet.HoldReq{ID: id, Account: "g/a", Amount: 40, TTL: time.Hour})
				require.NoError(t, err)
				if id == "h2" {
					require.NoError(t, led.CloseAccount(ctx, "g/a"))
				}
				_, err = led.Void(ctx, "g/a", id)
				require.NoError(t, err)
			}
			require.NoError(t, led.Verify(ctx, "g/a"), "clean before")
			ents, _, err := led.Entries(ctx, "g/a", "", wallet.MaxPage)
			require.NoError(t, err)
			removed := 0
			for _, e := range ents[:len(ents)-1] { // never the newest entry
				if slices.Contains(tc.kinds, e.Kind) && (e.Kind == wallet.KindClose || e.TxID == "h1") {
					require.NoError(t, rdb.XDel(ctx, journal, e.ID).Err())
					removed++
				}
			}
			require.Equal(t, len(tc.kinds), removed)
			err = led.Verify(ctx, "g/a")
			require.ErrorIs(t, err, wallet.ErrMismatch)
			var me *wallet.MismatchError
			require.ErrorAs(t, err, &me)
			require.Equal(t, "entries", me.Field, "%v", err)
			_, _, err = led.Checkpoint(ctx, "g/a")
			require.ErrorIs(t, err, wallet.ErrMismatch, "no checkpoint over a journal with a gap")
		})
	}
}

// Verify compares Held with the open holds and the transfers across
// groups in flight from the account (both counted in Held): a hold record
// removed or decided behind the scripts' back is a mismatch, while open
// holds and a transfer in flight are not.
func TestRegress_Verify_heldComparedWithOpenHolds(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 100, "h/b": 0})
	for _, id := range []string{"h1", "h2"} {
		_, err := led.Hold(ctx, wallet.HoldReq{ID: id, Account: "g/a", Amount: 10, TTL: time.Hour})
		require.NoError(t, err)
	}
	_, err := led.TransferSteps(ctx, wallet.Transfer{ID: "x1", From: "g/a", To: "h/b", Amount: 30}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(50), balanceOf(t, led, "g/a").Held)
	require.NoError(t, led.Verify(ctx, "g/a"), "two open holds and a transfer in flight")

	holds := prefix + ":wallet:v2:{g}:holds:g/a"
	raw := rdb.HGet(ctx, holds, "h2").Val()
	require.NoError(t, rdb.HSet(ctx, holds, "h2", strings.Replace(raw, `"s":"open"`, `"s":"voided"`, 1)).Err())
	err = led.Verify(ctx, "g/a")
	var me *wallet.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, wallet.MismatchError{Account: "g/a", Field: "holds", Want: 40, Got: 50}, *me)
	require.NoError(t, rdb.HSet(ctx, holds, "h2", raw).Err())
	require.NoError(t, led.Verify(ctx, "g/a"))

	require.NoError(t, rdb.HSet(ctx, prefix+":wallet:v2:{g}:tx:x1", "s", "posted").Err())
	require.ErrorAs(t, led.Verify(ctx, "g/a"), &me)
	require.Equal(t, wallet.MismatchError{Account: "g/a", Field: "holds", Want: 20, Got: 50}, *me)
}

// expireHolds places n holds of 1 on each account with a short TTL, stops
// the reclaimer of the Ledger that placed them (as for holds placed by
// another process), and waits until the server's clock is past them all.
func expireHolds(t *testing.T, led *wallet.Ledger, rdb *redis.Client, n map[string]int) {
	t.Helper()
	ctx := t.Context()
	var last time.Time
	for account, count := range n {
		for i := range count {
			res, err := led.Hold(ctx, wallet.HoldReq{ID: "h" + strconv.Itoa(i), Account: account, Amount: 1, TTL: 2 * time.Second})
			require.NoError(t, err)
			if res.Expires.After(last) {
				last = res.Expires
			}
		}
	}
	require.NoError(t, led.Close())
	for account, count := range n {
		require.GreaterOrEqual(t, balanceOf(t, led, account).Held, int64(count), "setup: none released before expiry")
	}
	waitFor(t, func() bool { now, err := rdb.Time(ctx).Result(); return err == nil && now.After(last) })
}

// A balance never counts an expired hold, also when more have expired
// than one sweep releases (a script's 64, Balance's 1000): Balance sweeps
// until none is due, and a posting whose reply would still count one
// answers "again" before writing, so the Ledger sweeps and sends it again.
func TestRegress_expiredHoldsPastSweepLimitNeverCounted(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 5000, "g/b": 5000, "g/c": 5000, "g/d": 5000})
	expireHolds(t, led, rdb, map[string]int{"g/a": 1001, "g/b": 65, "g/c": 65, "g/d": 65})
	led2 := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led2.Close() })

	res, err := led2.Credit(ctx, wallet.Tx{ID: "c2", Account: "g/b", Amount: 10})
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 5010, Available: 5010, Currency: "CNY"}, res.Balance)
	res, err = led2.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g/c", To: "g/d", Amount: 10})
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 4990, Available: 4990, Currency: "CNY"}, res.Balance)
	require.Equal(t, wallet.Balance{Posted: 5010, Available: 5010, Currency: "CNY"}, res.To)
	b := balanceOf(t, led2, "g/a")
	require.Equal(t, wallet.Balance{Posted: 5000, Available: 5000, Currency: "CNY"}, b)
	for _, a := range []string{"g/a", "g/b", "g/c", "g/d"} {
		require.NoError(t, led2.Verify(ctx, a))
	}
}

// The running-total bound of a transfer (transfers out plus what is held,
// which a transfer across groups adds to transfers out at its end) does
// not count a hold that has expired and was not released yet, inside one
// group and across groups.
func TestRegress_Transfer_totalBoundIgnoresExpiredHolds(t *testing.T) {
	for _, to := range []string{"g/b", "h/b"} {
		t.Run(to, func(t *testing.T) {
			ctx := t.Context()
			led, rdb, prefix := newLedger(t)
			openFunded(t, led, map[string]int64{"g/a": maxAmount, to: 0})
			// The state many transfers of 2^53-1 out of and back into g/a
			// leave (written directly: each would need its own round trip).
			const near = int64(9_000_000_000_000_000_000 - 2_000_000_000_000_000)
			require.NoError(t, rdb.HSet(ctx, prefix+":wallet:v2:{g}:acct:g/a", "tin", near, "tout", near).Err())
			res, err := led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "g/a", Amount: maxAmount, TTL: time.Second})
			require.NoError(t, err)
			require.NoError(t, led.Close()) // no reclaimer releases it
			waitFor(t, func() bool { now, err := rdb.Time(ctx).Result(); return err == nil && now.After(res.Expires) })
			// near + 10^15 is within the bound; near + 2^53-1 + 10^15 is not.
			const n = int64(1_000_000_000_000_000)
			_, err = led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "g/a", To: to, Amount: n})
			require.NoError(t, err, "h1 has expired")
			a := balanceOf(t, led, "g/a")
			require.Equal(t, maxAmount-n, a.Posted)
			require.Zero(t, a.Held)
			require.Equal(t, n, balanceOf(t, led, to).Posted)
		})
	}
}

// Hold, Capture and Void reply with balances that count no expired hold,
// also past a script's sweep limit.
func TestRegress_holdResultsCountNoExpiredHoldPastSweepLimit(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 5000, "g/b": 5000, "g/c": 5000})
	for _, a := range []string{"g/b", "g/c"} {
		_, err := led.Hold(ctx, wallet.HoldReq{ID: "keep", Account: a, Amount: 100, TTL: time.Hour})
		require.NoError(t, err)
	}
	expireHolds(t, led, rdb, map[string]int{"g/a": 65, "g/b": 65, "g/c": 65})
	led2 := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led2.Close() })

	res, err := led2.Hold(ctx, wallet.HoldReq{ID: "new", Account: "g/a", Amount: 10, TTL: time.Hour})
	require.NoError(t, err)
	require.Equal(t, int64(10), res.Balance.Held)
	res, err = led2.Capture(ctx, "g/b", "keep", 40)
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 4960, Available: 4960, Currency: "CNY"}, res.Balance)
	res, err = led2.Void(ctx, "g/c", "keep")
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 5000, Available: 5000, Currency: "CNY"}, res.Balance)
}

// A transfer across groups replies with balances of both accounts that
// count no expired hold, also past a script's sweep limit (the finishing
// step used not to sweep at all).
func TestRegress_Transfer_acrossGroups_resultCountsNoExpiredHold(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 5000, "h/b": 5000})
	expireHolds(t, led, rdb, map[string]int{"g/a": 65, "h/b": 65})
	led2 := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led2.Close() })
	res, err := led2.Transfer(ctx, wallet.Transfer{ID: "x1", From: "g/a", To: "h/b", Amount: 10})
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 4990, Available: 4990, Currency: "CNY"}, res.Balance)
	require.Equal(t, wallet.Balance{Posted: 5010, Available: 5010, Currency: "CNY"}, res.To)
	require.NoError(t, led2.Verify(ctx, "g/a"))
	require.NoError(t, led2.Verify(ctx, "h/b"))
}

// Verify is not thrown off by transfers across groups that begin and end
// in the account's group while it runs (its first step reads the group's
// in-flight index, then the records of those transfers with the balances).
func TestRegress_Verify_whileTransfersAcrossGroupsRun(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 1_000_000, "g/b": 1_000_000, "h/c": 0})
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			from := []string{"g/a", "g/b"}[i%2]
			if _, err := led.Transfer(ctx, wallet.Transfer{ID: "x" + strconv.Itoa(i), From: from, To: "h/c", Amount: 1}); err != nil {
				done <- err
				return
			}
		}
	}()
	for range 50 {
		require.NoError(t, led.Verify(ctx, "g/a"))
	}
	close(stop)
	require.NoError(t, <-done)
}
