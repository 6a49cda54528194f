// Package app is the plumbing every example service shares: main's signal
// handling and exit codes, flag parsing and the start that follows it
// (Launch: -new-key, API keys), the Redis connection (REDIS_URL or
// the embedded default), OpenTelemetry from the standard OTEL_* variables,
// go-redis command tracing, a warning about risky Redis settings, and an
// HTTP server fit to expose (serve.go): API keys with scopes, timeouts, a
// bound on requests in flight, a per-principal rate limit in Redis,
// /healthz and /readyz, and a graceful shutdown.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/setup"
)

// App is a started service's shared resources.
type App struct {
	Name  string
	Redis *redisconn.Conn
	Tel   *setup.Telemetry
	Log   *slog.Logger
}

// Start connects to Redis (redisURL, or an embedded Redis when it is empty),
// sets up telemetry for the service called name and switches on go-redis
// tracing for the client. Its first log line says which Redis it uses.
// Close releases everything Start made.
func Start(ctx context.Context, name, redisURL string, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	conn, err := redisconn.Open(ctx, redisURL)
	if err != nil {
		return nil, err
	}
	log.Info(name+": using "+conn.Describe, "embedded", conn.Embedded, "cluster", conn.Cluster)
	// Standard output is the programs' report: console telemetry goes to
	// standard error, and a Prometheus exporter without its own
	// OTEL_EXPORTER_PROMETHEUS_HOST/_PORT is served at /metrics by the
	// service's own HTTP server.
	tel, err := setup.Start(ctx, name, setup.WithConsoleWriter(os.Stderr), setup.WithSharedPrometheus())
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := otelx.InstrumentRedis(conn.Client, otelx.Providers{Tracer: tel.TracerProvider, Meter: tel.MeterProvider}); err != nil {
		_ = tel.Shutdown(ctx)
		_ = conn.Close()
		return nil, err
	}
	return &App{Name: name, Redis: conn, Tel: tel, Log: log}, nil
}

// Close flushes telemetry and closes the Redis connection, for a defer at
// the start of run: it gets up to 5 s even when ctx has ended (a signal
// ended it, most likely), and a failure is logged as a warning, since the
// program is ending anyway.
func (a *App) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := errors.Join(a.Tel.Shutdown(ctx), a.Redis.Close()); err != nil {
		a.Log.Warn(a.Name+": close", "err", err)
	}
}

// settingsReport is what the libraries' Check methods return
// (health.Report): findings about the Redis settings that
// decide what a crash or memory pressure can lose.
type settingsReport[S ~int] interface {
	// Err lists the findings of severity min or above; nil when there are none.
	Err(min S) error
}

// WarnRiskySettings logs, as a warning, the Redis settings that check (a
// library's Check method, such as stock.Inventory.Check) finds at severity
// min or above: eviction, AOF, fsync. A production service might refuse to
// start on them instead.
func WarnRiskySettings[R settingsReport[S], S ~int](ctx context.Context, a *App, check func(context.Context) (R, error), min S) {
	rep, err := check(ctx)
	if err != nil {
		a.Log.Warn(a.Name+": cannot check the Redis settings", "err", err)
		return
	}
	if err := rep.Err(min); err != nil {
		a.Log.Warn(a.Name+": risky Redis settings", "findings", err.Error())
	}
}

// Handler wraps h so every request gets a server span (a parent for the
// redkit and go-redis spans below it) named by its route.
func (a *App) Handler(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, a.Name,
		otelhttp.WithTracerProvider(a.Tel.TracerProvider),
		otelhttp.WithMeterProvider(a.Tel.MeterProvider),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}
