package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Telemetry is what Start configured. Its providers are no-op ones when
// the environment asks for nothing, so a program can use them
// unconditionally.
type Telemetry struct {
	// TracerProvider is the SDK provider when traces are exported, a no-op
	// provider otherwise.
	TracerProvider trace.TracerProvider
	// MeterProvider is the SDK provider when metrics are exported, a no-op
	// provider otherwise.
	MeterProvider metric.MeterProvider

	sdkTracer *sdktrace.TracerProvider // nil when traces are off
	sdkMeter  *sdkmetric.MeterProvider // nil when metrics are off
	metrics   http.Handler             // the shared Prometheus handler, or nil
}

// Option changes what Start does.
type Option func(*config)

type config struct {
	spanExporter sdktrace.SpanExporter
	metricReader sdkmetric.Reader
	noGlobal     bool
	console      io.Writer
	sharedProm   bool
}

// WithConsoleWriter makes the console exporters (OTEL_TRACES_EXPORTER=console,
// OTEL_METRICS_EXPORTER=console) write to w instead of standard output: a
// program whose standard output is its result sends telemetry to
// os.Stderr or to a file. A nil w is ignored.
func WithConsoleWriter(w io.Writer) Option {
	return func(c *config) {
		if w != nil {
			c.console = w
		}
	}
}

// WithSharedPrometheus lets a program serve the Prometheus exporter from
// its own HTTP server: when OTEL_METRICS_EXPORTER=prometheus and neither
// OTEL_EXPORTER_PROMETHEUS_HOST nor OTEL_EXPORTER_PROMETHEUS_PORT is set,
// Start opens no listener and Telemetry.MetricsHandler returns the handler
// to mount (at /metrics, by convention). With either variable set, the
// exporter listens on that host and port (defaults localhost and 9464) as
// it does without this option.
func WithSharedPrometheus() Option {
	return func(c *config) { c.sharedProm = true }
}

// WithSpanExporter exports traces to exp whatever the environment says
// (an in-memory exporter in a test, say).
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(c *config) { c.spanExporter = exp }
}

// WithMetricReader collects metrics with r whatever the environment says
// (a manual reader in a test, say).
func WithMetricReader(r sdkmetric.Reader) Option {
	return func(c *config) { c.metricReader = r }
}

// WithoutGlobal leaves the otel global providers and propagator alone;
// the caller passes Telemetry's providers to redkit's options itself.
func WithoutGlobal() Option {
	return func(c *config) { c.noGlobal = true }
}

// Start configures tracing and metrics for the program called serviceName
// (OTEL_SERVICE_NAME, when set, wins) from the standard environment
// variables, and, unless WithoutGlobal is given, installs the providers and
// the W3C trace-context and baggage propagator as the otel globals.
//
// Traces are exported when OTEL_TRACES_EXPORTER names an exporter ("otlp",
// "console"; "none" means off) or, with that variable unset, when an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Metrics follow OTEL_METRICS_EXPORTER
// ("otlp", "console", "prometheus", "none") and the metrics endpoint the same
// way. OTEL_SDK_DISABLED=true turns both off. Unlike autoexport's own
// default, an empty environment exports nothing: no OTLP connection
// attempts and no console output.
//
// Everything else (protocol, headers, sampler, batch and export intervals,
// resource attributes) is read from the environment by the SDK and its
// exporters as usual.
func Start(ctx context.Context, serviceName string, opts ...Option) (*Telemetry, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	tel := &Telemetry{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
	}
	disabled := strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true")

	exp := cfg.spanExporter
	if exp == nil && !disabled && cfg.console != nil && exporterIs("OTEL_TRACES_EXPORTER", "console") {
		e, err := stdouttrace.New(stdouttrace.WithWriter(cfg.console))
		if err != nil {
			return nil, fmt.Errorf("setup: traces exporter: %w", err)
		}
		exp = e
	}
	if exp == nil && !disabled && wanted("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		e, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("setup: traces exporter: %w", err)
		}
		if !autoexport.IsNoneSpanExporter(e) {
			exp = e
		}
	}
	reader := cfg.metricReader
	if reader == nil && !disabled {
		r, h, err := ownMetricReader(cfg)
		if err != nil {
			if exp != nil {
				_ = exp.Shutdown(ctx)
			}
			return nil, fmt.Errorf("setup: metrics exporter: %w", err)
		}
		reader, tel.metrics = r, h
	}
	if reader == nil && !disabled && wanted("OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			if exp != nil {
				_ = exp.Shutdown(ctx)
			}
			return nil, fmt.Errorf("setup: metrics exporter: %w", err)
		}
		if !autoexport.IsNoneMetricReader(r) {
			reader = r
		}
	}
	if exp == nil && reader == nil {
		return tel, nil
	}

	res, err := newResource(ctx, serviceName)
	if err != nil {
		return nil, err
	}
	if exp != nil {
		tel.sdkTracer = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		tel.TracerProvider = tel.sdkTracer
	}
	if reader != nil {
		tel.sdkMeter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
		tel.MeterProvider = tel.sdkMeter
	}
	if !cfg.noGlobal {
		otel.SetTracerProvider(tel.TracerProvider)
		otel.SetMeterProvider(tel.MeterProvider)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
			propagation.TraceContext{}, propagation.Baggage{}))
	}
	return tel, nil
}

