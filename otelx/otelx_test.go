package otelx_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/otelx"
)

var errSoldOut = errors.New("stock: sold out")

func init() { otelx.RegisterSentinels(errSoldOut) }

func newRecorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
}

// useGlobal installs tp and mp as the global providers for one test.
func useGlobal(t *testing.T, tp trace.TracerProvider, mp *sdkmetric.MeterProvider) {
	oldT, oldM := otel.GetTracerProvider(), otel.GetMeterProvider()
	if tp != nil {
		otel.SetTracerProvider(tp)
	}
	if mp != nil {
		otel.SetMeterProvider(mp)
	}
	t.Cleanup(func() {
		otel.SetTracerProvider(oldT)
		otel.SetMeterProvider(oldM)
	})
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func TestProviders_TracerFor_defaultsToGlobal(t *testing.T) {
	p := otelx.Providers{} // created before the global provider is installed
	global, tp := newRecorder()
	useGlobal(t, tp, nil)

	_, span := p.TracerFor("scope-a", "v1.2.3").Start(t.Context(), "op")
	span.End()

	ended := global.Ended()
	require.Len(t, ended, 1)
	require.Equal(t, "scope-a", ended[0].InstrumentationScope().Name)
}

func TestProviders_TracerFor_explicitWinsOverGlobal(t *testing.T) {
	global, gtp := newRecorder()
	useGlobal(t, gtp, nil)
	own, otp := newRecorder()

	_, span := otelx.Providers{Tracer: otp}.TracerFor("scope-b", "v1.2.3").Start(t.Context(), "op")
	span.End()

	require.Len(t, own.Ended(), 1)
	require.Empty(t, global.Ended())
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(t.Context(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[sm.Scope.Name+"/"+m.Name] = m
		}
	}
	return out
}

func TestProviders_MeterFor_defaultsToGlobal(t *testing.T) {
	p := otelx.Providers{}
	reader := sdkmetric.NewManualReader()
	useGlobal(t, nil, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))

	c, err := p.MeterFor("scope-c", "v1.2.3").Int64Counter("redkit.test.ops")
	require.NoError(t, err)
	c.Add(t.Context(), 3)

	got := collect(t, reader)
	require.Contains(t, got, "scope-c/redkit.test.ops")
}

func TestProviders_MeterFor_explicitWinsOverGlobal(t *testing.T) {
	global := sdkmetric.NewManualReader()
	useGlobal(t, nil, sdkmetric.NewMeterProvider(sdkmetric.WithReader(global)))
	own := sdkmetric.NewManualReader()

	p := otelx.Providers{Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(own))}
	c, err := p.MeterFor("scope-d", "v1.2.3").Int64Counter("redkit.test.ops")
	require.NoError(t, err)
	c.Add(t.Context(), 1)

	require.Contains(t, collect(t, own), "scope-d/redkit.test.ops")
	require.NotContains(t, collect(t, global), "scope-d/redkit.test.ops")
}

func TestStart_label(t *testing.T) {
	rec, tp := newRecorder()
	tr := tp.Tracer("test")

	_, span := otelx.Start(t.Context(), tr, "stock.deduct", "checkout")
	otelx.End(span, "ok", nil)
	_, span = otelx.Start(t.Context(), tr, "stock.deduct", "")
	otelx.End(span, "ok", nil)

	ended := rec.Ended()
	require.Len(t, ended, 2)
	require.Equal(t, "stock.deduct", ended[0].Name())
	require.Equal(t, trace.SpanKindInternal, ended[0].SpanKind())
	require.Equal(t, "checkout", attrs(ended[0].Attributes())[otelx.AttrLabel])
	require.NotContains(t, attrs(ended[1].Attributes()), otelx.AttrLabel)
}

func TestStart_childOfContextSpan(t *testing.T) {
	rec, tp := newRecorder()
	tr := tp.Tracer("test")

	ctx, parent := tr.Start(t.Context(), "request")
	_, span := otelx.Start(ctx, tr, "lock.acquire", "")
	otelx.End(span, "ok", nil)
	parent.End()

	ended := rec.Ended()
	require.Len(t, ended, 2)
	require.Equal(t, parent.SpanContext().SpanID(), ended[0].Parent().SpanID())
}

func TestEnd_refusalIsOutcomeNotError(t *testing.T) {
	rec, tp := newRecorder()
	_, span := otelx.Start(t.Context(), tp.Tracer("test"), "stock.deduct", "")
	otelx.End(span, "sold_out", nil)

	s := rec.Ended()[0]
	require.Equal(t, "sold_out", attrs(s.Attributes())[otelx.AttrOutcome])
	require.Equal(t, codes.Unset, s.Status().Code)
	require.NotContains(t, attrs(s.Attributes()), otelx.AttrErrorType)
}

