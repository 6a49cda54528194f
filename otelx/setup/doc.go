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
// Start reads these variables itself, as the OpenTelemetry environment
// variable specification says: an empty value is the same as an unset
// one; a boolean is true only for "true", in any case; enum values are
// trimmed and compared in any case, and lists are deduplicated; a value
// that cannot be used (unknown, of a kind this package does not support,
// not a number) is reported to the OpenTelemetry error handler
// (otel.Handle, which logs it) and ignored, as if unset, never an error
// that stops the program:
//
//	OTEL_SDK_DISABLED                  boolean; true: nothing is exported, even an exporter given as an option;
//	                                   the propagators are installed all the same
//	OTEL_PROPAGATORS                   tracecontext, baggage, b3, b3multi, none; default tracecontext,baggage
//	                                   (jaeger, xray and ottrace are not supported)
//	OTEL_TRACES_EXPORTER               otlp, console, none; several may be listed (zipkin is not supported)
//	OTEL_METRICS_EXPORTER              otlp, console, prometheus, none; several may be listed
//	OTEL_EXPORTER_OTLP_ENDPOINT        with the exporter variable of a signal unset: turns OTLP on for
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   both signals, or for the one named
//	OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
//	OTEL_EXPORTER_OTLP_PROTOCOL        grpc or http/protobuf (default); the per-signal form wins
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL   (http/json is not supported)
//	OTEL_EXPORTER_OTLP_METRICS_PROTOCOL
//	OTEL_EXPORTER_PROMETHEUS_HOST      the Prometheus exporter's listener, default localhost
//	OTEL_EXPORTER_PROMETHEUS_PORT      an integer 0..65535, default 9464
//
// One default differs from the specification's: with no exporter variable
// and no OTLP endpoint set, nothing is exported (the specification says
// OTLP, which would try localhost:4318 and log connection errors into a
// developer's terminal). Setting only OTEL_EXPORTER_OTLP_ENDPOINT is
// enough to turn OTLP on for both signals. When nothing is exported the
// providers are no-op ones, spans cost next to nothing, and Shutdown
// returns at once; the propagator is installed all the same, so a request
// that arrives with a trace context passes it on to the services the
// program calls.
//
// The SDK and the exporters read the rest themselves: OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES (the service name wins over Start's
// argument), OTEL_TRACES_SAMPLER and its argument, OTEL_BSP_*,
// OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT, and the other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates, the endpoints themselves).
package setup
