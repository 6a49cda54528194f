package otelx

import (
	"context"
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
		attrs := []attribute.KeyValue{attribute.String(AttrOperation, s.op)}
		if s.outcome != "" {
			attrs = append(attrs, attribute.String(AttrOutcome, s.outcome))
		}
		if s.label != "" {
			attrs = append(attrs, attribute.String(AttrLabel, s.label))
		}
		s.d.Record(s.ctx, time.Since(s.start).Seconds(), metric.WithAttributes(attrs...))
	}
	s.Span.End(opts...)
}
