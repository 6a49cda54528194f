package stock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/stock"
)

// SKUs, order and buyer IDs, operation IDs and quantities never reach
// telemetry: not the package's own spans and metrics, and not go-redis
// command traces switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	rec, tp, reader, mp := newTelemetry(t)
	_, _, prefix := newInventory(t)
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Tracer: tp, Meter: mp}))
	inv := stock.New(rdb, stock.WithKeyPrefix(prefix), stock.WithTracerProvider(tp), stock.WithMeterProvider(mp))
	t.Cleanup(func() { _ = inv.Close() })
	ctx := t.Context()

	const sku, hot = "zq-shop/zq-sku-1", "zq-shop/zq-sku-hot"
	require.NoError(t, inv.Create(ctx, sku, 918273000, stock.WithBuyerLimit(4711000)))
	require.NoError(t, inv.Create(ctx, hot, 918273000, stock.WithBuckets(4)))
	_, err := inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000)) // replay
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("zq-order-2", "zq-buyer-1", sku, 1)) // over the buyer limit
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	_, err = inv.Deduct(ctx, order("zq-order-3", "zq-buyer-2", hot, 4711000))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000), time.Minute)
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("zq-order-4", "zq-buyer-3", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "zq-op-1", sku, 4711000)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, "zq-op-2", sku, 4711000, stock.WithFence(lock.Fence{Name: "zq-lock", Token: 4242424}))
	require.NoError(t, err)
	_, err = inv.Level(ctx, sku)
	require.NoError(t, err)
	_, err = inv.Audit(ctx, sku)
	require.NoError(t, err)
	require.NoError(t, inv.CloseSKU(ctx, sku))
	_, err = inv.Deduct(ctx, order("zq-order-5", "zq-buyer-4", sku, 1))
	require.ErrorIs(t, err, stock.ErrClosed)

	out, _ := recorded(t, rec, reader)
	all := strings.Join(out, "\n")
	for _, want := range []string{"stock.deduct", "stock.reserve", "evalsha", "redkit.stock.operations"} {
		require.Contains(t, all, want, "the scan sees what was recorded")
	}
	requireNothingRecorded(t, rec, reader, "zq-", "918273", "4711000", "4242424")
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
