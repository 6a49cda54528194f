package wallet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

func TestLedger_telemetry(t *testing.T) {
	ctx := t.Context()
	rec := otelxtest.New(t)
	led, px, direct, prefix := proxied(t, 100*time.Millisecond, wallet.WithTracerProvider(rec.TracerProvider),
		wallet.WithMeterProvider(rec.MeterProvider), wallet.WithLabel("payouts"))
	defer led.Close()

	creditReplayRefuse(t, led, "secret-account", "secret-tx", 4242)
	px.DropReplies(true)
	_, err := led.Debit(ctx, wallet.Tx{ID: "secret-tx3", Account: "secret-account", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	px.DropReplies(false)
	require.EqualValues(t, 1, direct.Exists(ctx, prefix+":wallet:v2:{secret-account}:tx:secret-tx3").Val(),
		"the debit whose reply was lost ran")

	type seen struct {
		name, outcome string
		replayed      bool
		status        codes.Code
	}
	var got []seen
	for _, s := range rec.Spans.Ended() {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			require.NotContains(t, kv.Value.String(), "secret", "attribute %s leaks an ID", kv.Key)
			require.NotContains(t, kv.Value.String(), "4242", "attribute %s leaks an amount", kv.Key)
		}
		require.Equal(t, "payouts", attrs["redkit.label"].AsString())
		got = append(got, seen{s.Name(), attrs["redkit.outcome"].AsString(), attrs["redkit.replayed"].AsBool(), s.Status().Code})
	}
	require.Equal(t, []seen{
		{"wallet.open", "ok", false, codes.Unset},
		{"wallet.credit", "ok", false, codes.Unset},
		{"wallet.credit", "replayed", true, codes.Unset},
		{"wallet.debit", "insufficient_funds", false, codes.Unset},
		{"wallet.debit", "unknown_outcome", false, codes.Error},
	}, got)

	var rm metricdata.ResourceMetrics
	require.NoError(t, rec.Reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, wallet.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue // the duration histogram, checked below
			}
			for _, dp := range sum.DataPoints {
				op, _ := dp.Attributes.Value("redkit.operation")
				out, _ := dp.Attributes.Value("redkit.outcome")
				counts[strings.Join([]string{m.Name, op.AsString(), out.AsString()}, " ")] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{
		"redkit.wallet.operations open ok":                  1,
		"redkit.wallet.operations credit ok":                1,
		"redkit.wallet.operations credit replayed":          1,
		"redkit.wallet.operations debit insufficient_funds": 1,
		"redkit.wallet.operations debit unknown_outcome":    1,
		"redkit.wallet.unknown_outcomes  ":                  1,
	}, counts)
}

// creditReplayRefuse opens account, credits it amount under the ID tx,
// sends that credit again (a replay) and debits more than the balance (a
// refusal): one call of each outcome the telemetry tells apart.
func creditReplayRefuse(t *testing.T, led *wallet.Ledger, account, tx string, amount int64) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, led.Open(ctx, account, wallet.WithCurrency("CNY")))
	credit := wallet.Tx{ID: tx, Account: account, Amount: amount}
	for range 2 {
		_, err := led.Credit(ctx, credit)
		require.NoError(t, err)
	}
	_, err := led.Debit(ctx, wallet.Tx{ID: tx + "-over", Account: account, Amount: amount + 1})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
}

// Every public operation records redkit.wallet.operation.duration, in
// seconds with otelx.DurationBuckets, by operation and outcome: applied
// (ok), refused (insufficient_funds, ...), replayed and error.
func TestLedger_operationDurations(t *testing.T) {
	rec := otelxtest.New(t)
	led, _, _ := newLedger(t, wallet.WithTracerProvider(rec.TracerProvider), wallet.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()

	creditReplayRefuse(t, led, "a", "c1", 10)
	require.NoError(t, led.Open(ctx, "b", wallet.WithCurrency("CNY")))
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "a", To: "b", Amount: 4})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "a", Amount: -1})
	require.ErrorIs(t, err, wallet.ErrInvalid)

	_, _, err = led.Entries(ctx, "a", "", 10)
	require.NoError(t, err)
	_ = trialOf(t, led, "a", "b")
	_ = balanceOf(t, led, "a")
	_, _, err = led.Entries(ctx, "nobody", "", 10)
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)

	require.Equal(t, map[string]uint64{
		"balance ok":                1,
		"entries ok":                1,
		"entries account_not_found": 1,
		"trial_balance ok":          1,
		"open ok":                   2,
		"credit ok":                 1,
		"credit replayed":           1,
		"debit insufficient_funds":  1,
		"debit invalid":             1,
		"transfer ok":               1,
	}, rec.Durations(t, "redkit.wallet.operation.duration"))
}

