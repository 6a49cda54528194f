package wallet

import (
	"context"
	"errors"
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
}

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
}

func (t *telemetry) start(ctx context.Context, op string) (context.Context, span) {
	start := time.Now()
	ctx, sp := otelx.Start(ctx, t.tracer, "wallet."+op, t.label)
	return ctx, span{t: t, ctx: ctx, name: op, sp: sp, start: start}
}

// end records the outcome of err; business refusals are outcomes, not span
// errors.
func (s span) end(err error, replayed bool) {
	out := outcome(err, replayed)
	if s.name != "transfer_batch" { // a batch counts each of its transfers
		s.t.count(s.ctx, s.name, err, replayed)
	}
	s.t.duration.Record(s.ctx, time.Since(s.start).Seconds(), s.t.attrs(s.name, out))
	s.sp.SetAttributes(attribute.Bool(otelx.AttrReplayed, replayed))
	if refusal(err) {
		err = nil
	}
	otelx.End(s.sp, out, err)
}

// count adds one operation to the operations counter.
func (t *telemetry) count(ctx context.Context, op string, err error, replayed bool) {
	t.ops.Add(ctx, 1, t.attrs(op, outcome(err, replayed)))
}

func (t *telemetry) attrs(op, outcome string) metric.MeasurementOption {
	attrs := []attribute.KeyValue{attribute.String(otelx.AttrOperation, op),
		attribute.String(otelx.AttrOutcome, outcome)}
	if t.label != "" {
		attrs = append(attrs, attribute.String(otelx.AttrLabel, t.label))
	}
	return metric.WithAttributes(attrs...)
}

func (t *telemetry) unknownOutcome(ctx context.Context) {
	t.unknown.Add(ctx, 1)
}

// outcomes names the outcome of each error callers branch on, first match
// wins; refusals are business answers, not span errors.
var outcomes = []struct {
	err     error
	name    string
	refusal bool
}{
	// First: an unknown outcome may wrap the cause, even an ErrInvalid from
	// a later step of a transfer across groups, and is never a refusal.
	{ErrUnknownOutcome, "unknown", false},
	{ErrInsufficientFunds, "insufficient_funds", true},
	{ErrAccountNotFound, "account_not_found", true},
	{ErrCurrencyMismatch, "currency_mismatch", true},
	{ErrAccountClosed, "closed", true},
	{ErrConflict, "conflict", true},
	{ErrHoldNotFound, "hold_not_found", true},
	{ErrHoldExpired, "hold_expired", true},
	{ErrStaleFence, "stale_fence", true},
	{ErrTransferExpired, "transfer_expired", true},
	{ErrDestinationFull, "destination_full", true},
	{ErrInvalid, "invalid", false},
	{ErrSameAccount, "invalid", false},
	{ErrCrossGroup, "cross_group", false},
	{ErrReplicaAck, "replica_ack", false},
	{ErrMismatch, "mismatch", false},
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
		return "replayed"
	case err == nil:
		return "ok"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return "error"
}
