// Package app is the plumbing every example service shares: main's signal
// handling and exit codes, flag parsing and the start that follows it
// (Launch: -new-key, API keys), the Redis connection (REDIS_URL or
// the embedded default), OpenTelemetry from the standard OTEL_* variables,
// go-redis command tracing, a warning about risky Redis settings, and an
// HTTP server fit to expose (serve.go): API keys with scopes, timeouts
// within which every request is answered, an exact header limit, a bound
// on requests in flight, a per-principal rate limit in Redis, /healthz,
// /readyz and /metrics, HTTP telemetry whose series no client can add to
// (telemetry.go), and a graceful shutdown.
package app

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/health"
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
// tracing and pool metrics for the client (with the pool named "redis",
// never by the server's address). Its first log line says which Redis it
// uses. Close releases everything Start made.
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
	if err := otelx.InstrumentRedis(conn.Client, otelx.Providers{Tracer: tel.TracerProvider,
		Meter: newPoolNameMeterProvider(tel.MeterProvider)}); err != nil {
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

// WarnRiskySettings logs, as a warning, the Redis settings that check (a
// library's Check method, such as stock.Inventory.Check) finds at severity
// min or above: eviction, AOF, fsync. A production service might refuse to
// start on them instead.
func WarnRiskySettings(ctx context.Context, a *App, check func(context.Context) (health.Report, error), min health.Severity) {
	rep, err := check(ctx)
	if err != nil {
		a.Log.Warn(a.Name+": cannot check the Redis settings", "err", err)
		return
	}
	if err := rep.Err(min); err != nil {
		a.Log.Warn(a.Name+": risky Redis settings", "findings", err.Error())
	}
}
