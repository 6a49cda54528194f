package idgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
)

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, idgen.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// leaseOps returns the node lease operations r collected, counted by
// "operation/outcome".
func leaseOps(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	ops := collect(t, r)["redkit.idgen.lease.operations"].(metricdata.Sum[int64])
	got := map[string]int64{}
	for _, dp := range ops.DataPoints {
		op, _ := dp.Attributes.Value(otelx.AttrOperation)
		outcome, _ := dp.Attributes.Value(otelx.AttrOutcome)
		got[op.AsString()+"/"+outcome.AsString()] += dp.Value
	}
	return got
}

func TestSegment_telemetry_perFetchNotPerID(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	seg, err := idgen.NewSegment(s.Client(), "tel", idgen.WithMinStep(100), idgen.WithMaxStep(100),
		idgen.WithMeterProvider(mp), idgen.WithTracerProvider(tp), idgen.WithLabel("orders"))
	require.NoError(t, err)
	for i := 0; i < 1000; i++ {
		_, err := seg.Next(t.Context())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return seg.Runway() > 0 }, 10*time.Second, time.Millisecond)
	m := collect(t, reader)
	fetches := m["redkit.idgen.range.fetches"].(metricdata.Sum[int64])
	var n int64
	for _, dp := range fetches.DataPoints {
		n += dp.Value
		label, _ := dp.Attributes.Value("redkit.label")
		require.Equal(t, "orders", label.AsString())
	}
	require.GreaterOrEqual(t, n, int64(10))
	require.LessOrEqual(t, n, int64(12), "one count per range of 100, not per ID")
	require.Contains(t, m, "redkit.idgen.range.fetch.duration")
	require.Contains(t, m, "redkit.idgen.range.size")
	runway := m["redkit.idgen.runway"].(metricdata.Gauge[int64])
	require.Equal(t, seg.Runway(), runway.DataPoints[0].Value)
	require.Len(t, spans.Ended(), int(n))
	require.Equal(t, "idgen.fetch", spans.Ended()[0].Name())
	require.NoError(t, seg.Close())
	require.NotContains(t, collect(t, reader), "redkit.idgen.runway", "gauge unregistered on Close")
}

func TestLeasedSnowflake_telemetry(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	a, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "tel", idgen.WithMeterProvider(mp))
	require.NoError(t, err)
	_, err = a.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, a.Close())
	b, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "tel", idgen.WithMeterProvider(mp))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	got := leaseOps(t, reader)
	require.Equal(t, int64(2), got["acquire/ok"], "%v", got)
	require.Equal(t, int64(2), got["release/ok"], "%v", got)
}

// Range fetches and node lease operations record their durations in
// seconds with otelx.DurationBuckets, by outcome (and operation).
func TestTelemetry_durations(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rec := otelxtest.New(t)
	opts := []idgen.Option{idgen.WithMeterProvider(rec.MeterProvider), idgen.WithTracerProvider(rec.TracerProvider)}
	seg, err := idgen.NewSegment(s.Client(), "d", append(opts, idgen.WithMinStep(10), idgen.WithMaxStep(10))...)
	require.NoError(t, err)
	_, err = seg.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	require.NotZero(t, rec.Durations(t, "redkit.idgen.range.fetch.duration")[" ok"])

	sf, err := idgen.NewLeasedSnowflake(t.Context(), s.Client(), "d", opts...)
	require.NoError(t, err)
	require.NoError(t, sf.Close())
	require.Equal(t, map[string]uint64{"acquire ok": 1, "release ok": 1},
		rec.Durations(t, "redkit.idgen.lease.operation.duration"))
}

// A Segment's range fetch runs in the background and outlives the Next
// that caused it: it is one idgen.fetch span per range, a root of its own
// linked to the span of the caller whose Next asked for it, with its
// go-redis command under it; never a child of an unrelated request, never
// an unlinked orphan when a caller's span is known.
func TestSpanTree_SegmentRefill(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's handshake, outside the traces
	seg, err := idgen.NewSegment(rdb, "tree", idgen.WithMinStep(10), idgen.WithMaxStep(10),
		idgen.WithTracerProvider(rec.TracerProvider), idgen.WithMeterProvider(rec.MeterProvider))
	require.NoError(t, err)
	defer seg.Close()
	tracer := rec.TracerProvider.Tracer("caller")

	// The first Next finds no range and waits for a fetch.
	ctx, first := tracer.Start(t.Context(), "first request")
	_, err = seg.Next(ctx)
	require.NoError(t, err)
	first.End()
	// Values 2..10 come from memory; one of them passes the prefetch
	// trigger, and the next range is fetched in the background.
	ctx, refill := tracer.Start(t.Context(), "refill request")
	for range 9 {
		_, err = seg.Next(ctx)
		require.NoError(t, err)
	}
	refill.End()
	require.Eventually(t, func() bool { return seg.Runway() > 0 && len(rec.Roots()) >= 4 }, 10*time.Second, time.Millisecond)

	trees := rec.Trees()
	_, got, _ := strings.Cut(trees, "first request\n")
	require.Equal(t, `idgen.fetch outcome=ok link=first request
  info
  evalsha cache_miss
  eval
refill request
idgen.fetch outcome=ok link=refill request
  evalsha
`, got, "all traces:\n%s", trees)
}

