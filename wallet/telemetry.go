package wallet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redkit-go/redkit/otelx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the Ledger's spans and metrics.
const ScopeName = "github.com/redkit-go/redkit/wallet"

// telemetry holds the Ledger's tracer and instruments (doc.go's Telemetry
// section lists them). Spans are named "wallet.<operation>" and carry
// redkit.outcome, redkit.replayed and the optional label; never account
// IDs, transaction IDs or amounts.
type telemetry struct {
	tracer   trace.Tracer
	label    string
	ops      metric.Int64Counter
	duration metric.Float64Histogram
	unknown  metric.Int64Counter

	mu       sync.Mutex
	inFlight []trace.SpanContext // transfers across groups left in flight, for Recover to link to
}

// maxInFlightCauses bounds the spans a Recover links to.
const maxInFlightCauses = 128

func newTelemetry(p otelx.Providers, label string) *telemetry {
	m := p.MeterFor(ScopeName, Version)
	t := &telemetry{tracer: p.TracerFor(ScopeName, Version), label: label}
	// Instrument creation only fails on invalid names; ours are constant.
	t.ops, _ = m.Int64Counter("redkit.wallet.operations",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Ledger operations by operation and outcome"))
	t.duration, _ = otelx.DurationHistogram(m, "redkit.wallet.operation.duration",
		"Duration of Ledger operations, by operation and outcome")
	t.unknown, _ = m.Int64Counter("redkit.wallet.unknown_outcomes",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Writes whose outcome stayed unknown after every attempt"))
	return t
}

// span is one operation in progress.
type span struct {
	t     *telemetry
	ctx   context.Context
	name  string
	sp    trace.Span
	start time.Time
	// acrossGroups marks a transfer across slot groups: left in flight, it
	// is the cause of the Recover that finishes it.
	acrossGroups bool
}

// start starts the span of one operation, a child of the caller's span.
// A Recover without a caller's span (the WithRecovery worker's, or a
// program's at start-up) is background work instead: a root span linked
// to the transfers across groups that this Ledger's calls left in flight
// since the last Recover, the work it finishes.
func (t *telemetry) start(ctx context.Context, op string) (context.Context, span) {
	start := time.Now()
	var sp trace.Span
	if op == "recover" && !trace.SpanContextFromContext(ctx).IsValid() {
		t.mu.Lock()
		causes := t.inFlight
		t.inFlight = nil
		t.mu.Unlock()
		ctx, sp = otelx.StartBackground(ctx, t.tracer, "wallet."+op, t.label, causes...)
	} else {
		ctx, sp = otelx.Start(ctx, t.tracer, "wallet."+op, t.label)
	}
	return ctx, span{t: t, ctx: ctx, name: op, sp: sp, start: start}
}

// end records the outcome of err; business refusals are outcomes, not span
// errors.
func (s span) end(err error, replayed bool) {
	out := outcome(err, replayed)
	if s.name != "transfer_batch" { // a batch counts each of its transfers
		s.t.count(s.ctx, s.name, err, replayed)
	}
	s.t.duration.Record(s.ctx, time.Since(s.start).Seconds(), s.t.attrs(s.name, out).Record...)
	if s.sp.IsRecording() {
		s.sp.SetAttributes(attribute.Bool(otelx.AttrReplayed, replayed))
	}
	if s.acrossGroups && errors.Is(err, ErrUnknownOutcome) && s.sp.SpanContext().IsValid() {
		s.t.mu.Lock()
		if len(s.t.inFlight) < maxInFlightCauses {
			s.t.inFlight = append(s.t.inFlight, s.sp.SpanContext())
		}
		s.t.mu.Unlock()
	}
	if refusal(err) {
		err = nil
	}
	otelx.End(s.sp, out, err)
}

// reclaim starts the span of one sweep of the hold reclaimer: background
// work, a root span linked to the span of the Hold that scheduled it. The
// returned func ends it with the sweep's error.
func (t *telemetry) reclaim(ctx context.Context, cause trace.SpanContext) (context.Context, func(error)) {
	ctx, sp := otelx.StartBackground(ctx, t.tracer, "wallet.reclaim", t.label, cause)
	return ctx, func(err error) {
		out := otelx.OutcomeOK
		if err != nil {
			out = outcome(err, false)
		}
		if refusal(err) {
			err = nil
		}
		otelx.End(sp, out, err)
	}
}

// count adds one operation to the operations counter.
func (t *telemetry) count(ctx context.Context, op string, err error, replayed bool) {
	t.ops.Add(ctx, 1, t.attrs(op, outcome(err, replayed)).Add...)
}

func (t *telemetry) attrs(op, outcome string) *otelx.Attrs {
	return otelx.OpAttrs(op, outcome, t.label)
}

func (t *telemetry) unknownOutcome(ctx context.Context) {
	t.unknown.Add(ctx, 1)
}

// The sentinels whose text error.type may carry (otelx.ErrorType).
func init() {
	otelx.RegisterSentinels(ErrRiskySettings, ErrInvalid, ErrInsufficientFunds, ErrAccountNotFound,
		ErrCurrencyMismatch, ErrAccountClosed, ErrConflict, ErrCrossGroup, ErrSameAccount,
		ErrUnknownOutcome, ErrTransferExpired, ErrDestinationFull, ErrHoldNotFound, ErrHoldExpired,
		ErrStaleFence, ErrReplicaAck, ErrMismatch, errRestart)
}

// outcomes names the outcome of each error callers branch on, first match
// wins; refusals are business answers, not span errors. The words are
// those every redkit module uses (otelx.Outcomes).
var outcomes = []struct {
	err     error
	name    string
	refusal bool
}{
	// First: an unknown outcome may wrap the cause, even an ErrInvalid from
	// a later step of a transfer across groups, and is never a refusal.
	{ErrUnknownOutcome, otelx.OutcomeUnknownOutcome, false},
	{ErrInsufficientFunds, otelx.OutcomeInsufficientFunds, true},
	{ErrAccountNotFound, otelx.OutcomeAccountNotFound, true},
	{ErrCurrencyMismatch, otelx.OutcomeCurrencyMismatch, true},
	{ErrAccountClosed, otelx.OutcomeClosed, true},
	{ErrConflict, otelx.OutcomeConflict, true},
	{ErrHoldNotFound, otelx.OutcomeHoldNotFound, true},
	{ErrHoldExpired, otelx.OutcomeHoldExpired, true},
	{ErrStaleFence, otelx.OutcomeStaleFence, true},
	{ErrTransferExpired, otelx.OutcomeTransferExpired, true},
	{ErrDestinationFull, otelx.OutcomeDestinationFull, true},
	{ErrInvalid, otelx.OutcomeInvalid, false},
	{ErrSameAccount, otelx.OutcomeInvalid, false},
	{ErrCrossGroup, otelx.OutcomeCrossGroup, false},
	{ErrReplicaAck, otelx.OutcomeReplicaAckMissing, false},
	{ErrMismatch, otelx.OutcomeMismatch, false},
}

func refusal(err error) bool {
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.refusal
		}
	}
	return false
}

func outcome(err error, replayed bool) string {
	switch {
	case err == nil && replayed:
		return otelx.OutcomeReplayed
	case err == nil:
		return otelx.OutcomeOK
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return otelx.OutcomeError
}
