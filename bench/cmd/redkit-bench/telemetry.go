package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/redkit-go/redkit/otelx/setup"
)

// otlpSink is an OTLP/HTTP receiver on loopback that reads and counts what
// it is sent and keeps nothing: the collector of a run whose redkit calls
// export their spans and metrics, so the run pays for building, batching,
// encoding and sending them as a service does.
type otlpSink struct {
	srv            *http.Server
	addr           string
	requests, size atomic.Int64
}

func startSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.size.Add(n)
		// An empty Export*ServiceResponse: nothing rejected.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// startTelemetry installs the OpenTelemetry SDK as a service's setup does
// (otelx/setup, OTLP over HTTP, every span sampled) exporting to a sink on
// loopback. The returned stop flushes, shuts down and reports what was
// exported.
func startTelemetry(ctx context.Context) (stop func(), err error) {
	stop, _, err = startTelemetryTo(ctx)
	return stop, err
}

func startTelemetryTo(ctx context.Context) (stop func(), sink *otlpSink, err error) {
	sink, err = startSink()
	if err != nil {
		return nil, nil, err
	}
	for k, v := range map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_METRICS_EXPORTER":       "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + sink.addr,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "always_on",
	} {
		if err := os.Setenv(k, v); err != nil {
			return nil, nil, err
		}
	}
	// A shell's per-signal settings would win over the ones above and take
	// the run's spans or metrics elsewhere.
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_TRACES_SAMPLER_ARG"} {
		if err := os.Unsetenv(k); err != nil {
			return nil, nil, err
		}
	}
	tel, err := setup.Start(ctx, "redkit-bench")
	if err != nil {
		_ = sink.srv.Close()
		return nil, nil, err
	}
	if !tel.Enabled() {
		_ = sink.srv.Close()
		return nil, nil, fmt.Errorf("the OpenTelemetry SDK was not installed (OTEL_SDK_DISABLED?)")
	}
	return func() {
		_ = tel.Shutdown(context.Background())
		_ = sink.srv.Close()
		fmt.Fprintf(os.Stderr, "redkit-bench: telemetry: %d OTLP exports, %.1f MB sent to the sink\n",
			sink.requests.Load(), float64(sink.size.Load())/1e6)
	}, sink, nil
}
