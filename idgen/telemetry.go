package idgen

import (
	"context"
	"reflect"
	"strings"
	"sync"
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

// AttrSegment is the attribute naming a Segment in redkit.idgen.runway:
// the label given with WithSegmentLabel.
const AttrSegment = "redkit.idgen.segment"

// Outcomes of a clock found behind a node's high-water mark.
const (
	outcomeWaited = otelx.OutcomeWaited
	outcomeFailed = otelx.OutcomeFailed
)

func outcomeOf(err error) string {
	if err != nil {
		return otelx.OutcomeError
	}
	return otelx.OutcomeOK
}

// The sentinels whose text error.type may carry (otelx.ErrorType).
func init() {
	otelx.RegisterSentinels(ErrRiskySettings, ErrInvalid, ErrUnavailable, ErrReplicaAck,
		ErrLeaseLost, ErrClockBehind, ErrNoFreeNode, ErrExhausted, ErrClosed, ErrSyntax)
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
	board    *runwayBoard
	seg      *Segment
}

func labelAttrs(label string) []attribute.KeyValue {
	if label == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String(otelx.AttrLabel, label)}
}

func newSegTelemetry(cfg *config, s *Segment) (*segTelemetry, error) {
	scope, m := newTelScope(cfg)
	t := &segTelemetry{telScope: scope, seg: s}
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
	attrs := labelAttrs(cfg.label)
	if cfg.segmentLabel != "" {
		attrs = append(attrs, attribute.String(AttrSegment, cfg.segmentLabel))
	}
	if t.board, err = joinRunways(m, s, attribute.NewSet(attrs...)); err != nil {
		return nil, err
	}
	return t, nil
}

// A runwayBoard reports redkit.idgen.runway for the live Segments of one
// meter, with one callback: for each attribute set, the lowest runway of
// the Segments that share it. With a callback per Segment, Segments with
// the same attributes (the same label, or none) would each observe the
// same series and the last one would win, hiding a Segment running dry.
type runwayBoard struct {
	gauge metric.Int64ObservableGauge
	reg   metric.Registration
	mu    sync.Mutex
	segs  map[*Segment]attribute.Set
}

var (
	boardsMu sync.Mutex
	boards   = map[metric.Meter]*runwayBoard{} // meters whose values can be map keys
)

// joinRunways adds s, with the attribute set attrs, to the runway board of
// m, creating the board on the first Segment.
func joinRunways(m metric.Meter, s *Segment, attrs attribute.Set) (*runwayBoard, error) {
	// The value, not only its type: a comparable struct whose interface
	// field holds a slice panics as a map key.
	shared := reflect.ValueOf(m).Comparable()
	boardsMu.Lock()
	defer boardsMu.Unlock()
	var b *runwayBoard
	if shared {
		b = boards[m] // looked up only when m can be a key: else it panics
	}
	if !shared || b == nil {
		b = &runwayBoard{segs: map[*Segment]attribute.Set{}}
		var err error
		if b.gauge, err = m.Int64ObservableGauge(metricRunway, metric.WithUnit("{id}"),
			metric.WithDescription("Values a Segment can hand out without Redis; the lowest of the Segments sharing the attributes")); err != nil {
			return nil, err
		}
		if b.reg, err = m.RegisterCallback(b.observe, b.gauge); err != nil {
			return nil, err
		}
		if shared {
			boards[m] = b
		}
	}
	b.mu.Lock()
	b.segs[s] = attrs
	b.mu.Unlock()
	return b, nil
}

// leave removes s from the board, and the board's callback with its last
// Segment.
func (b *runwayBoard) leave(s *Segment) {
	boardsMu.Lock()
	defer boardsMu.Unlock()
	b.mu.Lock()
	delete(b.segs, s)
	empty := len(b.segs) == 0
	b.mu.Unlock()
	if !empty {
		return
	}
	for m, mb := range boards {
		if mb == b {
			delete(boards, m)
		}
	}
	_ = b.reg.Unregister()
}

func (b *runwayBoard) observe(_ context.Context, o metric.Observer) error {
	type low struct {
		attrs  attribute.Set
		runway int64
	}
	b.mu.Lock()
	lows := make(map[attribute.Distinct]low, len(b.segs))
	for s, attrs := range b.segs {
		r := s.Runway()
		if l, ok := lows[attrs.Equivalent()]; !ok || r < l.runway {
			lows[attrs.Equivalent()] = low{attrs, r}
		}
	}
	b.mu.Unlock()
	for _, l := range lows {
		o.ObserveInt64(b.gauge, l.runway, metric.WithAttributeSet(l.attrs))
	}
	return nil
}

// startFetch starts the span of one range fetch, which runs in the
// background: a root span of its own (it outlives the call that caused
// it), linked to the span of the Next that asked for it, if any.
func (t *segTelemetry) startFetch(ctx context.Context, cause trace.SpanContext) (context.Context, trace.Span) {
	return otelx.StartBackground(ctx, t.tracer, "idgen.fetch", t.label, cause)
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

func (t *segTelemetry) close() { t.board.leave(t.seg) }

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
// ".renew", ".release"); ending it records its duration. It is a child of
// the span in ctx when there is one (NewLeasedSnowflake's acquire in the
// caller's trace); otherwise the operation is background work (a renewal,
// a re-lease after a loss, the release at Close), a root span linked to
// cause, the span of the acquire that leased the node.
func (t *leaseTelemetry) start(ctx context.Context, name string, cause trace.SpanContext) (context.Context, trace.Span) {
	op := strings.TrimPrefix(name, "idgen.lease.")
	if trace.SpanContextFromContext(ctx).IsValid() {
		return otelx.StartTimed(ctx, t.tracer, name, t.label, t.duration, op)
	}
	return otelx.StartBackgroundTimed(ctx, t.tracer, name, t.label, t.duration, op, cause)
}

// end ends a lease span and counts the operation (acquire, renew or
// release) by outcome: ok, error, or lost (renewal found another owner).
func (t *leaseTelemetry) end(ctx context.Context, span trace.Span, op string, lost bool, err error) {
	outcome := outcomeOf(err)
	if lost {
		outcome = otelx.OutcomeLost
	}
	otelx.End(span, outcome, err)
	t.ops.Add(ctx, 1, otelx.OpAttrs(op, outcome, t.label).Add...)
}

func (t *leaseTelemetry) renewFailed(ctx context.Context) { t.renewFails.Add(ctx, 1, t.attrs) }

func (t *leaseTelemetry) clockBehind(ctx context.Context, outcome string) {
	attrs := append(labelAttrs(t.label), attribute.String(otelx.AttrOutcome, outcome))
	t.behind.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (t *leaseTelemetry) close() {}
