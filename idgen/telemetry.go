package idgen

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/otelx"
)

// ScopeName is the instrumentation scope of this package's spans and metrics.
const ScopeName = "github.com/redkit-go/redkit/idgen"

// Metric names. Nothing is recorded per ID: counters move once per range
// fetch, lease operation or clock event.
const (
	metricFetches       = "redkit.idgen.range.fetches"
	metricFetchDuration = "redkit.idgen.range.fetch.duration"
	metricRangeSize     = "redkit.idgen.range.size"
	metricRunway        = "redkit.idgen.runway"
	metricLeaseOps      = "redkit.idgen.lease.operations"
	metricLeaseDuration = "redkit.idgen.lease.operation.duration"
	metricRenewFailures = "redkit.idgen.lease.renew_failures"
	metricClockBehind   = "redkit.idgen.clock_behind"
)

func outcomeOf(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// telScope is what the Segment's and the lease's telemetry share: the
// package's tracer, the label and the label as metric attributes.
type telScope struct {
	tracer trace.Tracer
	label  string
	attrs  metric.MeasurementOption
}

// newTelScope returns the telScope of cfg and the package's meter.
func newTelScope(cfg *config) (telScope, metric.Meter) {
	return telScope{
		tracer: cfg.providers.TracerFor(ScopeName, Version),
		label:  cfg.label,
		attrs:  metric.WithAttributes(labelAttrs(cfg.label)...),
	}, cfg.providers.MeterFor(ScopeName, Version)
}

type segTelemetry struct {
	telScope
	fetches  metric.Int64Counter
	duration metric.Float64Histogram
	size     metric.Int64Gauge
	reg      metric.Registration
}

func labelAttrs(label string) []attribute.KeyValue {
	if label == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String(otelx.AttrLabel, label)}
}

func newSegTelemetry(cfg *config, s *Segment) (*segTelemetry, error) {
	scope, m := newTelScope(cfg)
	t := &segTelemetry{telScope: scope}
	var err error
	if t.fetches, err = m.Int64Counter(metricFetches, metric.WithUnit("{fetch}"),
		metric.WithDescription("Segment range fetches, by outcome")); err != nil {
		return nil, err
	}
	if t.duration, err = otelx.DurationHistogram(m, metricFetchDuration,
		"Duration of Segment range fetches"); err != nil {
		return nil, err
	}
	if t.size, err = m.Int64Gauge(metricRangeSize, metric.WithUnit("{id}"),
		metric.WithDescription("Size of the last Segment range fetched")); err != nil {
		return nil, err
	}
	runway, err := m.Int64ObservableGauge(metricRunway, metric.WithUnit("{id}"),
		metric.WithDescription("Values a Segment can hand out without Redis"))
	if err != nil {
		return nil, err
	}
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(runway, s.Runway(), t.attrs)
		return nil
	}, runway)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// startFetch starts the span of one range fetch, which runs in the
// background: a root span of its own (it outlives the call that caused
// it), linked to the span of the Next that asked for it, if any.
func (t *segTelemetry) startFetch(ctx context.Context, cause trace.SpanContext) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot()}
	if cause.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cause}))
	}
	if t.label != "" {
		opts = append(opts, trace.WithAttributes(attribute.String(otelx.AttrLabel, t.label)))
	}
	return t.tracer.Start(ctx, "idgen.fetch", opts...)
}

func (t *segTelemetry) endFetch(ctx context.Context, span trace.Span, start time.Time, step int64, err error) {
	otelx.End(span, outcomeOf(err), err)
	attrs := append(labelAttrs(t.label), attribute.String(otelx.AttrOutcome, outcomeOf(err)))
	t.fetches.Add(ctx, 1, metric.WithAttributes(attrs...))
	t.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	if err == nil {
		t.size.Record(ctx, step, t.attrs)
	}
}

func (t *segTelemetry) close() {
	if t.reg != nil {
		_ = t.reg.Unregister()
	}
}

type leaseTelemetry struct {
	telScope
	ops        metric.Int64Counter
	duration   metric.Float64Histogram
	renewFails metric.Int64Counter
	behind     metric.Int64Counter
}

func newLeaseTelemetry(cfg *config) (*leaseTelemetry, error) {
	scope, m := newTelScope(cfg)
	t := &leaseTelemetry{telScope: scope}
	var err error
	if t.ops, err = m.Int64Counter(metricLeaseOps, metric.WithUnit("{operation}"),
		metric.WithDescription("Node lease acquisitions, renewals and releases, by outcome")); err != nil {
		return nil, err
	}
	if t.duration, err = otelx.DurationHistogram(m, metricLeaseDuration,
		"Duration of node lease acquisitions, renewals and releases, by operation and outcome"); err != nil {
		return nil, err
	}
	if t.renewFails, err = m.Int64Counter(metricRenewFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("Node lease renewals that failed or found the lease lost")); err != nil {
		return nil, err
	}
	if t.behind, err = m.Int64Counter(metricClockBehind, metric.WithUnit("{event}"),
		metric.WithDescription("Times the clock was behind a node's high-water mark (waited or failed)")); err != nil {
		return nil, err
	}
	return t, nil
}

// start starts the span of one lease operation ("idgen.lease.acquire",
// ".renew", ".release"); ending it records its duration.
func (t *leaseTelemetry) start(ctx context.Context, name string) (context.Context, trace.Span) {
	return otelx.StartTimed(ctx, t.tracer, name, t.label, t.duration, strings.TrimPrefix(name, "idgen.lease."))
}

// end ends a lease span and counts the operation (acquire, renew or
// release) by outcome: ok, error, or lost (renewal found another owner).
func (t *leaseTelemetry) end(ctx context.Context, span trace.Span, op string, lost bool, err error) {
	outcome := outcomeOf(err)
	if lost {
		outcome = "lost"
	}
	otelx.End(span, outcome, err)
	attrs := append(labelAttrs(t.label), attribute.String("redkit.idgen.operation", op),
		attribute.String(otelx.AttrOutcome, outcome))
	t.ops.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (t *leaseTelemetry) renewFailed(ctx context.Context) { t.renewFails.Add(ctx, 1, t.attrs) }

func (t *leaseTelemetry) clockBehind(ctx context.Context, outcome string) {
	attrs := append(labelAttrs(t.label), attribute.String(otelx.AttrOutcome, outcome))
	t.behind.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (t *leaseTelemetry) close() {}
