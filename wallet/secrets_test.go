package wallet_test

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
	"github.com/redkit-go/redkit/wallet"
)

// Account and transaction IDs, hold IDs, amounts, currencies and memos never
// reach telemetry: not the package's own spans and metrics, and not go-redis
// command traces switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	rec, tp, reader, mp := newTelemetry(t)
	_, _, prefix := newLedger(t)
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Tracer: tp, Meter: mp}))
	led := wallet.New(rdb, wallet.WithKeyPrefix(prefix), wallet.WithTracerProvider(tp), wallet.WithMeterProvider(mp))
	t.Cleanup(func() { _ = led.Close() })
	ctx := t.Context()

	const alice, till, bob = "zq-shop/zq-alice", "zq-shop/zq-till", "zq-other/zq-bob"
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("ZQX"), wallet.WithOverdraft(313370)))
	}
	_, err := led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"}) // replay
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "zq-tx-2", Account: alice, Amount: 123456789, Currency: "ZQX"})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "zq-tx-3", Account: alice, Amount: 8765432100})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-4", From: alice, To: till, Amount: 555555})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-5", From: alice, To: bob, Amount: 666666}) // cross-group
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-1", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Capture(ctx, alice, "zq-hold-1", 7777777)
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-2", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Void(ctx, alice, "zq-hold-2", wallet.WithFence(lock.Fence{Name: "zq-lock", Token: 4242424}))
	require.NoError(t, err)
	_, err = led.Balance(ctx, alice)
	require.NoError(t, err)
	_, _, err = led.Entries(ctx, alice, "", 10)
	require.NoError(t, err)
	require.NoError(t, led.Verify(ctx, alice))
	_, err = led.TrialBalance(ctx, alice, till)
	require.NoError(t, err)

	out, _ := recorded(t, rec, reader)
	all := strings.Join(out, "\n")
	for _, want := range []string{"wallet.debit", "wallet.transfer", "evalsha", "redkit.wallet.operations"} {
		require.Contains(t, all, want, "the scan sees what was recorded")
	}
	requireNothingRecorded(t, rec, reader, "zq-", "ZQX", "313370", "987654321", "123456789", "8765432100",
		"555555", "666666", "7777777", "4242424")
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
