package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
)

// With Redis paused (SIGSTOP), every request that needs Redis is answered
// before the write timeout, 503 unavailable with Retry-After, and /status
// says what is wrong without saying where Redis is.
func TestRun_serve_pausedRedis(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	// Default flags (a write timeout of 15 s, so a request deadline of
	// 12 s), and a read timeout far past them: a client that waited for it
	// would leave the requests without an answer.
	t.Setenv(redisconn.Env, "redis://"+s.Addr()+"/?read_timeout=30s")
	keys := exampletest.WithKeys(t, "billing:ids")
	svc := exampletest.Serve(t, run, "-addr", "127.0.0.1:0", "-service", "paused")
	c := exampletest.NewClient(t, svc.URL).As(keys["billing"])
	c.Get("/id/sequence/invoices").Want(t, http.StatusOK, "")

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Resume() })
	paths := []string{"/id/sequence/invoices", "/id/segment/fresh", "/status"}
	replies := make([]exampletest.Reply, len(paths))
	var wg sync.WaitGroup
	for i, path := range paths {
		wg.Go(func() {
			r, err := c.Try("GET", path, "", "")
			if err != nil {
				t.Errorf("GET %s with Redis paused: no answer: %v", path, err)
			}
			replies[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, path := range paths[:2] {
		if r := replies[i].Want(t, http.StatusServiceUnavailable, "unavailable"); r.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", path)
		}
	}
	// The Snowflake lease is still valid, so /status may be healthy; what it
	// says must not tell where Redis is (the client checks every body).
	if st := replies[2]; st.Status != http.StatusOK && st.Status != http.StatusServiceUnavailable {
		t.Errorf("GET /status: %d %s", st.Status, st.Body)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c.Get("/id/sequence/invoices").Want(t, http.StatusOK, "")
}

// What clients send (Host, paths, names, headers, methods) never becomes a
// series: 1,000 requests with distinct ones, a few hundred new segment and
// sequence names among them, leave /metrics as it was, and /metrics, which
// needs metrics:read, names no Redis address.
func TestRun_serve_boundedSeries(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "")
	keys := exampletest.WithKeys(t, "billing:ids", "scraper:metrics:read")
	// The node lease is renewed in the background every third of its TTL,
	// which adds its series once: the first renewal comes before the
	// requests.
	// With the default -max-names (1,000), the requests below make a few
	// hundred names: no series may come with them.
	svc := exampletest.Serve(t, run, "-addr", "127.0.0.1:0", "-service", "bounded", "-lease-ttl", "6s")
	c := exampletest.NewClient(t, svc.URL)
	billing, scraper := c.As(keys["billing"]), c.As(keys["scraper"])
	billing.Get("/metrics").Want(t, http.StatusForbidden, "forbidden")
	for {
		if _, body := scraper.MetricSeries(); strings.Contains(body, `redkit_operation="renew"`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	exampletest.RequireBoundedSeries(t, billing, scraper, func(c *exampletest.Client, i int) error {
		path := []string{
			fmt.Sprintf("/id/segment/name-%d?n=%d", i, i%5+1),
			fmt.Sprintf("/id/sequence/shop-%d/seq-%d", i, i),
			fmt.Sprintf("/id/snowflake?n=%d&tag=%d", i%3+1, i),
		}[i%3]
		_, err := c.Try("GET", path, "", "")
		return err
	})
	if _, body := scraper.MetricSeries(); strings.Contains(body, strconv.Itoa(s.Port())) {
		t.Errorf("GET /metrics tells where Redis is (%s)", s.Addr())
	}
}
