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
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

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

// Tree draws the ended spans of the trace that the span named rootName
// (the first one ended with that name) belongs to, one span a line,
// children indented under their parent in the order they started. A line
// holds the span's name, then "outcome=<redkit.outcome>" when set,
// "cache_miss" for a recovered script-cache miss, "ERROR" when the span's
// status is Error, and "link=<name>" for each link to another recorded
// span. Spans whose parent was not recorded are drawn at the top level.
// Tests compare it with the shape they expect.
func (r *Recorder) Tree(tb testing.TB, rootName string) string {
	tb.Helper()
	for _, s := range r.Spans.Ended() {
		if s.Name() == rootName {
			return r.draw(func(id trace.TraceID) bool { return id == s.SpanContext().TraceID() })
		}
	}
	tb.Fatalf("otelxtest: no span named %q was recorded", rootName)
	return ""
}

// Trees draws every recorded trace as Tree does, the traces in the order
// their first span started.
func (r *Recorder) Trees() string {
	return r.draw(func(trace.TraceID) bool { return true })
}

func (r *Recorder) draw(in func(trace.TraceID) bool) string {
	ended := r.Spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var top []sdktrace.ReadOnlySpan
	for _, s := range ended {
		if !in(s.SpanContext().TraceID()) {
			continue
		}
		if _, ok := byID[s.Parent().SpanID()]; ok && s.Parent().IsValid() {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		} else {
			top = append(top, s)
		}
	}
	byStart := func(ss []sdktrace.ReadOnlySpan) {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].StartTime().Before(ss[j].StartTime()) })
	}
	var b strings.Builder
	var drawSpan func(s sdktrace.ReadOnlySpan, depth int)
	drawSpan = func(s sdktrace.ReadOnlySpan, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + Describe(s, byID) + "\n")
		kids := children[s.SpanContext().SpanID()]
		byStart(kids)
		for _, k := range kids {
			drawSpan(k, depth+1)
		}
	}
	byStart(top)
	for _, s := range top {
		drawSpan(s, 0)
	}
	return b.String()
}

// Describe is one line of Tree: the span's name and its outcome, cache
// miss, error status and links (named when the linked span is in byID).
func Describe(s sdktrace.ReadOnlySpan, byID map[trace.SpanID]sdktrace.ReadOnlySpan) string {
	line := s.Name()
	for _, a := range s.Attributes() {
		switch string(a.Key) {
		case otelx.AttrOutcome:
			line += " outcome=" + a.Value.AsString()
		case otelx.AttrScriptCacheMiss:
			if a.Value.AsBool() {
				line += " cache_miss"
			}
		}
	}
	if s.Status().Code == codes.Error {
		line += " ERROR"
	}
	for _, l := range s.Links() {
		if ls, ok := byID[l.SpanContext.SpanID()]; ok {
			line += " link=" + ls.Name()
		} else {
			line += " link=?"
		}
	}
	return line
}

// Roots returns the names of the recorded spans that have no parent, in
// the order they ended.
func (r *Recorder) Roots() []string {
	var out []string
	for _, s := range r.Spans.Ended() {
		if !s.Parent().IsValid() {
			out = append(out, s.Name())
		}
	}
	return out
}

// RequireRecorded fails the test unless each of names (a span name, a
// metric name, an attribute) appears in what the pipeline kept: the proof
// that a scan such as RequireNoSecrets looked at real telemetry.
func (r *Recorder) RequireRecorded(tb testing.TB, names ...string) {
	tb.Helper()
	out, _ := r.Strings(tb)
	all := strings.Join(out, "\n")
	for _, n := range names {
		if !strings.Contains(all, n) {
			tb.Errorf("otelxtest: %q was not recorded", n)
		}
	}
}
