package stock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/stock"
)

func TestInventory_telemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inv, _, _ := newInventory(t, stock.WithTracerProvider(tp), stock.WithMeterProvider(mp), stock.WithLabel("flash"))
	ctx := t.Context()

	require.NoError(t, inv.Create(ctx, "secret-sku", 1))
	o := order("secret-order", "secret-buyer", "secret-sku", 1)
	_, err := inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("secret-order-2", "secret-buyer", "secret-sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Reserve(ctx, order("secret-order-3", "secret-buyer", "secret-sku", 1), time.Minute)
	require.ErrorIs(t, err, stock.ErrSoldOut)

	type seen struct {
		outcome  string
		replayed bool
		failed   bool
	}
	var got []seen
	for _, s := range spans.Ended() {
		v := seen{failed: s.Status().Code == codes.Error}
		for _, a := range s.Attributes() {
			require.NotContains(t, a.Value.String(), "secret", "attribute %s leaks a name", a.Key)
			switch a.Key {
			case "redkit.outcome":
				v.outcome = a.Value.AsString()
			case "redkit.replayed":
				v.replayed = a.Value.AsBool()
			case "redkit.label":
				require.Equal(t, "flash", a.Value.AsString())
			}
		}
		require.True(t, strings.HasPrefix(s.Name(), "stock."), s.Name())
		got = append(got, v)
	}
	require.Equal(t, []seen{
		{outcome: "ok"},                       // create
		{outcome: "ok"},                       // deduct
		{outcome: "replayed", replayed: true}, // deduct again
		{outcome: "sold_out"},                 // a refusal is not a span error
		{outcome: "sold_out"},                 // reserve
	}, got)
	require.Equal(t, "stock.reserve", spans.Ended()[4].Name())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	total := int64(0)
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, stock.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			if m.Name != "redkit.stock.operations" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				total += dp.Value
			}
		}
	}
	require.Equal(t, int64(5), total)
}
