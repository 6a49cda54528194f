package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/otelx/setup"
	"github.com/redkit-go/redkit/redistest"
)

// attrsOf collects every attribute value the reader holds, by metric.
func attrsOf(t *testing.T, r *sdkmetric.ManualReader) map[string][]attribute.Set {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]attribute.Set{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], p.Attributes)
				}
			}
		}
	}
	return out
}

// Handler's spans and its duration histogram carry only what the service
// decides (method, route, status, scheme): requests with a thousand
// hosts, paths, agents, forwarded addresses and methods make one series
// per route and status, and a traceparent becomes a link, not a parent.
func TestHandler_attributesFromTheServiceOnly(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()); _ = mp.Shutdown(t.Context()) })
	a := &App{Name: "test", Tel: &setup.Telemetry{TracerProvider: tp, MeterProvider: mp}}
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as setup.Start does
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		httpx.SetRoute(r.Context(), "GET /items/{id}")
		w.WriteHeader(http.StatusNoContent)
	})
	ts := httptest.NewServer(a.Handler(mux))
	t.Cleanup(ts.Close)
	const n = 200
	for i := range n {
		method, path := "GET", fmt.Sprintf("/items/item-%d?q=%d", i, i)
		if i%2 == 1 {
			method, path = fmt.Sprintf("M%d", i), fmt.Sprintf("/other-%d", i)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.URL+path, nil)
		req.Host = fmt.Sprintf("h%d.client.example:%d", i, 2000+i)
		req.Header.Set("User-Agent", fmt.Sprintf("agent-%d", i))
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.9.%d.%d", i/256, i%256))
		req.Header.Set("Traceparent", fmt.Sprintf("00-%032x-%016x-01", i+1, i+1))
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	series := attrsOf(t, reader)["http.server.request.duration"]
	var got []string
	for _, s := range series {
		got = append(got, s.Encoded(attribute.DefaultEncoder()))
	}
	if len(series) != 2 {
		t.Fatalf("%d series after %d requests with distinct hosts, paths and methods, want 2:\n%s", len(series), n, strings.Join(got, "\n"))
	}
	for _, want := range []string{
		"http.request.method=GET,http.response.status_code=204,http.route=/items/{id},url.scheme=http",
		"http.request.method=_OTHER,http.response.status_code=404,url.scheme=http",
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("no series %s in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	spans := rec.Ended()
	if len(spans) != n {
		t.Fatalf("%d spans, want %d", len(spans), n)
	}
	names := map[string]bool{}
	for _, s := range spans {
		names[s.Name()] = true
		if len(s.Attributes()) > 4 {
			t.Errorf("span %s has attributes beyond method, route, status and scheme: %v", s.Name(), s.Attributes())
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, "client.example") || strings.Contains(v, "item-") || strings.Contains(v, "agent-") || strings.Contains(v, "10.9.") {
				t.Errorf("span %s: %s=%s comes from the request", s.Name(), kv.Key, v)
			}
		}
		if s.Parent().IsValid() || len(s.Links()) != 1 {
			t.Errorf("span %s: parent %v, %d links; want a root linked to the request's trace context", s.Name(), s.Parent(), len(s.Links()))
		}
	}
	if len(names) != 2 || !names["GET /items/{id}"] || !names["HTTP"] {
		t.Errorf("span names %v, want GET /items/{id} and HTTP", names)
	}
}

// The go-redis pool metrics name the pool "redis", not by the server's
// address.
func TestPoolName_notTheAddress(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(t.Context()) })
	if err := otelx.InstrumentRedis(rdb, otelx.Providers{Meter: newPoolNameMeterProvider(mp)}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	all := attrsOf(t, reader)
	if len(all) == 0 {
		t.Fatal("no pool metrics")
	}
	for name, sets := range all {
		for _, set := range sets {
			if v, ok := set.Value("pool.name"); !ok || v.AsString() != poolName {
				t.Errorf("%s: pool.name %q, want %q (%s)", name, v.AsString(), poolName, set.Encoded(attribute.DefaultEncoder()))
			}
			if strings.Contains(set.Encoded(attribute.DefaultEncoder()), s.Addr()) {
				t.Errorf("%s names the server: %s", name, set.Encoded(attribute.DefaultEncoder()))
			}
		}
	}
}

// Requests whose paths, queries, hosts and agents all differ, to a route the
// handler does not name (no httpx.SetRoute), leave none of that in spans or
// metrics, make one series, and the duration histogram is in seconds with
// otelx.DurationBuckets, as every redkit duration histogram.
func TestHandler_durationHistogram_oneSeriesInSeconds(t *testing.T) {
	rec := otelxtest.New(t)
	a := &App{Name: "test", Tel: &setup.Telemetry{TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /accounts/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	h := a.Handler(mux)
	for i := range 20 {
		r := httptest.NewRequest("GET", fmt.Sprintf("/accounts/acct-secret-%d?token=tok-%d", i, i), nil)
		r.Host = fmt.Sprintf("host-%d.attacker.example:%d", i, 1000+i)
		r.Header.Set("User-Agent", fmt.Sprintf("ua-%d", i))
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	out, _ := rec.Strings(t)
	var leaks []string
	for _, s := range out {
		if strings.Contains(s, "acct-secret") || strings.Contains(s, "attacker") || strings.Contains(s, "tok-") || strings.Contains(s, "ua-") {
			leaks = append(leaks, s)
		}
	}
	slices.Sort(leaks)
	leaks = slices.Compact(leaks)
	if len(leaks) > 0 {
		t.Errorf("telemetry holds request data (IDs in paths, Host headers, tokens): %d distinct values, e.g. %v", len(leaks), leaks[:min(8, len(leaks))])
	}
	var rm metricdata.ResourceMetrics
	if err := rec.Reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	histograms := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			histograms++
			if len(h.DataPoints) != 1 {
				t.Errorf("%s has %d series for one route, want 1", m.Name, len(h.DataPoints))
			}
			if m.Unit != "s" {
				t.Errorf("%s has unit %q, want s", m.Name, m.Unit)
			}
			for _, p := range h.DataPoints {
				if !slices.Equal(p.Bounds, otelx.DurationBuckets) {
					t.Errorf("%s (unit %s) has bounds %v, want otelx.DurationBuckets", m.Name, m.Unit, p.Bounds)
				}
			}
		}
	}
	if histograms == 0 {
		t.Error("no duration histogram recorded")
	}
}