func TestEnd_errorSetsStatusAndTypeWithoutMessage(t *testing.T) {
	rec, tp := newRecorder()
	_, span := otelx.Start(t.Context(), tp.Tracer("test"), "stock.deduct", "")
	otelx.End(span, "error", fmt.Errorf("deduct shop-7/sku-1: %w", errSoldOut))

	s := rec.Ended()[0]
	a := attrs(s.Attributes())
	require.Equal(t, codes.Error, s.Status().Code)
	require.Equal(t, "stock: sold out", a[otelx.AttrErrorType])
	require.Equal(t, "error", a[otelx.AttrOutcome])
	require.Empty(t, s.Events(), "the error message must not be recorded as an event")
	require.NotContains(t, s.Status().Description, "sku-1")
	for _, v := range a {
		require.NotContains(t, v, "sku-1")
	}
	require.True(t, s.EndTime().After(s.StartTime()) || s.EndTime().Equal(s.StartTime()))
}

func TestEnd_emptyOutcomeSetsNoAttribute(t *testing.T) {
	rec, tp := newRecorder()
	_, span := otelx.Start(t.Context(), tp.Tracer("test"), "x", "")
	otelx.End(span, "", nil)
	require.NotContains(t, attrs(rec.Ended()[0].Attributes()), otelx.AttrOutcome)
}

type limitError struct{ Buyer string }

func (e *limitError) Error() string { return "stock: buyer " + e.Buyer + " over limit" }

func TestErrorType(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := errors.New(strings.Repeat("x", 200))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"sentinel", errSoldOut, "stock: sold out"},
		{"wrapped sentinel", fmt.Errorf("deduct sku-9: %w", errSoldOut), "stock: sold out"},
		{"joined takes first branch", errors.Join(errSoldOut, io(t)), "stock: sold out"},
		{"typed error by type, not text", fmt.Errorf("a: %w", &limitError{Buyer: "alice"}), "*otelx_test.limitError"},
		{"canceled", fmt.Errorf("acquire: %w", ctx.Err()), "context.Canceled"},
		{"deadline", fmt.Errorf("acquire: %w", context.DeadlineExceeded), "context.DeadlineExceeded"},
		{"net error by type", &net.OpError{Op: "dial", Err: long}, "*errors.errorString"},
		{"long text by type", long, "*errors.errorString"},
		{"unregistered short text by type", fmt.Errorf("transfer %s: voided", "tx-7"), "*errors.errorString"},
		{"unregistered text under a wrap", fmt.Errorf("a: %w", errors.New("account alice closed")), "*errors.errorString"},
		{"go-redis sentinel", fmt.Errorf("get: %w", redis.ErrClosed), "redis: client is closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, otelx.ErrorType(tt.err))
		})
	}
}

func io(t *testing.T) error {
	t.Helper()
	return errors.New("io: read failed")
}

type cyclic struct{}

func (c *cyclic) Error() string { return "cyclic" }
func (c *cyclic) Unwrap() error { return c }

func TestErrorType_cyclicUnwrapEnds(t *testing.T) {
	require.Equal(t, "*otelx_test.cyclic", otelx.ErrorType(&cyclic{}))
}

// detailError is a comparable error type whose field can hold, at run
// time, a value that cannot be hashed.
type detailError struct{ detail any }

func (e detailError) Error() string { return fmt.Sprint("failed: ", e.detail) }

// An error whose type is comparable but whose value cannot be a map key is
// reported by its type, and registering one is ignored: neither panics.
func TestErrorType_unhashableValue(t *testing.T) {
	unhashable := detailError{detail: []string{"order-7f3a"}}
	require.NotPanics(t, func() { otelx.RegisterSentinels(unhashable) })
	var got string
	require.NotPanics(t, func() { got = otelx.ErrorType(fmt.Errorf("consume: %w", unhashable)) })
	require.Equal(t, "otelx_test.detailError", got)

	hashable := detailError{detail: "short"}
	otelx.RegisterSentinels(hashable)
	require.Equal(t, "failed: short", otelx.ErrorType(fmt.Errorf("consume: %w", hashable)))
	require.Equal(t, "otelx_test.detailError", otelx.ErrorType(detailError{detail: "other"}))
}

// DurationHistogram's bucket advice reaches the SDK, and a View the
// program installs still wins over it.
func TestDurationHistogram_bucketAdviceAndViewOverride(t *testing.T) {
	read := func(opts ...sdkmetric.Option) []float64 {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(reader))...)
		h, err := otelx.DurationHistogram(otelx.Providers{Meter: mp}.MeterFor("scope-e", "v1.2.3"), "redkit.test.duration", "test")
		require.NoError(t, err)
		h.Record(t.Context(), 0.0001)
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(t.Context(), &rm))
		sm := rm.ScopeMetrics[0]
		require.Equal(t, "v1.2.3", sm.Scope.Version)
		require.Equal(t, otelx.SchemaURL, sm.Scope.SchemaURL)
		require.Equal(t, "s", sm.Metrics[0].Unit)
		return sm.Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0].Bounds
	}
	require.Equal(t, otelx.DurationBuckets, read())
	view := sdkmetric.NewView(sdkmetric.Instrument{Name: "redkit.test.duration"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{1, 2}}})
	require.Equal(t, []float64{1, 2}, read(sdkmetric.WithView(view)))
}

