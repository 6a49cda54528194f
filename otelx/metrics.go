package otelx

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// SchemaURL is the OpenTelemetry schema of the attribute names redkit
// uses (error.type and the db.client.operation.duration model of its
// duration histograms). Every redkit tracer and meter carries it.
const SchemaURL = semconv.SchemaURL

// AttrOperation is the metric attribute naming a module's public operation
// ("deduct", "transfer", "acquire"), the counterpart of the semantic
// conventions' db.operation.name.
const AttrOperation = "redkit.operation"

// DurationBuckets are the explicit bucket boundaries, in seconds, that
// every redkit duration histogram gives as advice: from 50 µs to 10 s,
// with neighbouring boundaries at most 1.5 apart below 5 ms so that the
// p50 and p99 of a round trip to a local Redis (tens to hundreds of
// microseconds) fall in different buckets and histogram_quantile's linear
// interpolation stays within a factor of 1.5 of the true quantile. The
// SDK's default boundaries (0, 5, 10, 25, … 10000) were made for
// milliseconds; read as seconds they put every Redis call in (0, 5].
//
// They are advice (metric.WithExplicitBucketBoundaries): a View that the
// program installs still overrides them.
var DurationBuckets = []float64{
	0.00005, 0.000075, 0.0001, 0.00015, 0.0002, 0.0003, 0.0004, 0.0005, 0.00075,
	0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075,
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// DurationHistogram returns a histogram of durations in seconds with
// DurationBuckets as bucket advice. An invalid name returns the no-op
// histogram the meter hands back together with the error; redkit's names
// are constants, so its modules ignore the error.
func DurationHistogram(m metric.Meter, name, description string) (metric.Float64Histogram, error) {
	return m.Float64Histogram(name,
		metric.WithUnit("s"),
		metric.WithDescription(description),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
}

// StartTimed is Start for an operation whose duration is also recorded: the
// returned span, when ended (with End, or its own End), records the time
// since StartTimed in d, with AttrOperation = op, the AttrOutcome End set
// (if any) and the label. It lets a module time every call that already
// has a span without a second bookkeeping path.
func StartTimed(ctx context.Context, t trace.Tracer, spanName, label string, d metric.Float64Histogram, op string) (context.Context, trace.Span) {
	return startTimed(ctx, t, spanName, label, d, op, nil)
}

func startTimed(ctx context.Context, t trace.Tracer, spanName, label string, d metric.Float64Histogram, op string, opts []trace.SpanStartOption) (context.Context, trace.Span) {
	begin := time.Now()
	ctx, span := start(ctx, t, spanName, label, opts...)
	return ctx, &timedSpan{Span: span, d: d, op: op, label: label, start: begin, ctx: ctx}
}

type timedSpan struct {
	trace.Span
	d       metric.Float64Histogram
	op      string
	label   string
	outcome string
	start   time.Time
	ctx     context.Context
	ended   bool
}

func (s *timedSpan) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		if a.Key == AttrOutcome {
			s.outcome = a.Value.AsString()
		}
	}
	s.Span.SetAttributes(kv...)
}

func (s *timedSpan) End(opts ...trace.SpanEndOption) {
	if !s.ended && s.d != nil {
		s.ended = true
		s.d.Record(s.ctx, time.Since(s.start).Seconds(), OpAttrs(s.op, s.outcome, s.label).Record...)
	}
	s.Span.End(opts...)
}

// attrKey names one attribute set of an operation metric.
type attrKey struct{ op, outcome, label string }

// maxCachedSets bounds the attribute sets OpAttrs keeps: the operations
// and outcomes are constants and labels come from a program's
// configuration, so a process uses a few dozen; past the bound each set is
// built per call.
const maxCachedSets = 4096

var attrSets struct {
	sync.RWMutex
	m map[attrKey]*Attrs
}

// Attrs is one attribute set of an operation metric, as the options a
// counter's Add and a histogram's Record take. The slices are shared:
// pass them on (Add(ctx, 1, a.Add...)), never change them.
type Attrs struct {
	Add    []metric.AddOption
	Record []metric.RecordOption
}

// NewAttrs returns the options recording the attribute set of kv, for a
// module that builds its sets once when it starts.
func NewAttrs(kv ...attribute.KeyValue) *Attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &Attrs{Add: []metric.AddOption{o}, Record: []metric.RecordOption{o}}
}

// OpAttrs returns the attributes of every redkit operation metric:
// AttrOperation = op, AttrOutcome = outcome (if not empty) and AttrLabel =
// label (if not empty). Each set is built once and reused: building one
// sorts and hashes its attributes and allocates, work a call would
// otherwise do every time whether or not an SDK records it.
func OpAttrs(op, outcome, label string) *Attrs {
	k := attrKey{op, outcome, label}
	attrSets.RLock()
	a, ok := attrSets.m[k]
	attrSets.RUnlock()
	if ok {
		return a
	}
	kv := make([]attribute.KeyValue, 1, 3)
	kv[0] = attribute.String(AttrOperation, op)
	if outcome != "" {
		kv = append(kv, attribute.String(AttrOutcome, outcome))
	}
	if label != "" {
		kv = append(kv, attribute.String(AttrLabel, label))
	}
	a = NewAttrs(kv...)
	attrSets.Lock()
	if attrSets.m == nil {
		attrSets.m = make(map[attrKey]*Attrs)
	}
	if len(attrSets.m) < maxCachedSets {
		attrSets.m[k] = a
	}
	attrSets.Unlock()
	return a
}
