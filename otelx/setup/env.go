package setup

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// plan is what the environment asks Start for, each variable read as the
// OpenTelemetry environment variable specification says: an empty value
// is the same as an unset one; a boolean is true only for "true" in any
// case; enum values are trimmed and compared in any case, lists are
// deduplicated; a value that cannot be used is reported (a warning) and
// ignored, as if the variable were unset.
type plan struct {
	disabled      bool     // OTEL_SDK_DISABLED
	propagators   []string // OTEL_PROPAGATORS; empty: none
	traces        []string // span exporters: "otlp", "console"; empty: none
	metrics       []string // metric exporters: "otlp", "console", "prometheus"; empty: none
	tracesProto   string   // "grpc" or "http/protobuf"
	metricsProto  string
	promHost      string // OTEL_EXPORTER_PROMETHEUS_HOST, default localhost
	promPort      int    // OTEL_EXPORTER_PROMETHEUS_PORT, default 9464
	promAddrGiven bool   // either of the two is set (to a usable value)
}

// errEnv marks the warnings readEnv returns; Start hands them to the
// OpenTelemetry error handler (otel.Handle), which logs them.
var errEnv = errors.New("setup: environment")

func warnf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errEnv}, a...)...)
}

// The variables Start reads itself, and their defaults.
const (
	disabledVar       = "OTEL_SDK_DISABLED"
	propagatorsVar    = "OTEL_PROPAGATORS"
	tracesExporterVar = "OTEL_TRACES_EXPORTER"
	metricsExpVar     = "OTEL_METRICS_EXPORTER"
	otlpEndpointVar   = "OTEL_EXPORTER_OTLP_ENDPOINT"
	otlpProtocolVar   = "OTEL_EXPORTER_OTLP_PROTOCOL"
	promHostVar       = "OTEL_EXPORTER_PROMETHEUS_HOST"
	promPortVar       = "OTEL_EXPORTER_PROMETHEUS_PORT"

	defaultPromHost  = "localhost"
	defaultPromPort  = 9464
	defaultOTLPProto = "http/protobuf"
)

// The values each variable may have: those this package supports, and
// those the specification knows that it does not (a warning, then
// ignored, like an unknown value).
var (
	knownPropagators = []string{"tracecontext", "baggage", "b3", "b3multi"}
	otherPropagators = []string{"jaeger", "xray", "ottrace"}
	defaultProp      = []string{"tracecontext", "baggage"}
	knownSpanExps    = []string{"otlp", "console"}
	otherSpanExps    = []string{"zipkin", "logging", "otlp/stdout"}
	knownMetricExps  = []string{"otlp", "console", "prometheus"}
	otherMetricExps  = []string{"logging", "otlp/stdout"}
	knownOTLPProtos  = []string{"grpc", "http/protobuf"}
	otherOTLPProtos  = []string{"http/json"}
)

// readEnv reads every variable Start acts on through getenv and returns
// the plan and the warnings about values it ignored.
func readEnv(getenv func(string) string) (plan, []error) {
	var warns []error
	p := plan{promHost: defaultPromHost, promPort: defaultPromPort}

	switch v := getenv(disabledVar); {
	case strings.EqualFold(v, "true"):
		p.disabled = true
	case v == "", strings.EqualFold(v, "false"):
	default:
		warns = append(warns, warnf("%s=%q is not a boolean; read as false", disabledVar, v))
	}

	props, set, w := enumList(getenv, propagatorsVar, knownPropagators, otherPropagators)
	warns = append(warns, w...)
	if p.propagators = props; !set {
		p.propagators = defaultProp
	}

	// Exporters: the variable when it names one; unset (or naming nothing
	// usable), OTLP when an OTLP endpoint is configured, else nothing.
	// Unlike the specification's default ("otlp"), an empty environment
	// exports nothing.
	endpoint := func(signal string) bool {
		return strings.TrimSpace(getenv(otlpEndpointVar)) != "" ||
			strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT")) != ""
	}
	exps, set, w := enumList(getenv, tracesExporterVar, knownSpanExps, otherSpanExps)
	warns = append(warns, w...)
	if p.traces = exps; !set && endpoint("TRACES") {
		p.traces = []string{"otlp"}
	}
	exps, set, w = enumList(getenv, metricsExpVar, knownMetricExps, otherMetricExps)
	warns = append(warns, w...)
	if p.metrics = exps; !set && endpoint("METRICS") {
		p.metrics = []string{"otlp"}
	}

	var ws []error
	p.tracesProto, ws = protocol(getenv, "TRACES")
	warns = append(warns, ws...)
	p.metricsProto, ws = protocol(getenv, "METRICS")
	warns = append(warns, ws...)

	if h := strings.TrimSpace(getenv(promHostVar)); h != "" {
		p.promHost, p.promAddrGiven = h, true
	}
	if v := strings.TrimSpace(getenv(promPortVar)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			warns = append(warns, warnf("%s=%q is not a port (0..65535); ignored", promPortVar, v))
		} else {
			p.promPort, p.promAddrGiven = n, true
		}
	}
	return p, warns
}

// enumList reads a comma-separated list of enum values: trimmed, in any
// case, deduplicated in order. "none" anywhere means the empty list. An
// unknown value, or one this package does not support, is a warning and is
// left out; when nothing usable remains the variable counts as unset.
func enumList(getenv func(string) string, name string, known, unsupported []string) (vals []string, set bool, warns []error) {
	raw := getenv(name)
	if strings.TrimSpace(raw) == "" {
		return nil, false, nil
	}
	none := false
	for part := range strings.SplitSeq(raw, ",") {
		v := strings.ToLower(strings.TrimSpace(part))
		switch {
		case v == "":
		case v == "none":
			none = true
		case slices.Contains(known, v):
			if !slices.Contains(vals, v) {
				vals = append(vals, v)
			}
		case slices.Contains(unsupported, v):
			warns = append(warns, warnf("%s: %q is not supported; ignored", name, v))
		default:
			warns = append(warns, warnf("%s: unknown value %q; ignored", name, v))
		}
	}
	if none {
		return nil, true, warns
	}
	if len(vals) == 0 {
		warns = append(warns, warnf("%s=%q names nothing usable; read as unset", name, raw))
		return nil, false, warns
	}
	return vals, true, warns
}

// protocol returns the OTLP protocol of a signal: its own variable, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf; an unusable value is a
// warning and is read as unset.
func protocol(getenv func(string) string, signal string) (string, []error) {
	var warns []error
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", otlpProtocolVar} {
		raw := getenv(name)
		v := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case v == "":
		case slices.Contains(knownOTLPProtos, v):
			return v, warns
		case slices.Contains(otherOTLPProtos, v):
			warns = append(warns, warnf("%s: %q is not supported; ignored", name, raw))
		default:
			warns = append(warns, warnf("%s: unknown protocol %q; ignored", name, raw))
		}
	}
	return defaultOTLPProto, warns
}
