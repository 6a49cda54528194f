package stock

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/otelx"
)

// ScopeName is the instrumentation scope of this package's spans and
// metrics.
const ScopeName = "github.com/redkit-go/redkit/stock"

// WithTracerProvider sets the provider of the stock.* spans (default: the
// global provider). nil is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetTracer(tp) })
}

// WithMeterProvider sets the provider of the redkit.stock.* metrics
// (default: the global provider). nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetMeter(mp) })
}

// WithLabel sets a low-cardinality label recorded as redkit.label on spans
// and metrics (default none), for telling inventories apart. SKUs, order
// IDs, buyers and quantities never appear in telemetry.
func WithLabel(label string) Option { return optionFunc(func(c *config) { c.label = label }) }

// telemetry holds the instruments of one Inventory; doc.go's Telemetry
// section lists them.
type telemetry struct {
	tracer    trace.Tracer
	label     string
	ops       metric.Int64Counter
	duration  metric.Float64Histogram
	lag       metric.Float64Histogram
	reclaimed metric.Int64Counter
	sold      metric.Int64Counter
	overrun   metric.Int64Counter
}

func newTelemetry(c config) *telemetry {
	t := &telemetry{tracer: c.providers.TracerFor(ScopeName, Version), label: c.label}
	m := c.providers.MeterFor(ScopeName, Version)
	// Instrument creation fails only on invalid names; the returned no-op
	// instruments keep working.
	t.ops, _ = m.Int64Counter("redkit.stock.operations", metric.WithUnit("{operation}"),
		metric.WithDescription("Stock operations by operation and outcome."))
	t.duration, _ = otelx.DurationHistogram(m, "redkit.stock.operation.duration",
		"Duration of Inventory operations, by operation and outcome.")
	t.lag, _ = otelx.DurationHistogram(m, "redkit.stock.reclaim.lag",
		"How long past its deadline the oldest expired hold of a reclaimer batch was.")
	t.sold, _ = m.Int64Counter("redkit.stock.units.sold", metric.WithUnit("{unit}"),
		metric.WithDescription("Units sold by Deduct and Confirm (first applications only; refunds not subtracted), by operation."))
	t.overrun, _ = m.Int64Counter("redkit.stock.journal.overrun", metric.WithUnit("{group}"),
		metric.WithDescription("Consumer groups that lost journal entries they had not acknowledged to Trim, because the entries were older than the holdback (WithJournalHoldback)."))
	t.reclaimed, _ = m.Int64Counter("redkit.stock.reclaim.holds", metric.WithUnit("{hold}"),
		metric.WithDescription("Expired holds returned to available by the reclaimer."))
	return t
}

// observe runs one operation inside a span and counts its outcome.
func (t *telemetry) observe(ctx context.Context, op string, fn func(ctx context.Context) (Result, error)) (Result, error) {
	start := time.Now()
	ctx, span := otelx.Start(ctx, t.tracer, "stock."+op, t.label)
	res, err := fn(ctx)
	outcome, failure := outcomeOf(res, err)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool(otelx.AttrReplayed, res.Replayed))
	}
	otelx.End(span, outcome, failure)
	t.count(ctx, op, outcome)
	t.duration.Record(ctx, time.Since(start).Seconds(), t.attrs(op, outcome).Record...)
	return res, err
}

// begin starts the span of an operation that returns no Result (reads,
// audits, journal work); the returned func ends it and records its
// duration, and takes the operation's error.
func (t *telemetry) begin(ctx context.Context, op string) (context.Context, func(error)) {
	start := time.Now()
	ctx, span := otelx.Start(ctx, t.tracer, "stock."+op, t.label)
	return ctx, func(err error) {
		outcome, failure := outcomeOf(Result{}, err)
		otelx.End(span, outcome, failure)
		t.duration.Record(ctx, time.Since(start).Seconds(), t.attrs(op, outcome).Record...)
	}
}

func (t *telemetry) attrs(op, outcome string) *otelx.Attrs {
	return otelx.OpAttrs(op, outcome, t.label)
}

func (t *telemetry) count(ctx context.Context, op, outcome string) {
	t.ops.Add(ctx, 1, t.attrs(op, outcome).Add...)
}

