package setup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// envCase is one row of a table: the environment (every other variable
// unset), and what readEnv must make of it.
type envCase struct {
	env   map[string]string
	check func(t *testing.T, p plan)
	warns int // warnings expected
}

func runEnv(t *testing.T, cases map[string]envCase) {
	t.Helper()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p, warns := readEnv(func(k string) string { return c.env[k] })
			c.check(t, p)
			assert.Len(t, warns, c.warns, "warnings: %v", warns)
		})
	}
}

// OTEL_SDK_DISABLED is a boolean: true only for "true" in any case; any
// other value but "false" and empty is a warning and reads as false. It
// does not touch the propagators.
func TestReadEnv_OTEL_SDK_DISABLED(t *testing.T) {
	disabled := func(want bool) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) {
			assert.Equal(t, want, p.disabled)
			assert.Equal(t, []string{"tracecontext", "baggage"}, p.propagators, "propagators stay")
		}
	}
	runEnv(t, map[string]envCase{
		"unset":  {nil, disabled(false), 0},
		"empty":  {map[string]string{disabledVar: ""}, disabled(false), 0},
		"true":   {map[string]string{disabledVar: "true"}, disabled(true), 0},
		"TRUE":   {map[string]string{disabledVar: "TRUE"}, disabled(true), 0},
		"True":   {map[string]string{disabledVar: "True"}, disabled(true), 0},
		"false":  {map[string]string{disabledVar: "false"}, disabled(false), 0},
		"FALSE":  {map[string]string{disabledVar: "FALSE"}, disabled(false), 0},
		"1":      {map[string]string{disabledVar: "1"}, disabled(false), 1},
		"yes":    {map[string]string{disabledVar: "yes"}, disabled(false), 1},
		"spaced": {map[string]string{disabledVar: " true"}, disabled(false), 1},
	})
}

// OTEL_PROPAGATORS is a list of enum values, default tracecontext,baggage:
// trimmed, any case, deduplicated; none means none; an unknown or
// unsupported value is a warning and left out; nothing usable reads as
// unset (the default).
func TestReadEnv_OTEL_PROPAGATORS(t *testing.T) {
	props := func(want ...string) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) { assert.Equal(t, want, p.propagators) }
	}
	env := func(v string) map[string]string { return map[string]string{propagatorsVar: v} }
	runEnv(t, map[string]envCase{
		"unset":             {nil, props("tracecontext", "baggage"), 0},
		"empty":             {env(""), props("tracecontext", "baggage"), 0},
		"blank":             {env("  "), props("tracecontext", "baggage"), 0},
		"b3":                {env("b3"), props("b3"), 0},
		"b3multi":           {env("b3multi"), props("b3multi"), 0},
		"order kept":        {env("baggage,tracecontext"), props("baggage", "tracecontext"), 0},
		"case and spaces":   {env(" TraceContext , B3 "), props("tracecontext", "b3"), 0},
		"deduplicated":      {env("b3,tracecontext,b3,TRACECONTEXT"), props("b3", "tracecontext"), 0},
		"empty items":       {env("tracecontext,,"), props("tracecontext"), 0},
		"none":              {env("none"), props(), 0},
		"NONE":              {env("NONE"), props(), 0},
		"none among others": {env("tracecontext,none"), props(), 0},
		"unknown left out":  {env("tracecontext,carrier-pigeon"), props("tracecontext"), 1},
		"unsupported":       {env("jaeger,baggage"), props("baggage"), 1},
		"nothing usable":    {env("carrier-pigeon"), props("tracecontext", "baggage"), 2},
	})
}

// OTEL_TRACES_EXPORTER is a list of enum values ("otlp", "console",
// "none"). Unset, or naming nothing usable, it is OTLP when an OTLP
// endpoint is set and nothing otherwise: the one default that differs from
// the specification's.
func TestReadEnv_OTEL_TRACES_EXPORTER(t *testing.T) {
	traces := func(want ...string) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) { assert.Equal(t, want, p.traces) }
	}
	env := func(v string, more ...string) map[string]string {
		m := map[string]string{tracesExporterVar: v}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	runEnv(t, map[string]envCase{
		"unset":                 {nil, traces(), 0},
		"empty":                 {env(""), traces(), 0},
		"unset with endpoint":   {env("", otlpEndpointVar, "http://127.0.0.1:4318"), traces("otlp"), 0},
		"otlp":                  {env("otlp"), traces("otlp"), 0},
		"OTLP":                  {env(" OTLP "), traces("otlp"), 0},
		"console":               {env("console"), traces("console"), 0},
		"list":                  {env("console,otlp,console"), traces("console", "otlp"), 0},
		"none":                  {env("none", otlpEndpointVar, "http://127.0.0.1:4318"), traces(), 0},
		"unknown":               {env("carrier-pigeon"), traces(), 2},
		"unknown with endpoint": {env("carrier-pigeon", otlpEndpointVar, "http://x:4318"), traces("otlp"), 2},
		"zipkin unsupported":    {env("zipkin,console"), traces("console"), 1},
		"logging unsupported":   {env("logging"), traces(), 2},
	})
}

