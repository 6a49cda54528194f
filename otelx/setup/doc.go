// Package setup configures the OpenTelemetry SDK for a program from the
// standard OTEL_* environment variables, in one call:
//
//	tel, err := setup.Start(ctx, "checkout")
//	if err != nil {
//		return err
//	}
//	defer tel.Shutdown(context.Background())
//
// redkit's libraries import only the OpenTelemetry API (package otelx); this
// separate module is the one place the SDK and its exporters come in, so a
// service that configures telemetry its own way never links them.
//
// # What the environment selects
//
// The exporters come from go.opentelemetry.io/contrib/exporters/autoexport:
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER name them ("otlp",
// "console", and "prometheus" for metrics), OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS and their
// per-signal forms configure OTLP, and the SDK reads OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_* and
// OTEL_METRIC_EXPORT_INTERVAL itself.
//
// One default differs from autoexport's: with no variable set, nothing is
// exported. autoexport would otherwise try OTLP on localhost:4318 and log
// connection errors into a developer's terminal. Setting only
// OTEL_EXPORTER_OTLP_ENDPOINT is enough to turn OTLP on for both signals.
// When nothing is exported the providers are no-op ones, spans cost next
// to nothing, and Shutdown returns at once.
package setup
