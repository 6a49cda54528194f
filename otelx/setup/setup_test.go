package setup_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/otelx/setup"
)

// clearEnv unsets every variable that could turn exporting on.
func clearEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SERVICE_NAME",
	} {
		t.Setenv(k, "")
	}
}

func TestStart_noVariablesExportsNothing(t *testing.T) {
	clearEnv(t)
	before := otel.GetTracerProvider()
	tel, err := setup.Start(context.Background(), "svc")
	require.NoError(t, err)
	assert.False(t, tel.Enabled())
	assert.Same(t, before, otel.GetTracerProvider(), "globals must stay untouched when nothing is exported")

	_, span := tel.TracerProvider.Tracer("t").Start(context.Background(), "op")
	assert.False(t, span.SpanContext().IsValid(), "no-op provider expected")
	span.End()

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a cancelled context proves Shutdown does not wait on anything
	require.NoError(t, tel.Shutdown(ctx))
}

func TestStart_noneIsOff(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := setup.Start(context.Background(), "svc")
	require.NoError(t, err)
	assert.False(t, tel.Enabled())
}

func TestStart_sdkDisabled(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	tel, err := setup.Start(context.Background(), "svc")
	require.NoError(t, err)
	assert.False(t, tel.Enabled())
}

func TestStart_unknownExporterIsAnError(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	_, err := setup.Start(context.Background(), "svc")
	require.Error(t, err)
}

func TestStart_endpointAloneTurnsOTLPOn(t *testing.T) {
	clearEnv(t)
	// Nothing listens on port 1: the exporter is created lazily and the
	// export is abandoned at shutdown, which is bounded by the context.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := setup.Start(context.Background(), "svc", setup.WithoutGlobal())
	require.NoError(t, err)
	assert.True(t, tel.Enabled())
	_, span := tel.TracerProvider.Tracer("t").Start(context.Background(), "op")
	assert.True(t, span.SpanContext().IsValid(), "SDK provider expected")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = tel.Shutdown(ctx) // the export fails; only that Shutdown returns matters
}

func TestStart_exportsToGivenExporterAndReader(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	exp := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetMeterProvider(prevMP) })

	ctx := context.Background()
	tel, err := setup.Start(ctx, "flashsale", setup.WithSpanExporter(exp), setup.WithMetricReader(reader))
	require.NoError(t, err)
	require.True(t, tel.Enabled())
	assert.Same(t, tel.TracerProvider, otel.GetTracerProvider())

	_, span := otel.Tracer("test").Start(ctx, "buy")
	span.End()
	counter, err := otel.Meter("test").Int64Counter("orders")
	require.NoError(t, err)
	counter.Add(ctx, 3)

	require.NoError(t, tel.Flush(ctx))
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	assert.Equal(t, "buy", spans[0].Name)
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "flashsale", attrs["service.name"])
	assert.Equal(t, "test", attrs["deployment.environment"])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	sum := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64])
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)

	require.NoError(t, tel.Shutdown(ctx))
}

func TestStart_serviceNameFromEnvWins(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	exp := tracetest.NewInMemoryExporter()
	tel, err := setup.Start(context.Background(), "flashsale", setup.WithSpanExporter(exp), setup.WithoutGlobal())
	require.NoError(t, err)
	_, span := tel.TracerProvider.Tracer("t").Start(context.Background(), "op")
	span.End()
	require.NoError(t, tel.Flush(context.Background()))
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	var name string
	for _, kv := range spans[0].Resource.Attributes() {
		if kv.Key == "service.name" {
			name = kv.Value.String()
		}
	}
	assert.Equal(t, "from-env", name)
	require.NoError(t, tel.Shutdown(context.Background()))
}