// reclaimRound starts the span of one round of the background reclaimer:
// background work, one stock.reclaim_batch root span per round, with a
// stock.reclaim span under it per call, instead of a root per SKU and
// call, linked to the span of the call that started the reclaimer.
func (t *telemetry) reclaimRound(ctx context.Context, cause trace.SpanContext) (context.Context, func()) {
	ctx, span := otelx.StartBackground(ctx, t.tracer, "stock.reclaim_batch", t.label, cause)
	return ctx, func() { otelx.End(span, "", nil) }
}

// consumeBatch starts the span of one batch of journal entries that
// Consume hands to its handler: a stock.consume_batch root span per batch
// (Consume runs for as long as its caller lets it, so its batches do not
// pile up in one endless trace), linked to the span of Consume's caller,
// with the handler's spans and the acknowledgement under it.
func (t *telemetry) consumeBatch(ctx context.Context) (context.Context, func(error)) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot()}
	if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
	}
	if t.label != "" {
		opts = append(opts, trace.WithAttributes(attribute.String(otelx.AttrLabel, t.label)))
	}
	ctx, span := t.tracer.Start(ctx, "stock.consume_batch", opts...)
	return ctx, func(err error) {
		outcome := otelx.OutcomeOK
		if err != nil {
			outcome = otelx.OutcomeError
		}
		otelx.End(span, outcome, err)
	}
}

// unitsSold counts the units of items as sold by op when the call applied
// the operation (a replay sold nothing new).
func (t *telemetry) unitsSold(ctx context.Context, op string, items []Item, res Result, err error) {
	if err != nil || res.Replayed {
		return
	}
	var n int64
	for _, it := range items {
		n += it.Qty
	}
	if n > 0 {
		t.sold.Add(ctx, n, t.attrs(op, otelx.OutcomeOK).Add...)
	}
}

func (t *telemetry) reclaimedBatch(ctx context.Context, res ReclaimResult) {
	if res.Reclaimed == 0 {
		return
	}
	var opt metric.MeasurementOption = metric.WithAttributes()
	if t.label != "" {
		opt = metric.WithAttributes(attribute.String(otelx.AttrLabel, t.label))
	}
	t.reclaimed.Add(ctx, int64(res.Reclaimed), opt)
	t.lag.Record(ctx, res.Lag.Seconds(), opt)
}

// The sentinels whose text error.type may carry (otelx.ErrorType).
func init() {
	otelx.RegisterSentinels(ErrRiskySettings, ErrSoldOut, ErrBuyerLimit, ErrConflict, ErrSKUClosed,
		ErrSKUNotFound, ErrOrderNotFound, ErrHoldExpired, ErrCancelled, ErrCrossGroup, ErrInvalid,
		ErrUnknownOutcome, ErrStaleFence, ErrMismatch, ErrReplicaAck, errContended)
}

// outcomes, in the order they are tested: business refusals are outcomes,
// not span errors. The words are those every redkit module uses
// (otelx.Outcomes).
var outcomes = []struct {
	err     error
	outcome string
}{
	{ErrSoldOut, otelx.OutcomeSoldOut},
	{ErrBuyerLimit, otelx.OutcomeBuyerLimit},
	{ErrSKUClosed, otelx.OutcomeClosed},
	{ErrSKUNotFound, otelx.OutcomeSKUNotFound},
	{ErrOrderNotFound, otelx.OutcomeOrderNotFound},
	{ErrConflict, otelx.OutcomeConflict},
	{ErrCancelled, otelx.OutcomeCancelled},
	{ErrHoldExpired, otelx.OutcomeHoldExpired},
	{ErrStaleFence, otelx.OutcomeStaleFence},
	{ErrCrossGroup, otelx.OutcomeCrossGroup},
	{ErrInvalid, otelx.OutcomeInvalid},
}

// outcomeOf returns the outcome attribute of a call and the error to mark
// the span with (nil for refusals and replays).
func outcomeOf(res Result, err error) (string, error) {
	switch {
	case errors.Is(err, ErrReplicaAck):
		return otelx.OutcomeReplicaAckMissing, err
	case errors.Is(err, ErrUnknownOutcome):
		return otelx.OutcomeUnknownOutcome, err
	case errors.Is(err, ErrMismatch):
		return otelx.OutcomeMismatch, err
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.outcome, nil
		}
	}
	switch {
	case err != nil:
		return otelx.OutcomeError, err
	case res.Replayed:
		return otelx.OutcomeReplayed, nil
	}
	return otelx.OutcomeOK, nil
}