// The buckets cover 50 µs to 10 s, rise, and below 5 ms no two neighbours
// are more than 1.5 apart, so histogram_quantile's interpolation stays
// within a factor of 1.5 of a sub-millisecond quantile.
func TestDurationBuckets_resolution(t *testing.T) {
	b := otelx.DurationBuckets
	require.Equal(t, 0.00005, b[0])
	require.Equal(t, 10.0, b[len(b)-1])
	for i := 1; i < len(b); i++ {
		require.Greater(t, b[i], b[i-1])
		if b[i] <= 0.005 {
			require.LessOrEqual(t, b[i]/b[i-1], 1.5+1e-9, "between %v and %v", b[i-1], b[i])
		}
	}
}

// StartTimed records the span's duration by operation, outcome and label
// when the span ends, once.
func TestStartTimed_recordsOnEnd(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec, tp := newRecorder()
	h, err := otelx.DurationHistogram(mp.Meter("scope-f"), "redkit.test.duration", "test")
	require.NoError(t, err)
	_, span := otelx.StartTimed(t.Context(), tp.Tracer("scope-f"), "test.op", "payout", h, "op")
	otelx.End(span, "sold_out", nil)
	span.End()
	require.Len(t, rec.Ended(), 1)
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	dps := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, dps, 1)
	require.EqualValues(t, 1, dps[0].Count)
	require.Equal(t, map[string]string{"redkit.operation": "op", "redkit.outcome": "sold_out", "redkit.label": "payout"},
		attrs(dps[0].Attributes.ToSlice()))
}

// SetTracer and SetMeter keep what was set when given nil, so a
// WithTracerProvider(nil) after a real provider does not undo it.
func TestProviders_SetIgnoresNil(t *testing.T) {
	tp, mp := sdktrace.NewTracerProvider(), sdkmetric.NewMeterProvider()
	var p otelx.Providers
	p.SetTracer(tp)
	p.SetMeter(mp)
	p.SetTracer(nil)
	p.SetMeter(nil)
	if p.Tracer != tp || p.Meter != mp {
		t.Fatalf("providers after nil: %+v", p)
	}
}

// A registered error that is long, or of a type that cannot be a map key,
// is still reported by its type, and registering nil changes nothing.
func TestRegisterSentinels_edges(t *testing.T) {
	long := errors.New(strings.Repeat("y", 81))
	otelx.RegisterSentinels(nil, long, uncomparable{"a"})
	require.Equal(t, "*errors.errorString", otelx.ErrorType(long))
	require.Equal(t, "otelx_test.uncomparable", otelx.ErrorType(uncomparable{"b"}))
}

type uncomparable []string

func (u uncomparable) Error() string { return "uncomparable" }

// StartBackground makes a root span even under a caller's span, linked to
// each valid cause once.
func TestStartBackground_rootLinkedToCauses(t *testing.T) {
	rec, tp := newRecorder()
	tr := tp.Tracer("t")
	ctx, caller := tr.Start(t.Context(), "caller")
	_, other := tr.Start(t.Context(), "other")
	cause := caller.SpanContext()

	_, bg := otelx.StartBackground(ctx, tr, "work", "lbl", cause, trace.SpanContext{}, cause, other.SpanContext())
	otelx.End(bg, otelx.OutcomeOK, nil)
	caller.End()
	other.End()

	var work sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "work" {
			work = s
		}
	}
	require.NotNil(t, work)
	require.False(t, work.Parent().IsValid(), "background work is a root")
	require.NotEqual(t, cause.TraceID(), work.SpanContext().TraceID())
	require.Len(t, work.Links(), 2)
	require.Equal(t, cause.SpanID(), work.Links()[0].SpanContext.SpanID())
	require.Equal(t, other.SpanContext().SpanID(), work.Links()[1].SpanContext.SpanID())
	require.Equal(t, "lbl", attrs(work.Attributes())[otelx.AttrLabel])
}

// StartBackgroundTimed records its duration like StartTimed, on a root.
func TestStartBackgroundTimed_records(t *testing.T) {
	rec, tp := newRecorder()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h, err := otelx.DurationHistogram(mp.Meter("m"), "bg.duration", "d")
	require.NoError(t, err)
	ctx, caller := tp.Tracer("t").Start(t.Context(), "caller")
	_, bg := otelx.StartBackgroundTimed(ctx, tp.Tracer("t"), "work", "", h, "renew", caller.SpanContext())
	otelx.End(bg, otelx.OutcomeOK, nil)
	caller.End()
	require.False(t, rec.Ended()[0].Parent().IsValid())
	got := collect(t, reader)["m/bg.duration"].Data.(metricdata.Histogram[float64])
	require.Len(t, got.DataPoints, 1)
	require.Equal(t, uint64(1), got.DataPoints[0].Count)
}

// Outcomes lists each word once.
func TestOutcomes_unique(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range otelx.Outcomes() {
		require.False(t, seen[o], "%s twice", o)
		require.Regexp(t, `^[a-z][a-z_]*$`, o)
		seen[o] = true
	}
}
