package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/examples/kit/auth"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/otelx/setup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The credential of a request, accepted or not, appears in none of the
// spans the service records: not in attributes, events or statuses.
func TestHandler_credentialNotInSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	a := &App{Name: "test", Tel: &setup.Telemetry{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()}}

	key, line, err := auth.NewKey("alice", "buy")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.ParseKeys(line)
	if err != nil {
		t.Fatal(err)
	}
	mux := httpx.NewMux("test", httpx.Edge{Auth: keys}, func(err error) error { return err })
	mux.Handle("POST /orders", "buy", func(w http.ResponseWriter, r *http.Request) error {
		return httpx.Errorf(http.StatusUnprocessableEntity, "sold_out", "sold out")
	})
	mux.Handle("POST /skus", "sale:admin", func(w http.ResponseWriter, r *http.Request) error { return nil })
	ts := httptest.NewServer(a.Handler(mux))
	t.Cleanup(ts.Close)

	guess := "rk_" + strings.Repeat("G", 43)
	for _, c := range []struct{ path, key string }{{"/orders", key}, {"/skus", key}, {"/orders", guess}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.key)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want one per request", len(spans))
	}
	for _, s := range spans {
		var all []string
		for _, kv := range s.Attributes() {
			all = append(all, string(kv.Key)+"="+kv.Value.String())
		}
		for _, e := range s.Events() {
			all = append(all, e.Name)
			for _, kv := range e.Attributes {
				all = append(all, string(kv.Key)+"="+kv.Value.String())
			}
		}
		all = append(all, s.Name(), s.Status().Description)
		text := strings.Join(all, " ")
		if strings.Contains(text, key) || strings.Contains(text, guess) || strings.Contains(text, "Bearer") {
			t.Errorf("span %s carries the credential: %s", s.Name(), text)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:0": true, "[::1]:80": true, "127.1.2.3:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestRate_Set(t *testing.T) {
	for in, want := range map[string]Rate{"5/s": {5, 1e9}, "300/m": {300, 60e9}, "2/h": {2, 3600e9}, "0": {}, "off": {}} {
		var r Rate
		if err := r.Set(in); err != nil || r != want {
			t.Errorf("%q: %+v, %v", in, r, err)
		}
	}
	for _, in := range []string{"5", "0/s", "-1/s", "5/d", "x/s", ""} {
		var r Rate
		if err := r.Set(in); err == nil {
			t.Errorf("%q accepted as %+v", in, r)
		}
	}
}