// OTEL_METRICS_EXPORTER: the same rules, with "prometheus" too.
func TestReadEnv_OTEL_METRICS_EXPORTER(t *testing.T) {
	metrics := func(want ...string) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) { assert.Equal(t, want, p.metrics) }
	}
	env := func(v string, more ...string) map[string]string {
		m := map[string]string{metricsExpVar: v}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	runEnv(t, map[string]envCase{
		"unset":               {nil, metrics(), 0},
		"empty":               {env(""), metrics(), 0},
		"unset with endpoint": {env("", otlpEndpointVar, "http://127.0.0.1:4318"), metrics("otlp"), 0},
		"prometheus":          {env("Prometheus"), metrics("prometheus"), 0},
		"list":                {env("prometheus, console"), metrics("prometheus", "console"), 0},
		"none":                {env("none"), metrics(), 0},
		"none wins":           {env("otlp,none", otlpEndpointVar, "http://x:4318"), metrics(), 0},
		"unknown":             {env("statsd"), metrics(), 2},
		"unknown left out":    {env("statsd,otlp"), metrics("otlp"), 1},
	})
}

// The OTLP endpoint variables only matter, to Start, while the exporter
// variable is unset: an endpoint for all signals or for one. Blank reads
// as unset.
func TestReadEnv_OTEL_EXPORTER_OTLP_ENDPOINT(t *testing.T) {
	signals := func(traces, metrics bool) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) {
			assert.Equal(t, traces, len(p.traces) == 1 && p.traces[0] == "otlp", "traces")
			assert.Equal(t, metrics, len(p.metrics) == 1 && p.metrics[0] == "otlp", "metrics")
		}
	}
	runEnv(t, map[string]envCase{
		"unset":        {nil, signals(false, false), 0},
		"blank":        {map[string]string{otlpEndpointVar: " "}, signals(false, false), 0},
		"both signals": {map[string]string{otlpEndpointVar: "http://c:4318"}, signals(true, true), 0},
		"traces only":  {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, signals(true, false), 0},
		"metrics only": {map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, signals(false, true), 0},
		"exporter var wins": {map[string]string{otlpEndpointVar: "http://c:4318", tracesExporterVar: "console"},
			func(t *testing.T, p plan) { assert.Equal(t, []string{"console"}, p.traces) }, 0},
	})
}

// OTEL_EXPORTER_OTLP_PROTOCOL and its per-signal forms are enums ("grpc",
// "http/protobuf"; default http/protobuf), the signal's own winning; an
// unusable value (http/json, which the Go exporters lack, or an unknown
// one) is a warning and reads as unset.
func TestReadEnv_OTEL_EXPORTER_OTLP_PROTOCOL(t *testing.T) {
	protos := func(traces, metrics string) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) {
			assert.Equal(t, traces, p.tracesProto, "traces")
			assert.Equal(t, metrics, p.metricsProto, "metrics")
		}
	}
	const hp, g = "http/protobuf", "grpc"
	runEnv(t, map[string]envCase{
		"unset":           {nil, protos(hp, hp), 0},
		"grpc":            {map[string]string{otlpProtocolVar: "grpc"}, protos(g, g), 0},
		"GRPC":            {map[string]string{otlpProtocolVar: " GRPC "}, protos(g, g), 0},
		"signal wins":     {map[string]string{otlpProtocolVar: "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}, protos(g, hp), 0},
		"traces only":     {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, protos(g, hp), 0},
		"http/json":       {map[string]string{otlpProtocolVar: "http/json"}, protos(hp, hp), 2},
		"bad signal, ok":  {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp", otlpProtocolVar: "grpc"}, protos(g, g), 1},
		"unknown general": {map[string]string{otlpProtocolVar: "carrier-pigeon"}, protos(hp, hp), 2},
	})
}

// OTEL_EXPORTER_PROMETHEUS_HOST (a string, default localhost) and
// OTEL_EXPORTER_PROMETHEUS_PORT (an integer 0..65535, default 9464): blank
// reads as unset; a port that is not one is a warning and reads as unset.
// Either, set, gives the exporter its own listener.
func TestReadEnv_OTEL_EXPORTER_PROMETHEUS(t *testing.T) {
	addr := func(host string, port int, given bool) func(t *testing.T, p plan) {
		return func(t *testing.T, p plan) {
			assert.Equal(t, host, p.promHost)
			assert.Equal(t, port, p.promPort)
			assert.Equal(t, given, p.promAddrGiven)
		}
	}
	runEnv(t, map[string]envCase{
		"unset":          {nil, addr("localhost", 9464, false), 0},
		"blank":          {map[string]string{promHostVar: " ", promPortVar: ""}, addr("localhost", 9464, false), 0},
		"host":           {map[string]string{promHostVar: "127.0.0.1"}, addr("127.0.0.1", 9464, true), 0},
		"port":           {map[string]string{promPortVar: "9500"}, addr("localhost", 9500, true), 0},
		"port spaced":    {map[string]string{promPortVar: " 9500 "}, addr("localhost", 9500, true), 0},
		"port zero":      {map[string]string{promPortVar: "0"}, addr("localhost", 0, true), 0},
		"port negative":  {map[string]string{promPortVar: "-1"}, addr("localhost", 9464, false), 1},
		"port too large": {map[string]string{promPortVar: "65536"}, addr("localhost", 9464, false), 1},
		"port words":     {map[string]string{promPortVar: "http"}, addr("localhost", 9464, false), 1},
	})
}
