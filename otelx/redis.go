package otelx

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentRedis switches on go-redis command tracing and connection-pool
// metrics (github.com/redis/go-redis/extra/redisotel) for rdb, using the
// providers in p (nil fields: the global providers).
//
// Command arguments are never recorded: the db.statement attribute is off,
// and error replies, which Redis sometimes builds from the arguments
// ("unknown command 'X', with args beginning with: ..."), are recorded as
// span status Error plus an error.type attribute holding only the reply's
// error code, not as the reply text. Call-site attributes (code.function,
// code.filepath) are off too: they would point inside redkit and cost a
// stack walk per command.
//
// Dials are not traced. go-redis opens connections with a context of its
// own, not the caller's (a pool refill, a connection opened for a command
// that has since given up), so a redis.dial span would be the root of a
// trace of its own for every new connection, joined to no request. The
// time a dial takes is in db.client.connections.create_time, and a dial
// that fails fails the command span that needed the connection.
//
// The two duration histograms redisotel records,
// db.client.connections.create_time and db.client.connections.use_time,
// are in seconds (unit "s", where redisotel records milliseconds) with
// DurationBuckets as bucket advice, like every redkit duration histogram:
// with the SDK's default boundaries, made for milliseconds, every call of
// a local Redis falls in the first bucket.
//
// Call it once per client, before the client is shared; instrumenting the
// same client twice records every command twice.
func InstrumentRedis(rdb redis.UniversalClient, p Providers) error {
	if rdb == nil {
		return fmt.Errorf("otelx: instrument redis: nil client")
	}
	tp := redactingTracerProvider{TracerProvider: p.tracerProvider()}
	if err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(tp),
		redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false),
		redisotel.WithDialFilter(true),
	); err != nil {
		return fmt.Errorf("otelx: instrument redis tracing: %w", err)
	}
	if err := redisotel.InstrumentMetrics(rdb,
		redisotel.WithMeterProvider(secondsMeterProvider{MeterProvider: p.meterProvider()}),
	); err != nil {
		return fmt.Errorf("otelx: instrument redis metrics: %w", err)
	}
	return nil
}

// secondsMeterProvider hands redisotel a meter whose millisecond duration
// histograms record seconds with DurationBuckets as bucket advice.
type secondsMeterProvider struct {
	metric.MeterProvider
}

func (p secondsMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return secondsMeter{Meter: p.MeterProvider.Meter(name, opts...)}
}

type secondsMeter struct {
	metric.Meter
}

func (m secondsMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	cfg := metric.NewFloat64HistogramConfig(opts...)
	if cfg.Unit() != "ms" {
		return m.Meter.Float64Histogram(name, opts...)
	}
	h, err := DurationHistogram(m.Meter, name, cfg.Description())
	return msToSeconds{Float64Histogram: h}, err
}

// msToSeconds records a value given in milliseconds in seconds.
type msToSeconds struct {
	metric.Float64Histogram
}

func (h msToSeconds) Record(ctx context.Context, ms float64, opts ...metric.RecordOption) {
	h.Float64Histogram.Record(ctx, ms/1000, opts...)
}

// redactingTracerProvider hands redisotel spans that record errors by
// their type only. redisotel records a failed command with RecordError
// and SetStatus(Error, err.Error()); the error text of a Redis reply can
// quote the command's arguments.
type redactingTracerProvider struct {
	trace.TracerProvider
}

func (p redactingTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return redactingTracer{Tracer: p.TracerProvider.Tracer(name, opts...)}
}

type redactingTracer struct {
	trace.Tracer
}

func (t redactingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	return ctx, &redactingSpan{Span: span, name: name}
}

// AttrScriptCacheMiss marks a go-redis command span whose EVALSHA was
// answered NOSCRIPT: the script was not in the server's cache (the first
// call after a start, a failover or SCRIPT FLUSH), it did not run, and
// redkit sends it again with its source. The span is not an error.
const AttrScriptCacheMiss = "redkit.script_cache_miss"

type redactingSpan struct {
	trace.Span
	name   string
	benign bool // the recorded error is an expected answer, not a failure
}

func (s *redactingSpan) RecordError(err error, _ ...trace.EventOption) {
	if err == nil {
		return
	}
	s.Span.SetAttributes(attribute.String(AttrErrorType, ErrorType(err)))
	switch {
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		s.benign = true
		s.Span.SetAttributes(attribute.Bool(AttrScriptCacheMiss, true))
	case strings.TrimPrefix(s.name, "redis.pipeline ") == "client" && strings.Contains(err.Error(), "unknown subcommand"):
		// go-redis announces itself on each new connection with CLIENT
		// subcommands that older servers do not know (CLIENT SETINFO
		// arrived in Redis 7.2), and ignores the refusal.
		s.benign = true
	}
}

func (s *redactingSpan) SetStatus(code codes.Code, _ string) {
	if s.benign && code == codes.Error {
		return
	}
	s.Span.SetStatus(code, "")
}

// redisErrorCode returns the leading upper-case word of a Redis error
// reply ("ERR", "NOSCRIPT", "WRONGTYPE").
func redisErrorCode(err error) (string, bool) {
	if _, ok := err.(redis.Error); !ok {
		return "", false
	}
	if err == redis.Nil {
		return "nil", true
	}
	msg := err.Error()
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || len(code) > 32 {
		return "ERR", true
	}
	for _, r := range code {
		if (r < 'A' || r > 'Z') && r != '_' && (r < '0' || r > '9') {
			return "ERR", true
		}
	}
	return code, true
}
