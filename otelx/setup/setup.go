package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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

	// Propagator is the propagator OTEL_PROPAGATORS names (by default W3C
	// trace context and baggage), installed as the otel global unless
	// WithoutGlobal was given; it is set even when nothing is exported.
	Propagator propagation.TextMapPropagator

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
// the caller passes Telemetry's providers to redkit's options itself, and
// its Propagator to its HTTP or RPC instrumentation.
func WithoutGlobal() Option {
	return func(c *config) { c.noGlobal = true }
}

// Start configures tracing, metrics and context propagation for the
// program called serviceName (OTEL_SERVICE_NAME, when set, wins) from the
// standard environment variables, and, unless WithoutGlobal is given,
// installs the propagator as the otel global, and the providers too when
// something is exported.
//
// The propagator is installed whatever is exported, even with
// OTEL_SDK_DISABLED=true: a service that exports nothing still passes the
// trace context of a request on to the services it calls. It is the one
// OTEL_PROPAGATORS names (default "tracecontext,baggage"; "none" for
// none).
//
// Traces are exported when OTEL_TRACES_EXPORTER names exporters ("otlp",
// "console"; "none" means off) or, with that variable unset, when an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Metrics follow OTEL_METRICS_EXPORTER
// ("otlp", "console", "prometheus", "none") and the metrics endpoint the same
// way. OTEL_SDK_DISABLED=true turns both off, even an exporter or reader
// given as an option. Unlike the specification's default ("otlp"), an
// empty environment exports nothing: no OTLP connection attempts and no
// console output. The package documentation says how each variable is
// read; a value that cannot be used is reported to otel.Handle and
// ignored, never an error.
//
// Everything else (endpoints, headers, timeouts, sampler, batch and export
// intervals, resource attributes) is read from the environment by the SDK
// and its exporters as usual.
func Start(ctx context.Context, serviceName string, opts ...Option) (*Telemetry, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	p, warns := readEnv(os.Getenv)
	for _, w := range warns {
		otel.Handle(w)
	}
	tel := &Telemetry{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		Propagator:     propagator(p.propagators),
	}
	if !cfg.noGlobal {
		otel.SetTextMapPropagator(tel.Propagator)
	}
	if p.disabled {
		return tel, nil
	}

	var exps []sdktrace.SpanExporter
	var readers []sdkmetric.Reader
	fail := func(err error) (*Telemetry, error) {
		for _, e := range exps {
			_ = e.Shutdown(ctx)
		}
		for _, r := range readers {
			_ = r.Shutdown(ctx)
		}
		return nil, err
	}
	if cfg.spanExporter != nil {
		exps = append(exps, cfg.spanExporter)
	} else {
		for _, name := range p.traces {
			e, err := spanExporter(ctx, name, p.tracesProto, cfg)
			if err != nil {
				return fail(fmt.Errorf("setup: traces exporter %s: %w", name, err))
			}
			exps = append(exps, e)
		}
	}
	if cfg.metricReader != nil {
		readers = append(readers, cfg.metricReader)
	} else {
		for _, name := range p.metrics {
			r, h, err := metricReader(ctx, name, p, cfg)
			if err != nil {
				return fail(fmt.Errorf("setup: metrics exporter %s: %w", name, err))
			}
			readers = append(readers, r)
			if h != nil {
				tel.metrics = h
			}
		}
	}
	if len(exps) == 0 && len(readers) == 0 {
		return tel, nil
	}

	res, err := newResource(ctx, serviceName)
	if err != nil {
		return fail(err)
	}
	if len(exps) > 0 {
		topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		for _, e := range exps {
			topts = append(topts, sdktrace.WithBatcher(e))
		}
		tel.sdkTracer = sdktrace.NewTracerProvider(topts...)
		tel.TracerProvider = tel.sdkTracer
	}
	if len(readers) > 0 {
		mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		for _, r := range readers {
			mopts = append(mopts, sdkmetric.WithReader(r))
		}
		tel.sdkMeter = sdkmetric.NewMeterProvider(mopts...)
		tel.MeterProvider = tel.sdkMeter
	}
	if !cfg.noGlobal {
		otel.SetTracerProvider(tel.TracerProvider)
		otel.SetMeterProvider(tel.MeterProvider)
	}
	return tel, nil
}