// A leased Snowflake's renewals are background work: one
// idgen.lease.renew root span per renewal, linked to the
// idgen.lease.acquire span that leased the node.
func TestSpanTree_leaseRenewalLinksToAcquire(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rec := otelxtest.New(t)
	ctx, start := rec.TracerProvider.Tracer("caller").Start(t.Context(), "start-up")
	sf, err := idgen.NewLeasedSnowflake(ctx, srv.Client(), "tree", idgen.WithLeaseTTL(time.Second),
		idgen.WithTracerProvider(rec.TracerProvider), idgen.WithMeterProvider(rec.MeterProvider))
	require.NoError(t, err)
	start.End()
	require.Eventually(t, func() bool { return strings.Contains(rec.Trees(), "idgen.lease.renew") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, sf.Close())

	require.Equal(t, "start-up\n  idgen.lease.acquire outcome=ok\n", rec.Tree(t, "start-up"))
	for _, line := range strings.Split(rec.Trees(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "idgen.lease.renew") {
			require.Equal(t, "idgen.lease.renew outcome=ok link=idgen.lease.acquire", line, rec.Trees())
		}
	}
	// Close has no context: its release is linked to the acquire too.
	require.Contains(t, strings.Split(rec.Trees(), "\n"), "idgen.lease.release outcome=ok link=idgen.lease.acquire", rec.Trees())
}

// runways returns the redkit.idgen.runway points r collected, by their
// redkit.idgen.segment attribute ("" when absent).
func runways(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	g, ok := collect(t, r)["redkit.idgen.runway"].(metricdata.Gauge[int64])
	require.True(t, ok, "no runway gauge")
	out := map[string]int64{}
	for _, p := range g.DataPoints {
		seg, _ := p.Attributes.Value(idgen.AttrSegment)
		_, dup := out[seg.AsString()]
		require.False(t, dup, "two points for segment %q", seg.AsString())
		out[seg.AsString()] = p.Value
	}
	return out
}

// Segments that share a meter and attributes report the lowest of their
// runways, not whichever observed last; WithSegmentLabel gives each its
// own series; a closed Segment leaves the gauge.
func TestSegment_runwayPerSegment(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := t.Context()
	newSeg := func(name string, step int64, opts ...idgen.Option) *idgen.Segment {
		seg, err := idgen.NewSegment(rdb, name, append(opts, idgen.WithMeterProvider(mp), idgen.WithLabel("ids"),
			idgen.WithMinStep(step), idgen.WithMaxStep(step))...)
		require.NoError(t, err)
		_, err = seg.Next(ctx)
		require.NoError(t, err)
		return seg
	}
	low := newSeg("runway-a", 100)   // 99 left
	high := newSeg("runway-b", 200)  // 199 left
	other := newSeg("runway-c", 300) // 299 left, in a series of its own
	t.Cleanup(func() { _ = other.Close() })
	require.Equal(t, int64(99), low.Runway())
	require.Equal(t, int64(199), high.Runway())

	require.Equal(t, map[string]int64{"": 99}, runways(t, reader), "the lowest runway of the unnamed Segments")

	named := func(label string, step int64) *idgen.Segment {
		return newSeg("runway-"+label, step, idgen.WithSegmentLabel(label))
	}
	orders, invoices := named("orders", 400), named("invoices", 500)
	require.Equal(t, map[string]int64{"": 99, "orders": 399, "invoices": 499}, runways(t, reader))

	require.NoError(t, low.Close())
	require.NoError(t, orders.Close())
	require.Equal(t, map[string]int64{"": 199, "invoices": 499}, runways(t, reader))
	require.NoError(t, high.Close())
	require.NoError(t, invoices.Close())
	require.Equal(t, map[string]int64{"": 299}, runways(t, reader))
}

// taggedProvider hands out meters of a comparable struct type whose
// interface field holds a slice: a value that cannot be a map key.
type taggedProvider struct{ metric.MeterProvider }

type taggedMeter struct {
	metric.Meter
	tags any
}

func (p taggedProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return taggedMeter{Meter: p.MeterProvider.Meter(name, opts...), tags: []string{name}}
}

// A Segment whose meter cannot be a map key, though its type is
// comparable, gets a runway board of its own instead of a panic.
func TestSegment_runway_unhashableMeter(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	reader := sdkmetric.NewManualReader()
	mp := taggedProvider{sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	var seg *idgen.Segment
	require.NotPanics(t, func() {
		var err error
		seg, err = idgen.NewSegment(rdb, "runway-tagged", idgen.WithMeterProvider(mp), idgen.WithMinStep(100), idgen.WithMaxStep(100))
		require.NoError(t, err)
	})
	t.Cleanup(func() { _ = seg.Close() })
	_, err := seg.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"": 99}, runways(t, reader))
}