// exporterIs reports whether the environment variable v names exporter.
func exporterIs(v, exporter string) bool {
	return strings.TrimSpace(os.Getenv(v)) == exporter
}

// ownMetricReader builds the metric readers that autoexport cannot: the
// console exporter on the configured writer, and the Prometheus exporter
// served by the program's own HTTP server. It returns a nil reader when
// neither applies.
func ownMetricReader(cfg config) (sdkmetric.Reader, http.Handler, error) {
	switch {
	case cfg.console != nil && exporterIs("OTEL_METRICS_EXPORTER", "console"):
		e, err := stdoutmetric.New(stdoutmetric.WithWriter(cfg.console))
		if err != nil {
			return nil, nil, err
		}
		return sdkmetric.NewPeriodicReader(e), nil, nil
	case cfg.sharedProm && exporterIs("OTEL_METRICS_EXPORTER", "prometheus") &&
		os.Getenv("OTEL_EXPORTER_PROMETHEUS_HOST") == "" && os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT") == "":
		// An isolated registry, as autoexport's own: the program's other
		// Prometheus metrics are not mixed in unless it adds them.
		reg := prometheus.NewRegistry()
		r, err := promexporter.New(promexporter.WithRegisterer(reg))
		if err != nil {
			return nil, nil, err
		}
		return r, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), nil
	}
	return nil, nil, nil
}

// MetricsHandler returns the Prometheus exposition handler to mount on the
// program's HTTP server (at /metrics), or nil unless WithSharedPrometheus
// was given and the environment selected a shared Prometheus exporter.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// wanted reports whether the environment asks for a signal: its exporter
// variable names one, or it is unset and an OTLP endpoint is configured.
func wanted(exporterVar, signalEndpointVar string) bool {
	if v := strings.TrimSpace(os.Getenv(exporterVar)); v != "" {
		return v != "none"
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv(signalEndpointVar) != ""
}

func newResource(ctx context.Context, serviceName string) (*resource.Resource, error) {
	var attrs []resource.Option
	if serviceName != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceName(serviceName)))
	}
	// WithFromEnv comes last so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	attrs = append(attrs, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("setup: resource: %w", err)
	}
	return res, nil
}

// Enabled reports whether anything is exported or collected.
func (t *Telemetry) Enabled() bool { return t.sdkTracer != nil || t.sdkMeter != nil }

// Flush exports what has been buffered so far.
func (t *Telemetry) Flush(ctx context.Context) error {
	var errs []error
	if t.sdkTracer != nil {
		errs = append(errs, t.sdkTracer.ForceFlush(ctx))
	}
	if t.sdkMeter != nil {
		errs = append(errs, t.sdkMeter.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the exporters; ctx bounds how long it waits.
// It returns at once when nothing is exported. Call it once, before exit.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.sdkTracer != nil {
		errs = append(errs, t.sdkTracer.Shutdown(ctx))
	}
	if t.sdkMeter != nil {
		errs = append(errs, t.sdkMeter.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
