package wallet_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
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

func balanceOf(t *testing.T, led *wallet.Ledger, account string) wallet.Balance {
	t.Helper()
	b, err := led.Balance(t.Context(), account)
	require.NoError(t, err)
	return b
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

// A call stalled before its credit step while Recover finished the
// transfer and the window passed must not credit the destination again.
func TestRegress_Transfer_stalledPastWindowCreditsOnce(t *testing.T) {
	ctx := t.Context()
	_, direct, prefix := newLedger(t)
	const window = 500 * time.Millisecond
	release := make(chan struct{})
	stalled := make(chan struct{})
	hook := &stepHook{match: isCredit, before: func(context.Context) { close(stalled); <-release }}
	rdb := shared.Client()
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })
	caller := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	recoverer := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = caller.Close(); _ = recoverer.Close() })
	wallet.SetWindow(caller, window)
	wallet.SetWindow(recoverer, window)
	openFunded(t, recoverer, map[string]int64{"a/src": 100, "b/dst": 0})

	tr := wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30}
	done := make(chan error, 1)
	go func() { _, err := caller.Transfer(ctx, tr); done <- err }()
	<-stalled
	n, err := recoverer.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(30), balanceOf(t, recoverer, "b/dst").Posted)
	// Both records expire with the window: wait until they are gone.
	waitFor(t, func() bool {
		return direct.Exists(ctx, prefix+":wallet:v2:{b}:xin:a/x1", prefix+":wallet:v2:{b}:xin:x1",
			prefix+":wallet:v2:{a}:tx:x1").Val() == 0
	})
	close(release)
	err = <-done
	t.Logf("the stalled call: %v", err)
	require.Equal(t, int64(70), balanceOf(t, recoverer, "a/src").Posted)
	require.Equal(t, int64(30), balanceOf(t, recoverer, "b/dst").Posted, "credited once")
	tb, err := recoverer.TrialBalance(ctx, "a/src", "b/dst")
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
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
	tb, err := led.TrialBalance(ctx, "g/a")
	require.NoError(t, err)
	require.Equal(t, maxAmount+8, tb.Credits)
}
