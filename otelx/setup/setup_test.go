package setup_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/otelx/setup"
)

// clearEnv unsets every variable Start reads, and restores the otel
// globals Start may set when the test ends.
func clearEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_PROPAGATORS",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SERVICE_NAME",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
		"OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT",
	} {
		t.Setenv(k, "")
	}
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() {
		if otel.GetTracerProvider() != tp {
			otel.SetTracerProvider(tp)
		}
		if otel.GetMeterProvider() != mp {
			otel.SetMeterProvider(mp)
		}
		// The first global propagator carries nothing; an empty composite
		// neither (the global cannot be set back to its own delegate).
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

// warnings collects what Start reports to the otel error handler.
func warnings(t *testing.T) *[]error {
	var got []error
	var mu sync.Mutex
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return &got
}

// passThrough sends a request carrying incoming headers through a service
// as otelhttp would (extract with the global propagator, a span of the
// global tracer, inject into the outgoing call) and returns the headers of
// the outgoing call.
func passThrough(incoming map[string]string) propagation.MapCarrier {
	in := propagation.MapCarrier{}
	for k, v := range incoming {
		in.Set(k, v)
	}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), in)
	ctx, span := otel.Tracer("service").Start(ctx, "handle")
	defer span.End()
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	return out
}

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
)

// A service that exports nothing (the default, none, the SDK disabled)
// still passes the trace on: Start installs the propagator whatever is
// exported, the one OTEL_PROPAGATORS names.
func TestStart_propagatesWhateverIsExported(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"empty environment": {},
		"sdk disabled":      {"OTEL_SDK_DISABLED": "true"},
		"exporters none":    {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		"console traces":    {"OTEL_TRACES_EXPORTER": "console"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			tel, err := setup.Start(context.Background(), "svc", setup.WithConsoleWriter(io.Discard))
			require.NoError(t, err)
			defer tel.Shutdown(context.Background())
			out := passThrough(map[string]string{"traceparent": traceparent, "baggage": "tenant=7"})
			require.Contains(t, out.Get("traceparent"), traceID, "the trace must pass through: %v", out)
			require.Equal(t, "tenant=7", out.Get("baggage"))
			require.ElementsMatch(t, tel.Propagator.Fields(), otel.GetTextMapPropagator().Fields())
		})
	}
}

// OTEL_PROPAGATORS chooses the propagators: B3 for a stack on B3 (and no
// traceparent), none for nothing at all.
func TestStart_OTEL_PROPAGATORS(t *testing.T) {
	b3 := map[string]string{"b3": traceID + "-00f067aa0ba902b7-1"}
	for name, c := range map[string]struct {
		value    string
		incoming map[string]string
		want     []string // headers the outgoing call carries
	}{
		"b3":           {"b3", b3, []string{"b3"}},
		"b3multi":      {"b3multi", b3, []string{"x-b3-traceid", "x-b3-spanid", "x-b3-sampled"}},
		"b3 and w3c":   {"b3,tracecontext", b3, []string{"b3", "traceparent"}},
		"none":         {"none", map[string]string{"traceparent": traceparent}, nil},
		"tracecontext": {"tracecontext", map[string]string{"traceparent": traceparent, "baggage": "a=1"}, []string{"traceparent"}},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("OTEL_PROPAGATORS", c.value)
			_, err := setup.Start(context.Background(), "svc")
			require.NoError(t, err)
			out := passThrough(c.incoming)
			require.ElementsMatch(t, c.want, out.Keys(), "outgoing headers %v", out)
			for _, k := range out.Keys() {
				require.Contains(t, out.Get(k)+traceID, traceID)
			}
			if len(c.want) > 0 && c.want[0] != "x-b3-traceid" {
				require.Contains(t, out.Get(c.want[0]), traceID)
			}
		})
	}
}

// WithoutGlobal leaves the global propagator alone and hands it over.
func TestStart_withoutGlobalHandsThePropagatorOver(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_PROPAGATORS", "b3")
	tel, err := setup.Start(context.Background(), "svc", setup.WithoutGlobal())
	require.NoError(t, err)
	require.Empty(t, otel.GetTextMapPropagator().Fields(), "the global is left alone")
	require.Equal(t, []string{"b3"}, tel.Propagator.Fields())
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
		"sdkDisabledAnyCase": {"OTEL_SDK_DISABLED": "TRUE", "OTEL_METRICS_EXPORTER": "console",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
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

// A disabled SDK is a no-op for every signal, even an exporter or reader
// given in code.
func TestStart_disabledWinsOverOptions(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	tel, err := setup.Start(context.Background(), "svc", setup.WithoutGlobal(),
		setup.WithSpanExporter(tracetest.NewInMemoryExporter()), setup.WithMetricReader(sdkmetric.NewManualReader()))
	require.NoError(t, err)
	assert.False(t, tel.Enabled())
}

// A value Start cannot use is reported to the otel error handler and
// ignored, as the specification asks of an unrecognised enum value: an
// unknown exporter exports nothing (with no OTLP endpoint set), and a
// known one beside it still works.
func TestStart_unknownValuesAreWarnedAndIgnored(t *testing.T) {
	clearEnv(t)
	got := warnings(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	t.Setenv("OTEL_METRICS_EXPORTER", "statsd, Console")
	t.Setenv("OTEL_SDK_DISABLED", "yes")
	tel, err := setup.Start(context.Background(), "svc", setup.WithoutGlobal(), setup.WithConsoleWriter(io.Discard))
	require.NoError(t, err)
	defer tel.Shutdown(context.Background())
	_, span := tel.TracerProvider.Tracer("t").Start(context.Background(), "op")
	assert.False(t, span.SpanContext().IsValid(), "no traces exported")
	assert.True(t, tel.Enabled(), "the console metrics exporter stays")
	text := fmt.Sprint(*got)
	for _, want := range []string{"carrier-pigeon", "statsd", "OTEL_SDK_DISABLED"} {
		assert.Contains(t, text, want)
	}
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