// propagator returns the composite of the named propagators (known names
// only: readEnv has left out the others); none is a propagator that
// carries nothing.
func propagator(names []string) propagation.TextMapPropagator {
	var ps []propagation.TextMapPropagator
	for _, n := range names {
		switch n {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		case "b3":
			ps = append(ps, b3.New(b3.WithInjectEncoding(b3.B3SingleHeader)))
		case "b3multi":
			ps = append(ps, b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader)))
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...)
}

// console returns the writer of the console exporters.
func (c config) consoleWriter() io.Writer {
	if c.console != nil {
		return c.console
	}
	return os.Stdout
}

// spanExporter builds the span exporter called name (a value readEnv
// accepted); the OTLP exporters read their endpoint, headers, timeout and
// TLS settings from the environment themselves.
func spanExporter(ctx context.Context, name, proto string, cfg config) (sdktrace.SpanExporter, error) {
	switch {
	case name == "console":
		return stdouttrace.New(stdouttrace.WithWriter(cfg.consoleWriter()))
	case proto == "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return otlptracehttp.New(ctx)
	}
}

// metricReader builds the metric reader of the exporter called name (a
// value readEnv accepted), and for a Prometheus exporter shared with the
// program's own HTTP server, the handler to mount.
func metricReader(ctx context.Context, name string, p plan, cfg config) (sdkmetric.Reader, http.Handler, error) {
	switch name {
	case "console":
		e, err := stdoutmetric.New(stdoutmetric.WithWriter(cfg.consoleWriter()))
		if err != nil {
			return nil, nil, err
		}
		return sdkmetric.NewPeriodicReader(e), nil, nil
	case "prometheus":
		// An isolated registry: the program's other Prometheus metrics are
		// not mixed in unless it adds them.
		reg := prometheus.NewRegistry()
		r, err := promexporter.New(promexporter.WithRegisterer(reg))
		if err != nil {
			return nil, nil, err
		}
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
		if cfg.sharedProm && !p.promAddrGiven {
			return r, h, nil
		}
		return serveMetrics(ctx, r, h, net.JoinHostPort(p.promHost, strconv.Itoa(p.promPort)))
	}
	var (
		e   sdkmetric.Exporter
		err error
	)
	if p.metricsProto == "grpc" {
		e, err = otlpmetricgrpc.New(ctx)
	} else {
		e, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	return sdkmetric.NewPeriodicReader(e), nil, nil
}

// serveMetrics serves h at /metrics on addr until the reader is shut down.
func serveMetrics(ctx context.Context, r sdkmetric.Reader, h http.Handler, addr string) (sdkmetric.Reader, http.Handler, error) {
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("listen on %s: %w", addr, err), r.Shutdown(ctx))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			otel.Handle(fmt.Errorf("setup: Prometheus exporter on %s: %w", addr, err))
		}
	}()
	return servedReader{Reader: r, srv: srv, served: served}, nil, nil
}

// servedReader is a Prometheus reader whose HTTP server stops with it.
type servedReader struct {
	sdkmetric.Reader
	srv    *http.Server
	served chan struct{}
}

func (r servedReader) Shutdown(ctx context.Context) error {
	err := errors.Join(r.Reader.Shutdown(ctx), r.srv.Shutdown(ctx))
	<-r.served
	return err
}

// MetricsHandler returns the Prometheus exposition handler to mount on the
// program's HTTP server (at /metrics), or nil unless WithSharedPrometheus
// was given and the environment selected a shared Prometheus exporter.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

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
