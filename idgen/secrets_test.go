package idgen_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/redistest"
)

// Generator names, service names and issued IDs never reach telemetry: not
// the package's own spans and metrics, and not go-redis command traces
// switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	rec, tp, reader, mp := newTelemetry(t)
	rdb := redistest.New(t, redistest.Options{}).Client()
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Tracer: tp, Meter: mp}))
	ctx := t.Context()
	opts := []idgen.Option{idgen.WithTracerProvider(tp), idgen.WithMeterProvider(mp)}

	const name = "zq-tenant/zq-orders"
	require.NoError(t, rdb.Set(ctx, "redkit:idgen:v1:{zq-tenant}:seq:"+name, 4242424, 0).Err())
	seq, err := idgen.NewSequence(rdb, name, opts...)
	require.NoError(t, err)
	id, err := seq.Next(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, id)
	seg, err := idgen.NewSegment(rdb, name+"-seg", append(opts, idgen.WithMinStep(1000))...)
	require.NoError(t, err)
	segID, err := seg.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "zq-service", opts...)
	require.NoError(t, err)
	sfID, err := sf.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, sf.Close())

	out, _ := recorded(t, rec, reader)
	all := strings.Join(out, "\n")
	for _, want := range []string{"idgen.fetch", "evalsha", "redkit.idgen"} {
		require.Contains(t, all, want, "the scan sees what was recorded")
	}
	requireNothingRecorded(t, rec, reader, "zq-", id.String(), sfID.String(), sfID.Base32())
	_ = segID // a segment's first ID is 1: too short to search for
}

// recorded returns every string the telemetry pipeline kept: span names,
// attribute values, event names and attributes, status descriptions, link
// attributes, and metric names, descriptions and data-point attributes.
// It also returns how many go-redis command spans it saw.
func recorded(t *testing.T, rec *tracetest.SpanRecorder, reader *sdkmetric.ManualReader) (out []string, commands int) {
	t.Helper()
	kvs := func(attrs []attribute.KeyValue) {
		for _, a := range attrs {
			out = append(out, string(a.Key)+"="+a.Value.Emit())
		}
	}
	for _, s := range rec.Ended() {
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
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out = append(out, m.Name, m.Description)
			for _, set := range pointAttrs(m.Data) {
				kvs(set.ToSlice())
			}
		}
	}
	return out, commands
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

// requireNothingRecorded fails when any secret appears in anything the
// telemetry pipeline kept, or when no go-redis command was traced at all
// (the test would then prove nothing about command traces).
func requireNothingRecorded(t *testing.T, rec *tracetest.SpanRecorder, reader *sdkmetric.ManualReader, secrets ...string) {
	t.Helper()
	out, commands := recorded(t, rec, reader)
	if commands == 0 {
		t.Fatal("no go-redis command span was recorded")
	}
	for _, s := range out {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("telemetry recorded %q, which contains %q", s, secret)
			}
		}
	}
}

// newTelemetry returns an in-memory tracer and meter provider pair.
func newTelemetry(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider, *sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return rec, tp, reader, mp
}
