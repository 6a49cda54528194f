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
