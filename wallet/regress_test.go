package wallet_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// maxAmount is 2^53-1, the largest amount and balance.
const maxAmount = int64(1)<<53 - 1

// stepHook runs before, once, ahead of the first command sent for which
// match is true (the call stalls there as long as before blocks), as a
// paused process, a cut network or a cancelled caller would at that point.
type stepHook struct {
	match  func(args []any) bool
	before func(ctx context.Context)
	once   sync.Once
}

func (h *stepHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stepHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd.Args()) {
			h.once.Do(func() { h.before(ctx) })
		}
		return next(ctx, cmd)
	}
}

func (h *stepHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptKeys are the KEYS of an EVAL/EVALSHA command.
func scriptKeys(args []any) []string {
	if len(args) < 3 {
		return nil
	}
	name, _ := args[0].(string)
	if name = strings.ToLower(name); name != "evalsha" && name != "eval" {
		return nil
	}
	var n int
	switch v := args[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	}
	var ks []string
	for i := 3; i < 3+n && i < len(args); i++ {
		s, _ := args[i].(string)
		ks = append(ks, s)
	}
	return ks
}

// isCredit matches the destination step of a transfer across groups (the
// only script given an inbound record key); isFinish the source's last
// step (five keys, the third a transaction record, as post.lua's).
func isCredit(args []any) bool {
	ks := scriptKeys(args)
	return len(ks) == 5 && strings.Contains(ks[2], ":xin:")
}

func isFinish(args []any) bool {
	ks := scriptKeys(args)
	if len(ks) != 5 || !strings.Contains(ks[2], ":tx:") || len(args) < 3+len(ks)+2 {
		return false
	}
	// post.lua takes the same keys; its ARGV[2] is the kind, xfinish's the
	// destination's outcome.
	kind, _ := args[3+len(ks)+1].(string)
	return kind != "credit" && kind != "debit"
}

// One transaction ID used by two source groups names two transfers; both
// reach the shared destination group.
func TestRegress_Transfer_sameIDFromTwoSourceGroups(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"g1/alice": 100, "g2/carol": 100, "g3/bob": 0, "g3/dave": 0})
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "pay-1", From: "g1/alice", To: "g3/bob", Amount: 100})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "pay-1", From: "g2/carol", To: "g3/dave", Amount: 100})
	require.NoError(t, err, "an ID is unique per source group")
	require.Equal(t, int64(0), balanceOf(t, led, "g2/carol").Posted)
	require.Equal(t, int64(0), balanceOf(t, led, "g2/carol").Held)
	require.Equal(t, int64(100), balanceOf(t, led, "g3/dave").Posted)
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// A hold refused because its account did not exist stays refused after the
// account is opened and funded, like every other refusal.
func TestRegress_Hold_refusedForMissingAccountIsRemembered(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	h := wallet.HoldReq{ID: "h1", Account: "g/a", Amount: 10, TTL: time.Minute}
	_, err := led.Hold(ctx, h)
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
	holds := prefix + ":wallet:v2:{g}:holds:g/a"
	require.Positive(t, rdb.PTTL(ctx, holds).Val(), "a missing account's refusals expire with the window")
	openFunded(t, led, map[string]int64{"g/a": 100})
	// Opening the account keeps its holds, until one window after the
	// refusal: no hold of the account is open, so the keys keep their expiry.
	require.Positive(t, rdb.PTTL(ctx, holds).Val(), "opening the account keeps its holds, for the window")
	_, err = led.Hold(ctx, h)
	require.ErrorIs(t, err, wallet.ErrAccountNotFound, "stays refused")
	require.Zero(t, balanceOf(t, led, "g/a").Held)
}

// An account whose transfers-out total is near its bound: a transfer
// across groups that would take it past the bound is refused before
// anything is written, and stays refusable (not half applied) on retry.
func TestRegress_Transfer_acrossGroups_totalBoundCheckedBeforeFirstWrite(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"a/src": 1000, "b/dst": 0})
	// The state ~1,024 transfers of 2^53-1 out of and into the account
	// leave (written directly: each would need its own counterparties).
	const near = int64(9223372036854775807 - 50)
	acct := prefix + ":wallet:v2:{a}:acct:a/src"
	require.NoError(t, rdb.HSet(ctx, acct, "tin", near, "tout", near).Err())
	before := redistest.Capture(t, rdb, prefix+":*")
	tr := wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 100}
	for range 2 {
		_, err := led.Transfer(ctx, tr)
		require.ErrorIs(t, err, wallet.ErrInvalid)
		before.RequireUnchanged(t, rdb, "a transfer past the total bound")
	}
	_, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1000), balanceOf(t, led, "a/src").Posted)
}

