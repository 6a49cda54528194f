package lock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redkit-go/redkit/otelx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of this package's spans and
// metrics.
const ScopeName = "github.com/redkit-go/redkit/lock"

// WithTracerProvider sets the provider of the lock.acquire, lock.release and
// lock.renew spans (default: the global provider). Only on New; nil is
// ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetTracer(tp) })
}

// WithMeterProvider sets the provider of the lock metrics (default: the
// global provider). Only on New; nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetMeter(mp) })
}

// WithLabel sets a low-cardinality label recorded as redkit.label on spans
// and metrics (default none), for telling lock uses apart without putting
// lock names, owner IDs or tokens in telemetry, which this package never
// does. Only on New.
func WithLabel(label string) Option {
	return optionFunc(func(c *config) { c.label = label })
}

// Outcomes recorded as redkit.outcome, from the vocabulary every redkit
// module shares (otelx.Outcomes).
const (
	outcomeOK          = otelx.OutcomeOK
	outcomeNotAcquired = otelx.OutcomeNotAcquired
	outcomeExpired     = otelx.OutcomeExpired
	outcomeTaken       = otelx.OutcomeTaken
	outcomeRenewFailed = otelx.OutcomeRenewFailed
	outcomeUnknown     = otelx.OutcomeUnknownOutcome
	outcomeError       = otelx.OutcomeError
)

// The sentinels whose text error.type may carry (otelx.ErrorType).
func init() {
	otelx.RegisterSentinels(ErrRiskySettings, ErrInvalid, ErrStaleFence, ErrNotAcquired,
		ErrLeaseExpired, ErrLeaseTaken, ErrRenewFailed, ErrReleased, ErrReplicaAck,
		ErrUnknownOutcome, ErrClosed)
}

type telemetry struct {
	tracer     trace.Tracer
	label      string
	attrs      *otelx.Attrs            // label only
	outcomes   map[string]*otelx.Attrs // label and outcome, built once
	duration   metric.Float64Histogram
	wait       metric.Float64Histogram
	hold       metric.Float64Histogram
	lost       metric.Int64Counter
	contention metric.Int64Counter
}

func newTelemetry(cfg config) *telemetry {
	t := &telemetry{tracer: cfg.providers.TracerFor(ScopeName, Version), label: cfg.label}
	var attrs []attribute.KeyValue
	if cfg.label != "" {
		attrs = append(attrs, attribute.String(otelx.AttrLabel, cfg.label))
	}
	t.attrs = otelx.NewAttrs(attrs...)
	t.outcomes = make(map[string]*otelx.Attrs)
	for _, o := range []string{outcomeOK, outcomeNotAcquired, outcomeExpired, outcomeTaken, outcomeRenewFailed, outcomeUnknown, outcomeError} {
		t.outcomes[o] = otelx.NewAttrs(append([]attribute.KeyValue{attribute.String(otelx.AttrOutcome, o)}, attrs...)...)
	}
	m := cfg.providers.MeterFor(ScopeName, Version)
	// Instrument creation only fails on invalid names; the no-op instruments
	// returned alongside the error keep working.
	t.duration, _ = otelx.DurationHistogram(m, "redkit.lock.operation.duration",
		"Duration of lock operations (acquire, release, renew), by operation and outcome.")
	t.wait, _ = otelx.DurationHistogram(m, "redkit.lock.wait.duration",
		"Time from the start of an acquire to its end, by outcome.")
	t.hold, _ = otelx.DurationHistogram(m, "redkit.lock.hold.duration",
		"Time a lease was held, from its acquire to its release or loss.")
	t.lost, _ = m.Int64Counter("redkit.lock.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases lost before their release, by reason."))
	t.contention, _ = m.Int64Counter("redkit.lock.contention", metric.WithUnit("{attempt}"),
		metric.WithDescription("Acquire attempts that found the lock held by another owner."))
	return t
}

// start starts the span of one operation ("lock.acquire", "lock.release",
// "lock.renew"); ending it records redkit.lock.operation.duration with the
// operation named after the span.
func (t *telemetry) start(ctx context.Context, span string) (context.Context, trace.Span) {
	return otelx.StartTimed(ctx, t.tracer, span, t.label, t.duration, strings.TrimPrefix(span, "lock."))
}

// startRenewal starts the span of one watchdog round: background work, a
// root of its own, linked to the acquire span of each lease it renews.
func (t *telemetry) startRenewal(ctx context.Context, causes []trace.SpanContext) (context.Context, trace.Span) {
	return otelx.StartBackgroundTimed(ctx, t.tracer, "lock.renew", t.label, t.duration, "renew", causes...)
}

