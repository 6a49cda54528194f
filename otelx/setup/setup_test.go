package setup_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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
		"OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT",
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

// Exporters set to none, or the SDK disabled, export nothing whatever
// else the environment asks for.
func TestStart_off(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"none": {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"sdkDisabled": {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			tel, err := setup.Start(context.Background(), "svc")
			require.NoError(t, err)
			assert.False(t, tel.Enabled())
		})
	}
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

// The console exporters write where WithConsoleWriter says, a file here,
// and nothing reaches standard output.
func TestStart_consoleWriter(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	f, err := os.Create(filepath.Join(t.TempDir(), "telemetry.json"))
	require.NoError(t, err)
	defer f.Close()
	stdout := os.Stdout
	r, w, err := os.Pipe()
	require.NoError(t, err)
	os.Stdout = w
	var leaked bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&leaked, r); close(copied) }()
	func() {
		defer func() { os.Stdout = stdout }()
		tel, err := setup.Start(context.Background(), "svc", setup.WithConsoleWriter(f), setup.WithoutGlobal())
		require.NoError(t, err)
		_, span := tel.TracerProvider.Tracer("t").Start(context.Background(), "console-span")
		span.End()
		c, err := tel.MeterProvider.Meter("t").Int64Counter("console.counter")
		require.NoError(t, err)
		c.Add(context.Background(), 1)
		require.NoError(t, tel.Shutdown(context.Background()))
	}()
	require.NoError(t, w.Close())
	<-copied
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Contains(t, string(b), "console-span")
	assert.Contains(t, string(b), "console.counter")
	assert.Empty(t, leaked.String(), "nothing on standard output")
}

// With WithSharedPrometheus and no host or port, the exporter opens no
// listener and the program mounts MetricsHandler itself.
func TestStart_sharedPrometheusHandler(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	tel, err := setup.Start(context.Background(), "svc", setup.WithSharedPrometheus(), setup.WithoutGlobal())
	require.NoError(t, err)
	defer tel.Shutdown(context.Background())
	require.NotNil(t, tel.MetricsHandler())
	c, err := tel.MeterProvider.Meter("t").Int64Counter("shared.orders")
	require.NoError(t, err)
	c.Add(context.Background(), 7)
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	body := get(t, srv.URL)
	assert.Contains(t, body, "shared_orders_total")
	assert.Contains(t, body, "} 7")
}

// OTEL_EXPORTER_PROMETHEUS_HOST and _PORT give the exporter its own
// listener, even with WithSharedPrometheus.
func TestStart_prometheusHostAndPort(t *testing.T) {
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", strconv.Itoa(port))
	tel, err := setup.Start(context.Background(), "svc", setup.WithSharedPrometheus(), setup.WithoutGlobal())
	require.NoError(t, err)
	defer tel.Shutdown(context.Background())
	assert.Nil(t, tel.MetricsHandler())
	c, err := tel.MeterProvider.Meter("t").Int64Counter("own.orders")
	require.NoError(t, err)
	c.Add(context.Background(), 1)
	assert.Contains(t, get(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics"), "own_orders_total")
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}