// stalledPastRecover starts transfer x1 (30 from a/src, funded with 100,
// to b/dst) on a Ledger whose credit step stalls, and has another Ledger
// finish it with Recover; both forget an operation ID after 500ms. It
// returns that other Ledger, a client of the server and the key prefix,
// and resume, which lets the stalled call go on and returns its error.
func stalledPastRecover(t *testing.T) (other *wallet.Ledger, direct *redis.Client, prefix string, resume func() error) {
	t.Helper()
	ctx := t.Context()
	_, direct, prefix = newLedger(t)
	const window = 500 * time.Millisecond
	release := make(chan struct{})
	stalled := make(chan struct{})
	rdb := shared.Client()
	rdb.AddHook(&stepHook{match: isCredit, before: func(context.Context) { close(stalled); <-release }})
	t.Cleanup(func() { _ = rdb.Close() })
	caller := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	other = mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
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
	return other, direct, prefix, func() error {
		close(release)
		return <-done
	}
}

// A call stalled before its credit step while Recover finished the
// transfer and the window passed must not credit the destination again.
func TestRegress_Transfer_stalledPastWindowCreditsOnce(t *testing.T) {
	ctx := t.Context()
	recoverer, direct, prefix, resume := stalledPastRecover(t)
	require.Equal(t, int64(30), balanceOf(t, recoverer, "b/dst").Posted)
	// Both records expire with the window: wait until they are gone.
	waitFor(t, func() bool {
		return direct.Exists(ctx, prefix+":wallet:v2:{b}:xin:a/x1", prefix+":wallet:v2:{b}:xin:x1",
			prefix+":wallet:v2:{a}:tx:x1").Val() == 0
	})
	t.Logf("the stalled call: %v", resume())
	require.Equal(t, int64(70), balanceOf(t, recoverer, "a/src").Posted)
	require.Equal(t, int64(30), balanceOf(t, recoverer, "b/dst").Posted, "credited once")
	require.Zero(t, trialOf(t, recoverer, "a/src", "b/dst").NetTransfers())
}

// Expired holds beyond one sweep's limit are not counted against a debit,
// and no refusal is stored on such a partial view.
func TestRegress_Debit_expiredHoldsBeyondSweepLimit(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 100})
	var last time.Time
	for i := range 100 {
		res, err := led.Hold(ctx, wallet.HoldReq{ID: "h" + strconv.Itoa(i), Account: "g/a", Amount: 1, TTL: time.Second})
		require.NoError(t, err)
		last = res.Expires
	}
	// The Ledger that placed them goes away (its reclaimer with it).
	require.NoError(t, led.Close())
	led2 := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led2.Close() })
	waitFor(t, func() bool { now, err := rdb.Time(ctx).Result(); return err == nil && now.After(last) })
	res, err := led2.Debit(ctx, wallet.Tx{ID: "d1", Account: "g/a", Amount: 100})
	require.NoError(t, err, "every hold has expired")
	require.Equal(t, wallet.Balance{Currency: "CNY"}, res.Balance)
	require.NoError(t, led2.Verify(ctx, "g/a"))
}

// Inside and across groups, a transfer the destination cannot take is
// refused as invalid before anything is written, and not remembered.
func TestRegress_Transfer_destinationOverflowIsInvalidInAndAcrossGroups(t *testing.T) {
	ctx := t.Context()
	for _, to := range []string{"a/dst", "b/dst"} {
		t.Run(to, func(t *testing.T) {
			led, rdb, prefix := newLedger(t)
			openFunded(t, led, map[string]int64{"a/src": 100, to: maxAmount - 10})
			tr := wallet.Transfer{ID: "x1", From: "a/src", To: to, Amount: 100}
			before := redistest.Capture(t, rdb, prefix+":*")
			_, err := led.Transfer(ctx, tr)
			require.ErrorIs(t, err, wallet.ErrInvalid)
			before.RequireUnchanged(t, rdb, "a transfer the destination cannot take")
			_, err = led.Debit(ctx, wallet.Tx{ID: "room", Account: to, Amount: 1000})
			require.NoError(t, err)
			_, err = led.Transfer(ctx, tr)
			require.NoError(t, err, "the refusal was not remembered")
			require.Equal(t, int64(0), balanceOf(t, led, "a/src").Posted)
		})
	}
}

func TestRegress_TransferBatch_withReplicaAck_refusesCrossGroupBeforeIO(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t, wallet.WithReplicaAck(1, 10*time.Millisecond))
	plain := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = plain.Close() })
	openFunded(t, plain, map[string]int64{"a/src": 100, "b/dst": 0})
	before := redistest.Capture(t, rdb, prefix+":*")
	out := led.TransferBatch(ctx, []wallet.Transfer{{ID: "x1", From: "a/src", To: "b/dst", Amount: 10}})
	require.ErrorIs(t, out[0].Err, wallet.ErrCrossGroup)
	before.RequireUnchanged(t, rdb, "a cross-group transfer in a batch")
}

