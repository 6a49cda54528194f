package idgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/idgen"
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
	m := collect(t, reader)
	ops := m["redkit.idgen.lease.operations"].(metricdata.Sum[int64])
	got := map[string]int64{}
	for _, dp := range ops.DataPoints {
		op, _ := dp.Attributes.Value("redkit.idgen.operation")
		got[op.AsString()] += dp.Value
	}
	require.Equal(t, int64(2), got["acquire"])
	require.Equal(t, int64(2), got["release"])
}
