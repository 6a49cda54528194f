package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
)

// With -telemetry otlp, spans started through the global provider (as
// redkit's modules start theirs) reach the sink over OTLP/HTTP.
func TestStartTelemetry_exportsToTheSink(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "") // restored after the test; startTelemetry sets its own
	}
	oldT, oldM := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetTracerProvider(oldT); otel.SetMeterProvider(oldM) })

	stop, sink, err := startTelemetryTo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("redkit-bench-test").Start(context.Background(), "op")
	span.End()
	stop() // flushes
	if sink.requests.Load() == 0 || sink.size.Load() == 0 {
		t.Fatalf("the sink received %d exports, %d bytes; want the span", sink.requests.Load(), sink.size.Load())
	}
}

// A shell's own OpenTelemetry settings (a per-signal endpoint, a sampler
// that drops spans) do not take the run's telemetry away from the sink.
func TestStartTelemetry_ignoresTheShellsOwnSettings(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:1/v1/metrics")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	oldT, oldM := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetTracerProvider(oldT); otel.SetMeterProvider(oldM) })

	stop, sink, err := startTelemetryTo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("redkit-bench-test").Start(context.Background(), "op")
	sampled := span.SpanContext().IsSampled()
	span.End()
	stop()
	if !sampled || sink.requests.Load() < 2 {
		t.Fatalf("sampled %v, the sink received %d exports; want the span and the metrics", sampled, sink.requests.Load())
	}
}