// A Transfer across slot groups is one wallet.transfer span, a child of
// the caller's, with every step's go-redis command under it; scripts the
// server had not cached yet are recovered from without an error span.
func TestSpanTree_TransferAcrossGroups(t *testing.T) {
	srv := redistest.New(t, redistest.Options{}) // an empty script cache
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	led := mustNew(t, rdb, wallet.WithTracerProvider(rec.TracerProvider), wallet.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = led.Close() })
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's handshake, outside the trace
	openFunded(t, led, map[string]int64{"a/src": 100, "b/dst": 0})

	ctx, parent := rec.TracerProvider.Tracer("caller").Start(t.Context(), "POST /transfers")
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30})
	require.NoError(t, err)
	parent.End()

	// The steps (reads, each group's script, the hold's expiry) are the
	// Ledger's to change; the shape is not: the caller's span, one
	// wallet.transfer under it, every command under that, none an error,
	// and every script-cache miss followed by the EVAL that recovers it.
	tree := rec.Tree(t, "POST /transfers")
	lines := strings.Split(strings.TrimSuffix(tree, "\n"), "\n")
	require.Equal(t, []string{"POST /transfers", "  wallet.transfer outcome=ok"}, lines[:2], tree)
	misses := 0
	for i, l := range lines[2:] {
		require.True(t, strings.HasPrefix(l, "    "), "not under wallet.transfer: %q\n%s", l, tree)
		require.False(t, strings.HasPrefix(strings.TrimSpace(l), "wallet."), "a second wallet span: %q\n%s", l, tree)
		require.NotContains(t, l, "ERROR", tree)
		if strings.HasSuffix(l, "cache_miss") {
			misses++
			require.Equal(t, "    eval", lines[2+i+1], tree)
		}
	}
	require.GreaterOrEqual(t, misses, 2, "both groups' scripts were new to the server\n%s", tree)
}

// The Ledger's background work is made of root spans, each linked to the
// call that caused it: a sweep of the hold reclaimer (wallet.reclaim) to
// the Hold whose expiry it waits for, and a Recover of the WithRecovery
// worker (wallet.recover) to the transfer across groups this Ledger left
// in flight. Neither had a link before.
func TestSpanTree_backgroundWorkLinksToItsCause(t *testing.T) {
	rec := otelxtest.New(t)
	led, px, _, _ := proxied(t, 100*time.Millisecond, wallet.WithTracerProvider(rec.TracerProvider),
		wallet.WithMeterProvider(rec.MeterProvider), wallet.WithRecovery(time.Second))
	defer led.Close()
	openFunded(t, led, map[string]int64{"a/src": 100, "b/dst": 0, "a/holder": 50})
	tracer := rec.TracerProvider.Tracer("caller")

	ctx, hold := tracer.Start(t.Context(), "hold request")
	_, err := led.Hold(ctx, wallet.HoldReq{ID: "h-1", Account: "a/holder", Amount: 5, TTL: time.Second})
	require.NoError(t, err)
	hold.End()

	// A first transfer loads the scripts; the second loses every reply
	// after the one to its read of the destination: its first step may
	// have run, so it is left in flight.
	_, err = led.Transfer(t.Context(), wallet.Transfer{ID: "x-0", From: "a/src", To: "b/dst", Amount: 1})
	require.NoError(t, err)
	ctx, transfer := tracer.Start(t.Context(), "transfer request")
	px.DropRepliesAfter(1)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x-1", From: "a/src", To: "b/dst", Amount: 10})
	px.DropReplies(false)
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	transfer.End()

	linkedTo := func(name, parent string) bool {
		ended := rec.Spans.Ended()
		want := map[trace.SpanID]bool{}
		for _, s := range ended {
			for _, p := range ended {
				if p.Name() == parent && s.Parent().SpanID() == p.SpanContext().SpanID() {
					want[s.SpanContext().SpanID()] = true // the wallet.* span of that request
				}
			}
		}
		for _, s := range ended {
			if s.Name() != name {
				continue
			}
			for _, l := range s.Links() {
				if want[l.SpanContext.SpanID()] && !s.Parent().IsValid() {
					return true
				}
			}
		}
		return false
	}
	waitFor(t, func() bool {
		return linkedTo("wallet.reclaim", "hold request") && linkedTo("wallet.recover", "transfer request")
	})
	require.NoError(t, led.Close())
	for _, s := range rec.Spans.Ended() {
		if s.Name() == "wallet.reclaim" || s.Name() == "wallet.recover" {
			require.False(t, s.Parent().IsValid(), "%s is background work, a root:\n%s", s.Name(), rec.Trees())
		}
	}
}
