package lock_test

import (
	"context"
	"strconv"
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
)

// Lock names, owner IDs and fencing tokens never reach telemetry: not the
// package's own spans and metrics, and not go-redis command traces switched
// on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	rec, tp, reader, mp := newTelemetry(t)
	rdb := sharedClient(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Tracer: tp, Meter: mp}))
	locks := newLocks(t, rdb, lock.WithTracerProvider(tp), lock.WithMeterProvider(mp))
	ctx := t.Context()

	const name = "zq-tenant/zq-payout-lock"
	m := locks.Mutex(name, lock.WithTTL(time.Second))
	require.NoError(t, rdb.Set(ctx, m.CounterKey(), 4242424, 0).Err())
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, l.Fence().Token)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	waited := waitFor(locks.Mutex(name, lock.WithTTL(time.Second)))
	require.NoError(t, l.Extend(ctx))
	fenceKey := lock.FenceKey("", "zq-resource", name)
	require.NoError(t, lock.CheckFence(ctx, rdb, fenceKey, l.Fence()))
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-waited)
	require.ErrorIs(t, lock.CheckFence(ctx, rdb, fenceKey, lock.Fence{Name: name, Token: 4242424}), lock.ErrStaleFence)

	fair := locks.Mutex(name+"-fair", lock.WithFair(true))
	lf, err := fair.Acquire(ctx)
	require.NoError(t, err)
	fairWaited := waitFor(locks.Mutex(name+"-fair", lock.WithFair(true)))
	require.NoError(t, lf.Release(ctx))
	require.NoError(t, <-fairWaited)

	sem := locks.Semaphore(name+"-sem", 2)
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx))
	rw := locks.RWMutex(name + "-rw")
	r, err := rw.AcquireRead(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, locks.Do(ctx, name+"-do", func(context.Context, *lock.Lease) error { return nil }))
	require.NoError(t, rdb.Del(context.Background(), fenceKey).Err())

	out, _ := recorded(t, rec, reader)
	all := strings.Join(out, "\n")
	for _, want := range []string{"lock.acquire", "lock.release", "evalsha", "redkit.lock.hold.duration", "db.client.connections.usage"} {
		require.Contains(t, all, want, "the scan sees what was recorded")
	}
	requireNothingRecorded(t, rec, reader, "zq-", l.Owner(), lf.Owner(), p.Owner(), r.Owner(),
		strconv.FormatUint(l.Fence().Token, 10), "4242424")
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
