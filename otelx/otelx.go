package otelx

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/redis/go-redis/v9"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is this package's instrumentation scope. Each redkit module
// has its own ScopeName constant, its import path, and passes it to
// Providers.TracerFor and Providers.MeterFor.
const ScopeName = "github.com/redkit-go/redkit/otelx"

// Attribute keys redkit puts on its spans and metrics.
const (
	// AttrOutcome is the result of an operation in a few words:
	// "ok", "sold_out", "insufficient_funds", "conflict", "replayed", ...
	AttrOutcome = "redkit.outcome"
	// AttrLabel is the caller-given label (a module's WithLabel option),
	// used instead of names, keys or IDs, which never appear in attributes.
	AttrLabel = "redkit.label"
	// AttrReplayed is true when an earlier call had already applied the
	// operation and its first result was returned.
	AttrReplayed = "redkit.replayed"
	// AttrErrorType is the OpenTelemetry semantic-convention key End sets
	// on a failed span; its value comes from ErrorType.
	AttrErrorType = "error.type"
)

// Providers holds the telemetry providers a module was configured with.
// A nil field means the global provider (otel.GetTracerProvider or
// otel.GetMeterProvider), looked up when TracerFor or MeterFor is called,
// so a program that installs its SDK before creating redkit values needs
// no options at all. The zero value is ready to use.
type Providers struct {
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
}

// SetTracer sets p.Tracer to tp; a nil tp changes nothing, so an option
// given nil keeps the provider set before it (or the global one).
func (p *Providers) SetTracer(tp trace.TracerProvider) {
	if tp != nil {
		p.Tracer = tp
	}
}

// SetMeter sets p.Meter to mp; a nil mp changes nothing, as SetTracer.
func (p *Providers) SetMeter(mp metric.MeterProvider) {
	if mp != nil {
		p.Meter = mp
	}
}

// TracerFor returns the tracer for an instrumentation scope, normally the
// module's import path (its ScopeName constant), at the module's version
// (its Version constant) and with SchemaURL, so a backend can tell which
// release produced a span.
func (p Providers) TracerFor(scope, version string) trace.Tracer {
	return p.tracerProvider().Tracer(scope,
		trace.WithInstrumentationVersion(version), trace.WithSchemaURL(SchemaURL))
}

// MeterFor returns the meter for an instrumentation scope, normally the
// module's import path (its ScopeName constant), at the module's version
// (its Version constant) and with SchemaURL.
func (p Providers) MeterFor(scope, version string) metric.Meter {
	return p.meterProvider().Meter(scope,
		metric.WithInstrumentationVersion(version), metric.WithSchemaURL(SchemaURL))
}

func (p Providers) tracerProvider() trace.TracerProvider {
	if p.Tracer != nil {
		return p.Tracer
	}
	return otel.GetTracerProvider()
}

func (p Providers) meterProvider() metric.MeterProvider {
	if p.Meter != nil {
		return p.Meter
	}
	return otel.GetMeterProvider()
}

// Start starts an internal span named spanName (e.g. "stock.deduct") as a
// child of any span in ctx. A non-empty label is recorded as AttrLabel.
// A nil tracer means the global provider's tracer for this package.
// Finish the span with End.
func Start(ctx context.Context, t trace.Tracer, spanName, label string) (context.Context, trace.Span) {
	return start(ctx, t, spanName, label)
}

// maxLinks bounds the links of one background span (the SDK keeps 128 by
// default).
const maxLinks = 128

// StartBackground starts the span of background work (a watchdog's round
// of renewals, a range prefetch, a reclaimer's round): a root span of a
// trace of its own, since the work outlives the calls that caused it and
// would otherwise pile up in one endless trace or hang under a trace that
// ended long ago, linked to each valid span context in causes (the spans
// of those calls; duplicates once, at most 128). Any span in ctx is
// ignored. Finish it with End.
func StartBackground(ctx context.Context, t trace.Tracer, spanName, label string, causes ...trace.SpanContext) (context.Context, trace.Span) {
	return start(ctx, t, spanName, label, background(causes)...)
}

// StartBackgroundTimed is StartBackground for background work whose
// duration is also recorded in d, as StartTimed does.
func StartBackgroundTimed(ctx context.Context, t trace.Tracer, spanName, label string, d metric.Float64Histogram, op string, causes ...trace.SpanContext) (context.Context, trace.Span) {
	return startTimed(ctx, t, spanName, label, d, op, background(causes))
}

