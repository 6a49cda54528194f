package app

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/otelx"
)

// ScopeName is the instrumentation scope of the HTTP server telemetry that
// Handler records.
const ScopeName = "github.com/redkit-go/redkit/examples/kit/app"

// Handler wraps h so every request gets a server span (a parent for the
// redkit and go-redis spans below it) and a sample of the
// http.server.request.duration histogram (seconds, otelx.DurationBuckets).
//
// A service facing the Internet cannot let its clients choose its
// telemetry's attributes: each distinct value is one more series in every
// scrape, and a client that sends a thousand Host headers, paths or user
// agents would grow /metrics without bound (the SDK stops near 2,000 series
// per instrument, each of them kept for good). So nothing here is read from
// the request but what the service decides: the method, one of the nine
// standard ones or "_OTHER"; the route, the pattern the request matched as
// registered ("/accounts/{id}/debits"), absent when none did; the status
// code the service answered; the scheme. No Host (server.address,
// server.port), path, query, header, user agent or client address. The span
// is named "METHOD route".
//
// The span is the root of a trace of its own. A trace context the request
// carries (traceparent, through the global propagator) becomes a link, not
// the parent: a client does not decide which of the service's traces are
// sampled, nor join them to its own.
func (a *App) Handler(h http.Handler) http.Handler {
	tp, mp := a.Tel.TracerProvider, a.Tel.MeterProvider
	tracer := tp.Tracer(ScopeName)
	duration, err := otelx.DurationHistogram(mp.Meter(ScopeName), "http.server.request.duration",
		"Duration of HTTP server requests.")
	if err != nil {
		otel.Handle(err)
		duration, _ = metricnoop.Meter{}.Float64Histogram("http.server.request.duration")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		method := standardMethod(r.Method)
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot()}
		remote := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(r.Header))
		if sc := trace.SpanContextFromContext(remote); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		spanMethod := method
		if method == "_OTHER" {
			spanMethod = "HTTP"
		}
		ctx, span := tracer.Start(r.Context(), spanMethod, opts...)
		ctx, route := httpx.TrackRoute(ctx)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			attrs := []attribute.KeyValue{
				semconv.HTTPRequestMethodKey.String(method),
				semconv.URLScheme(scheme(r)),
				semconv.HTTPResponseStatusCode(status),
			}
			if rt := routeTemplate(route()); rt != "" {
				attrs = append(attrs, semconv.HTTPRoute(rt))
				span.SetName(spanMethod + " " + rt)
			}
			span.SetAttributes(attrs...)
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			span.End()
			duration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), metric.WithAttributes(attrs...))
		}()
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// standardMethods are the methods of RFC 9110 and PATCH, which telemetry
// names as they are; any other is "_OTHER".
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodDelete: true,
	http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true, http.MethodPatch: true,
}

func standardMethod(m string) string {
	if standardMethods[m] {
		return m
	}
	return "_OTHER"
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// routeTemplate is a registered pattern without its method and host:
// "POST /accounts/{id}/debits" is "/accounts/{id}/debits".
func routeTemplate(pattern string) string {
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		pattern = strings.TrimLeft(pattern[i:], " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // a host in the pattern is the service's, but not a route
	}
	return pattern
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// poolName is the pool.name of the go-redis connection-pool metrics.
const poolName = "redis"

// poolNameMeterProvider hands go-redis's pool metrics (redisotel, through
// otelx.InstrumentRedis) a meter that names every pool poolName: redisotel
// names a pool after the server's address, which /metrics would then show
// to everyone who may read it. The pool metrics are a histogram of each
// command's time and gauges observed in a callback; other instruments pass
// through unchanged. A command's histogram sample costs a lookup of its
// renamed attribute set, made once per distinct set (a handful: status,
// error type, command or pipeline).
type poolNameMeterProvider struct {
	metric.MeterProvider
	renamed *sync.Map // attribute.Distinct -> attribute.Set
}

func newPoolNameMeterProvider(mp metric.MeterProvider) poolNameMeterProvider {
	return poolNameMeterProvider{MeterProvider: mp, renamed: new(sync.Map)}
}

func (p poolNameMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return poolNameMeter{Meter: p.MeterProvider.Meter(name, opts...), renamed: p.renamed}
}

type poolNameMeter struct {
	metric.Meter
	renamed *sync.Map
}

func (m poolNameMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	h, err := m.Meter.Float64Histogram(name, opts...)
	return poolNameHistogram{Float64Histogram: h, renamed: m.renamed}, err
}

func (m poolNameMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	return m.Meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		return f(ctx, poolNameObserver{Observer: o, renamed: m.renamed})
	}, insts...)
}

type poolNameHistogram struct {
	metric.Float64Histogram
	renamed *sync.Map
}

func (h poolNameHistogram) Record(ctx context.Context, v float64, opts ...metric.RecordOption) {
	set := metric.NewRecordConfig(opts).Attributes()
	h.Float64Histogram.Record(ctx, v, metric.WithAttributeSet(renamePool(h.renamed, set)))
}

type poolNameObserver struct {
	metric.Observer
	renamed *sync.Map
}

func (o poolNameObserver) ObserveFloat64(inst metric.Float64Observable, v float64, opts ...metric.ObserveOption) {
	set := metric.NewObserveConfig(opts).Attributes()
	o.Observer.ObserveFloat64(inst, v, metric.WithAttributeSet(renamePool(o.renamed, set)))
}

func (o poolNameObserver) ObserveInt64(inst metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	set := metric.NewObserveConfig(opts).Attributes()
	o.Observer.ObserveInt64(inst, v, metric.WithAttributeSet(renamePool(o.renamed, set)))
}

// renamePool returns set with pool.name, when present, set to poolName,
// remembered in renamed.
func renamePool(renamed *sync.Map, set attribute.Set) attribute.Set {
	key := set.Equivalent()
	if r, ok := renamed.Load(key); ok {
		return r.(attribute.Set)
	}
	out := set
	if _, ok := set.Value("pool.name"); ok {
		kvs := set.ToSlice()
		for i := range kvs {
			if kvs[i].Key == "pool.name" {
				kvs[i] = attribute.String("pool.name", poolName)
			}
		}
		out = attribute.NewSet(kvs...)
	}
	renamed.Store(key, out)
	return out
}
