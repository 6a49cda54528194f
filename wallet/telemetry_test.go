package wallet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestLedger_telemetry(t *testing.T) {
	ctx := t.Context()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()

	_, _, prefix := newLedger(t)
	px := redistest.NewProxy(t, shared.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix), wallet.WithTracerProvider(tp),
		wallet.WithMeterProvider(mp), wallet.WithLabel("payouts"))
	defer led.Close()

	require.NoError(t, led.Open(ctx, "secret-account", wallet.WithCurrency("CNY")))
	_, err := led.Credit(ctx, wallet.Tx{ID: "secret-tx", Account: "secret-account", Amount: 4242})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "secret-tx", Account: "secret-account", Amount: 4242})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "secret-tx2", Account: "secret-account", Amount: 999999})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	px.DropReplies(true)
	_, err = led.Debit(ctx, wallet.Tx{ID: "secret-tx3", Account: "secret-account", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	px.DropReplies(false)

	type seen struct {
		name, outcome string
		replayed      bool
		status        codes.Code
	}
	var got []seen
	for _, s := range rec.Ended() {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			require.NotContains(t, kv.Value.String(), "secret", "attribute %s leaks an ID", kv.Key)
			require.NotContains(t, kv.Value.String(), "4242", "attribute %s leaks an amount", kv.Key)
		}
		require.Equal(t, "payouts", attrs["redkit.label"].AsString())
		got = append(got, seen{s.Name(), attrs["redkit.outcome"].AsString(), attrs["redkit.replayed"].AsBool(), s.Status().Code})
	}
	require.Equal(t, []seen{
		{"wallet.open", "ok", false, codes.Unset},
		{"wallet.credit", "ok", false, codes.Unset},
		{"wallet.credit", "replayed", true, codes.Unset},
		{"wallet.debit", "insufficient_funds", false, codes.Unset},
		{"wallet.debit", "unknown", false, codes.Error},
	}, got)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, wallet.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue // the duration histogram, checked below
			}
			for _, dp := range sum.DataPoints {
				op, _ := dp.Attributes.Value("redkit.operation")
				out, _ := dp.Attributes.Value("redkit.outcome")
				counts[strings.Join([]string{m.Name, op.AsString(), out.AsString()}, " ")] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{
		"redkit.wallet.operations open ok":                  1,
		"redkit.wallet.operations credit ok":                1,
		"redkit.wallet.operations credit replayed":          1,
		"redkit.wallet.operations debit insufficient_funds": 1,
		"redkit.wallet.operations debit unknown":            1,
		"redkit.wallet.unknown_outcomes  ":                  1,
	}, counts)
}