func background(causes []trace.SpanContext) []trace.SpanStartOption {
	opts := []trace.SpanStartOption{trace.WithNewRoot()}
	var links []trace.Link
	seen := make(map[trace.SpanID]bool, len(causes))
	for _, c := range causes {
		if !c.IsValid() || seen[c.SpanID()] || len(links) == maxLinks {
			continue
		}
		seen[c.SpanID()] = true
		links = append(links, trace.Link{SpanContext: c})
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	return opts
}

func start(ctx context.Context, t trace.Tracer, spanName, label string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		t = otel.GetTracerProvider().Tracer(ScopeName,
			trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(SchemaURL))
	}
	if len(opts) == 0 && label == "" {
		return t.Start(ctx, spanName, internalKind...)
	}
	opts = append(opts, internalKind[0])
	if label != "" {
		opts = append(opts, trace.WithAttributes(attribute.String(AttrLabel, label)))
	}
	return t.Start(ctx, spanName, opts...)
}

// internalKind is the start option of every redkit span, made once: the
// option is a value the tracer only reads.
var internalKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// End records the outcome and ends the span.
//
// A non-empty outcome is set as AttrOutcome. A non-nil err marks the span
// as failed: status Error and AttrErrorType set to ErrorType(err). The
// error's message is not recorded, because wrapped messages carry names
// and IDs. Business refusals (sold out, insufficient funds, a lost race)
// are outcomes, not errors: callers pass them with err == nil.
func End(span trace.Span, outcome string, err error) {
	ts, timed := span.(*timedSpan)
	if !span.IsRecording() {
		// Nothing records the span's attributes or status: only the
		// duration histogram (if any) needs the outcome.
		if timed && outcome != "" {
			ts.outcome = outcome
		}
		span.End()
		return
	}
	if outcome != "" {
		span.SetAttributes(attribute.String(AttrOutcome, outcome))
	}
	if err != nil {
		typ := ErrorType(err)
		span.SetAttributes(attribute.String(AttrErrorType, typ))
		span.SetStatus(codes.Error, typ)
	}
	span.End()
}

// maxErrorText bounds the sentinel text ErrorType returns; longer texts
// are reported by their Go type instead.
const maxErrorText = 80

// sentinels holds the errors whose text ErrorType may report: the
// registered sentinels of redkit's modules and go-redis's own.
var sentinels sync.Map // error -> struct{}

func init() {
	RegisterSentinels(redis.ErrClosed, redis.ErrPoolTimeout, redis.ErrPoolExhausted)
}

// RegisterSentinels lets ErrorType report the text of each of errs (made
// by errors.New, at most 80 bytes, and free of names, keys and IDs) instead
// of its Go type. Each redkit module registers its exported sentinel errors
// when its package is initialised. A nil error, or one that cannot be
// compared, is ignored.
func RegisterSentinels(errs ...error) {
	for _, e := range errs {
		if e != nil && hashable(e) {
			sentinels.Store(e, struct{}{})
		}
	}
}

func registered(err error) bool {
	if !hashable(err) {
		return false
	}
	_, ok := sentinels.Load(err)
	return ok
}

// hashable reports whether err can be a map key. Its type is not enough:
// a struct error type with an interface field is comparable, yet hashing a
// value whose field holds a slice panics.
func hashable(err error) bool {
	return reflect.ValueOf(err).Comparable()
}

// ErrorType returns a short, low-cardinality description of err for the
// error.type attribute ("" for nil):
//
//   - "context.Canceled" or "context.DeadlineExceeded" when the innermost
//     error is one;
//   - for a Redis error reply, "redis " followed by its error code
//     ("redis NOSCRIPT", "redis ERR"; "redis nil" for redis.Nil);
//   - the text of the innermost error when it is a registered sentinel
//     (RegisterSentinels: "stock: sold out"); for errors joined with
//     errors.Join the first branch is followed;
//   - otherwise the Go type of the innermost error ("*net.OpError",
//     "*errors.errorString").
//
// The text of an error that was not registered is never returned, however
// short: an error built with fmt.Errorf without %w is an *errors.errorString
// whose text may hold a name or an ID.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	leaf := innermost(err)
	switch leaf {
	case context.Canceled:
		return "context.Canceled"
	case context.DeadlineExceeded:
		return "context.DeadlineExceeded"
	}
	if code, ok := redisErrorCode(leaf); ok {
		return "redis " + code
	}
	if registered(leaf) {
		if msg := leaf.Error(); msg != "" && len(msg) <= maxErrorText {
			return msg
		}
	}
	return fmt.Sprintf("%T", leaf)
}

// innermost follows Unwrap (the first branch of a multi-error) to the
// error that wraps nothing.
func innermost(err error) error {
	for range 64 { // bounded: a cyclic Unwrap chain must not hang End
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next := e.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := e.Unwrap()
			if len(errs) == 0 || errs[0] == nil {
				return err
			}
			err = errs[0]
		default:
			return err
		}
	}
	return err
}