// startRenew starts the span of one lease's renewal: a child of the span
// in ctx when there is one (an Extend inside the caller's trace),
// otherwise background work (the watchdog's renewal of a Redlock lease,
// which is not batched), a root linked to the lease's acquire.
func (t *telemetry) startRenew(ctx context.Context, acquire trace.SpanContext) (context.Context, trace.Span) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return t.start(ctx, "lock.renew")
	}
	return t.startRenewal(ctx, []trace.SpanContext{acquire})
}

// startWithdraw starts the span of one attempt to release, in the
// background, what an owner may have left (a Release or an acquire that
// gave up with its outcome unknown): a lock.release root linked to the span
// in ctx, the call that gave the work up. It records no duration: that
// call's own span did.
func (t *telemetry) startWithdraw(ctx context.Context) (context.Context, trace.Span) {
	return otelx.StartBackground(ctx, t.tracer, "lock.release", t.label, trace.SpanContextFromContext(ctx))
}

// startRaise starts the span of one raise of a Redlock master's fence
// counter left to the background by an acquire that has returned: a
// lock.raise root linked to the span in ctx, that acquire's. Like
// startWithdraw, it records no duration; withdrawn ends it.
func (t *telemetry) startRaise(ctx context.Context) (context.Context, trace.Span) {
	return otelx.StartBackground(ctx, t.tracer, "lock.raise", t.label, trace.SpanContextFromContext(ctx))
}

// withdrawn ends the span of startWithdraw or startRaise: ok when Redis
// answered.
func withdrawn(span trace.Span, err error) {
	outcome := outcomeOK
	if err != nil {
		outcome = outcomeError
	}
	otelx.End(span, outcome, err)
}

func (t *telemetry) withOutcome(outcome string) *otelx.Attrs {
	if a, ok := t.outcomes[outcome]; ok {
		return a
	}
	kv := []attribute.KeyValue{attribute.String(otelx.AttrOutcome, outcome)}
	if t.label != "" {
		kv = append(kv, attribute.String(otelx.AttrLabel, t.label))
	}
	return otelx.NewAttrs(kv...)
}

// acquired records the end of an acquire that began at start.
func (t *telemetry) acquired(ctx context.Context, span trace.Span, start time.Time, err error) {
	outcome := acquireOutcome(err)
	t.wait.Record(ctx, time.Since(start).Seconds(), t.withOutcome(outcome).Record...)
	if outcome == outcomeNotAcquired {
		err = nil // a lost race is an outcome, not a failure
	}
	otelx.End(span, outcome, err)
}

func acquireOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, ErrUnknownOutcome):
		return outcomeUnknown
	case errors.Is(err, ErrNotAcquired):
		return outcomeNotAcquired
	default:
		return outcomeError
	}
}

// ended records a lease's end: its hold time and, unless it was released
// or its Client closed, the loss.
func (t *telemetry) ended(acquired time.Time, cause error) {
	ctx := context.Background()
	t.hold.Record(ctx, time.Since(acquired).Seconds(), t.attrs.Record...)
	if r := lossReason(cause); r != "" {
		t.lost.Add(ctx, 1, t.withOutcome(r).Add...)
	}
}

func lossReason(cause error) string {
	switch {
	case errors.Is(cause, ErrRenewFailed):
		return outcomeRenewFailed
	case errors.Is(cause, ErrLeaseTaken):
		return outcomeTaken
	case errors.Is(cause, ErrLeaseExpired):
		return outcomeExpired
	default:
		return ""
	}
}

func releaseOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, ErrLeaseExpired):
		return outcomeExpired
	case errors.Is(err, ErrLeaseTaken):
		return outcomeTaken
	case errors.Is(err, ErrUnknownOutcome):
		return outcomeUnknown
	default:
		return outcomeError
	}
}

// renewOutcome names the result of one extend: its error (unknown_outcome
// when it wraps ErrUnknownOutcome, as a Redlock renewal whose masters'
// answers were lost does), or the extend script's status (1 extended, 0
// expired, 2 taken).
func renewOutcome(status int64, err error) string {
	switch {
	case errors.Is(err, ErrUnknownOutcome):
		return outcomeUnknown
	case err != nil:
		return outcomeError
	case status == 1:
		return outcomeOK
	case status == 2:
		return outcomeTaken
	default:
		return outcomeExpired
	}
}

// roundOutcome names the result of one watchdog round from the outcomes of
// its leases: error when the round failed, otherwise taken when some lease
// was found held by another owner, expired when some lease had expired,
// and ok when every lease was renewed.
func roundOutcome(outcomes []string) string {
	round := outcomeOK
	for _, o := range outcomes {
		switch {
		case o == outcomeError:
			return o
		case o == outcomeTaken, o == outcomeExpired && round == outcomeOK:
			round = o
		}
	}
	return round
}