// A transfer across groups interrupted after its first step was sent ends
// in ErrUnknownOutcome (joined with the cause), never a bare error: a step
// may have been applied.
func TestRegress_Transfer_acrossGroups_interruptedIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func([]any) bool
		fault func(px *redistest.Proxy, cancel context.CancelFunc)
	}{
		{"cut before the finish", isFinish, func(px *redistest.Proxy, _ context.CancelFunc) { require.NoError(t, px.Cut(true)) }},
		{"cancelled before the credit", isCredit, func(_ *redistest.Proxy, cancel context.CancelFunc) { cancel() }},
		{"cancelled before the finish", isFinish, func(_ *redistest.Proxy, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, prefix := newLedger(t)
			px := redistest.NewProxy(t, shared.Addr())
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
			rdb.AddHook(&stepHook{match: tc.match, before: func(context.Context) { tc.fault(px, cancel) }})
			t.Cleanup(func() { _ = rdb.Close() })
			led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
			ok := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
			t.Cleanup(func() { _ = led.Close(); _ = ok.Close() })
			openFunded(t, ok, map[string]int64{"a/src": 100, "b/dst": 0})
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30})
			require.ErrorIs(t, err, wallet.ErrUnknownOutcome, "%v", err)
			_ = px.Cut(false)
			_, err = ok.Recover(t.Context())
			require.NoError(t, err)
			require.Equal(t, int64(70), balanceOf(t, ok, "a/src").Posted)
			require.Equal(t, int64(30), balanceOf(t, ok, "b/dst").Posted)
		})
	}
}

// The held-total bound does not count a hold that has expired but was not
// released yet (the bound is checked before the sweep).
func TestRegress_Hold_boundIgnoresExpiredHolds(t *testing.T) {
	ctx := t.Context()
	led, rdb, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "g/a", wallet.WithCurrency("CNY"), wallet.WithOverdraft(maxAmount)))
	res, err := led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "g/a", Amount: maxAmount, TTL: time.Second})
	require.NoError(t, err)
	require.NoError(t, led.Close()) // no reclaimer releases it
	waitFor(t, func() bool { now, err := rdb.Time(ctx).Result(); return err == nil && now.After(res.Expires) })
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "g/a", Amount: 1, TTL: time.Minute})
	require.NoError(t, err, "h1 has expired")
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "g/a", To: "h/b", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountNotFound, "decided, not refused as invalid")
	require.Equal(t, int64(1), balanceOf(t, led, "g/a").Held)
}

// A checkpoint carries running totals past 2^53 exactly (found by the
// model-based test: a Lua number rounded them, and Verify then reported a
// mismatch on an untouched account).
func TestRegress_Checkpoint_totalsPast2to53AreExact(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": maxAmount})
	_, err := led.Debit(ctx, wallet.Tx{ID: "d1", Account: "g/a", Amount: maxAmount})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c2", Account: "g/a", Amount: 8})
	require.NoError(t, err)
	_, _, err = led.Checkpoint(ctx, "g/a")
	require.NoError(t, err)
	require.NoError(t, led.Verify(ctx, "g/a"))
	require.Equal(t, maxAmount+8, trialOf(t, led, "g/a").Credits)
}

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
	require.Zero(t, trialOf(t, led, "g1/alice", "g2/bob").NetTransfers())
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
	other, direct, prefix, resume := stalledPastRecover(t)
	waitFor(t, func() bool { return direct.Exists(ctx, prefix+":wallet:v2:{a}:tx:x1").Val() == 0 })
	_, err := other.TransferSteps(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 20}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(20), balanceOf(t, other, "a/src").Held)

	err = resume()
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome, "its transfer was finished by Recover: %v", err)
	n, err := other.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a, b := balanceOf(t, other, "a/src"), balanceOf(t, other, "b/dst")
	require.Equal(t, int64(50), a.Posted)
	require.Zero(t, a.Held)
	require.Equal(t, int64(50), b.Posted, "both transfers credited, each once")
	require.Zero(t, trialOf(t, other, "a/src", "b/dst").NetTransfers())
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
			ents := entriesOf(t, led, "g/a")
			removed := 0
			for _, e := range ents[:len(ents)-1] { // never the newest entry
				if slices.Contains(tc.kinds, e.Kind) && (e.Kind == wallet.KindClose || e.TxID == "h1") {
					require.NoError(t, rdb.XDel(ctx, journal, e.ID).Err())
					removed++
				}
			}
			require.Equal(t, len(tc.kinds), removed)
			err := led.Verify(ctx, "g/a")
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
	stop := keepCalling(func(i int) error {
		from := []string{"g/a", "g/b"}[i%2]
		_, err := led.Transfer(ctx, wallet.Transfer{ID: "x" + strconv.Itoa(i), From: from, To: "h/c", Amount: 1})
		return err
	})
	for range 50 {
		require.NoError(t, led.Verify(ctx, "g/a"))
	}
	require.NoError(t, stop())
}
