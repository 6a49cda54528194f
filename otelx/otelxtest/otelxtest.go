// Package otelxtest records the telemetry a test produces, in memory, and
// scans it for values that must never be recorded (names, IDs, amounts).
// redkit's modules use it to prove that their spans, metrics and go-redis
// command traces carry no caller data; a service can do the same.
//
// It imports the OpenTelemetry SDK; import it from tests only.
package otelxtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/otelx"
)

// Recorder is an in-memory tracer and meter provider pair.
type Recorder struct {
	Spans          *tracetest.SpanRecorder
	Reader         *sdkmetric.ManualReader
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
}

// New returns a Recorder whose providers are shut down when the test ends.
func New(tb testing.TB) *Recorder {
	r := &Recorder{Spans: tracetest.NewSpanRecorder(), Reader: sdkmetric.NewManualReader()}
	r.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.Spans))
	r.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.Reader))
	tb.Cleanup(func() {
		_ = r.TracerProvider.Shutdown(context.Background())
		_ = r.MeterProvider.Shutdown(context.Background())
	})
	return r
}

// Providers returns the recorder's providers, for otelx.InstrumentRedis.
func (r *Recorder) Providers() otelx.Providers {
	return otelx.Providers{Tracer: r.TracerProvider, Meter: r.MeterProvider}
}

// Metrics collects the metrics recorded so far, by instrument name.
func (r *Recorder) Metrics(tb testing.TB) map[string]metricdata.Aggregation {
	tb.Helper()
	out := map[string]metricdata.Aggregation{}
	for _, sm := range r.collect(tb).ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func (r *Recorder) collect(tb testing.TB) metricdata.ResourceMetrics {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	return rm
}

// Strings returns every string the telemetry pipeline kept: span names,
// attribute values, event names and attributes, status descriptions, link
// attributes, and metric names, descriptions and data-point attributes. It
// also returns how many go-redis command spans (redisotel's) it saw.
func (r *Recorder) Strings(tb testing.TB) (out []string, commands int) {
	tb.Helper()
	kvs := func(attrs []attribute.KeyValue) {
		for _, a := range attrs {
			out = append(out, string(a.Key)+"="+a.Value.String())
		}
	}
	for _, s := range r.Spans.Ended() {
		if strings.Contains(s.InstrumentationScope().Name, "redisotel") {
			commands++
		}
		out = append(out, s.Name(), s.Status().Description)
		kvs(s.Attributes())
		for _, e := range s.Events() {
			out = append(out, e.Name)
			kvs(e.Attributes)
		}
		for _, l := range s.Links() {
			kvs(l.Attributes)
		}
	}
	for _, sm := range r.collect(tb).ScopeMetrics {
		for _, m := range sm.Metrics {
			out = append(out, m.Name, m.Description)
			for _, set := range pointAttrs(m.Data) {
				kvs(set.ToSlice())
			}
		}
	}
	return out, commands
}

// RequireNoSecrets fails the test when any of secrets appears in anything
// the telemetry pipeline kept, or when no go-redis command was traced at all
// (the scan would then prove nothing about command traces).
func (r *Recorder) RequireNoSecrets(tb testing.TB, secrets ...string) {
	tb.Helper()
	out, commands := r.Strings(tb)
	if commands == 0 {
		tb.Fatal("otelxtest: no go-redis command span was recorded")
	}
	for _, s := range out {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				tb.Errorf("telemetry recorded %q, which contains %q", s, secret)
			}
		}
	}
}

func pointAttrs(d metricdata.Aggregation) []attribute.Set {
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		return setsOf(d.DataPoints)
	case metricdata.Sum[float64]:
		return setsOf(d.DataPoints)
	case metricdata.Gauge[int64]:
		return setsOf(d.DataPoints)
	case metricdata.Gauge[float64]:
		return setsOf(d.DataPoints)
	case metricdata.Histogram[int64]:
		return histSetsOf(d.DataPoints)
	case metricdata.Histogram[float64]:
		return histSetsOf(d.DataPoints)
	}
	return nil
}

func setsOf[N int64 | float64](ps []metricdata.DataPoint[N]) []attribute.Set {
	out := make([]attribute.Set, len(ps))
	for i, p := range ps {
		out[i] = p.Attributes
	}
	return out
}

func histSetsOf[N int64 | float64](ps []metricdata.HistogramDataPoint[N]) []attribute.Set {
	out := make([]attribute.Set, len(ps))
	for i, p := range ps {
		out[i] = p.Attributes
	}
	return out
}

// Durations checks the duration histogram called name as every redkit
// duration histogram must be: unit "s", bucket boundaries
// otelx.DurationBuckets, and a scope carrying a version and otelx.SchemaURL.
// It returns the number of recorded durations per data point, keyed by the
// point's redkit.operation and redkit.outcome joined with a space ("deduct
// ok"); the name is absent from the map when nothing was recorded.
func (r *Recorder) Durations(tb testing.TB, name string) map[string]uint64 {
	tb.Helper()
	out := map[string]uint64{}
	for _, sm := range r.collect(tb).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sm.Scope.Version == "" || sm.Scope.SchemaURL != otelx.SchemaURL {
				tb.Errorf("%s: scope %s has version %q and schema URL %q", name, sm.Scope.Name, sm.Scope.Version, sm.Scope.SchemaURL)
			}
			if m.Unit != "s" {
				tb.Errorf("%s: unit %q, want s", name, m.Unit)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				tb.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
			}
			for _, p := range h.DataPoints {
				if !slices.Equal(p.Bounds, otelx.DurationBuckets) {
					tb.Errorf("%s: bucket bounds %v, want otelx.DurationBuckets", name, p.Bounds)
				}
				op, _ := p.Attributes.Value(otelx.AttrOperation)
				outcome, _ := p.Attributes.Value(otelx.AttrOutcome)
				out[op.AsString()+" "+outcome.AsString()] += p.Count
			}
		}
	}
	return out
}
