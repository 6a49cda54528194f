package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// scrapeInterval is how often the test's Prometheus scrapes the sale, and
// how long a scrape may take: a scrape of the -race binary during the sale
// on a loaded 2-core machine can take longer than 250 ms.
const scrapeInterval = 500 * time.Millisecond

// rateWindow stands for the dashboard's $__rate_interval (4 scrapes, as
// Grafana's rule for it).
const rateWindow = 2 * time.Second

// dashboardFile is the Grafana dashboard shipped beside the examples.
const dashboardFile = "../grafana/redkit.json"

// TestPrometheus_flashSale runs the flash sale with the Prometheus exporter
// (OTEL_METRICS_EXPORTER=prometheus on OTEL_EXPORTER_PROMETHEUS_HOST/_PORT)
// against a real redis-server, has a real prometheus scrape it, and asks
// Prometheus's HTTP API what a dashboard would:
//
//   - histogram_quantile's p99 of Deduct lies within a factor of 2 of the
//     p99 the sale's buyers measured themselves (with the SDK's default
//     buckets, in seconds, it answers several seconds for a sub-millisecond
//     call);
//   - the units-sold counter equals the units the sale reports sold;
//   - every PromQL expression of the Grafana dashboard returns a series.
//
// The sale uses no lock, so a few goroutines contend for one lock in the
// same process meanwhile (through the global providers the sale
// installed), to give the dashboard's lock panels their series.
//
// It needs the prometheus binary (Debian's prometheus package, which make
// deps installs); without it the test is skipped, unless
// REDKIT_REQUIRE_PROMETHEUS=1 (set by make test) makes that a failure.
func TestPrometheus_flashSale(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("REDKIT_REQUIRE_PROMETHEUS") == "1" {
			t.Fatal("prometheus is not on PATH; make deps installs Debian's prometheus package")
		}
		t.Skip("prometheus is not on PATH (make deps installs it)")
	}
	srv := redistest.New(t, redistest.Options{})
	metricsPort, promPort := freePort(t), freePort(t)
	t.Setenv(redisconn.Env, srv.Addr())
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", strconv.Itoa(metricsPort))

	prom := startPrometheus(t, bin, promPort, metricsPort)
	// Prometheus applies a new scrape target a few seconds after it
	// starts; the sale starts once the exporter's port is being scraped.
	prom.waitForScrapeAfter(t, time.Time{}, false)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs exampletest.SyncBuffer
	saleStart := time.Now()
	runErr := make(chan error, 1)
	go func() {
		// -linger keeps the exporter up after the report until cancel.
		runErr <- run(ctx, []string{"-stock", "1500", "-buyers", "2500", "-concurrency", "16",
			"-abandon", "0.1", "-reserve", "0.1", "-resend", "0.1", "-linger", "2m"}, &out, &errs)
	}()
	// The lock below takes the global meter provider when it is made: only
	// once the run has installed its own (an earlier test of this package
	// left a provider of its own there, shut down since). The run's stock
	// series on the exporter say it has.
	waitForSeries(t, metricsPort, "redkit_stock_", runErr)
	stopLocks := contendForALock(t, srv)

	report := waitForReport(t, &out, &errs, runErr)
	stopLocks()
	reported := time.Now()
	// A rate needs two samples in its window: a series that first appears
	// just before the report (the reclaimer's, say) has them once the
	// scrapes have covered a whole window after it.
	prom.waitForScrapeAfter(t, reported.Add(rateWindow), true)
	t.Logf("the sale's report:\n%s", report)

	// The units-sold counter against the sale's own count.
	sold := reportNumber(t, report, "sold")
	got := prom.scalar(t, `sum(redkit_stock_units_sold_total)`)
	if strconv.FormatFloat(got, 'f', -1, 64) != sold {
		t.Errorf("Prometheus says %v units sold, the sale reports %s\n%s", got, sold, report)
	}

	// Deduct's p99 over the whole sale from the histogram, against the
	// buyers' own measurement.
	measured := deductP99(t, report)
	p99 := prom.scalar(t, `histogram_quantile(0.99, sum by (le) (redkit_stock_operation_duration_seconds_bucket{redkit_operation="deduct"}))`)
	t.Logf("Deduct p99: buyers measured %v, histogram_quantile says %v", measured, time.Duration(p99*float64(time.Second)))
	if ratio := p99 / measured.Seconds(); !(ratio >= 0.5 && ratio <= 2) {
		t.Errorf("histogram_quantile p99 of Deduct = %.6fs, the buyers measured %v: not within a factor of 2", p99, measured)
	}

	// Every expression of the dashboard returns a series over the sale and
	// the scrapes after it.
	for _, expr := range dashboardExprs(t) {
		q := strings.ReplaceAll(expr, "$__rate_interval", rateWindow.String())
		if n := prom.seriesOver(t, q, saleStart, time.Now()); n == 0 {
			t.Errorf("dashboard expression returned no series over the sale: %s", expr)
		}
	}

	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("run: %v\n%s", err, &errs)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// promServer is a prometheus process scraping the sale.
type promServer struct {
	base string // http://127.0.0.1:port
}

// startPrometheus starts prometheus on loopback with a scrape config for
// the exporter on metricsPort, and waits until it is ready.
func startPrometheus(t *testing.T, bin string, port, metricsPort int) *promServer {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: flashsale
    static_configs:
      - targets: ["127.0.0.1:%d"]
`, scrapeInterval, scrapeInterval, metricsPort)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var log exampletest.SyncBuffer
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus log:\n%s", &log)
		}
	})
	p := &promServer{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", &log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", &log)
		}
	}
}

type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// api calls a Prometheus query endpoint and returns its result vector or
// matrix.
func (p *promServer) api(t *testing.T, path string, params url.Values) []promResult {
	t.Helper()
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promResult `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("%s %v: %s %s (%v)", path, params, r.Status, r.Error, err)
	}
	return r.Data.Result
}

// scalar runs an instant query that must return exactly one sample.
func (p *promServer) scalar(t *testing.T, q string) float64 {
	t.Helper()
	res := p.api(t, "/api/v1/query", url.Values{"query": {q}})
	if len(res) != 1 {
		t.Fatalf("%s: %d series, want 1: %v", q, len(res), res)
	}
	v, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
	if err != nil || math.IsNaN(v) {
		t.Fatalf("%s = %v (%v)", q, res[0].Value, err)
	}
	return v
}

// seriesOver runs a range query from start to end and returns how many
// series it found.
func (p *promServer) seriesOver(t *testing.T, q string, start, end time.Time) int {
	t.Helper()
	return len(p.api(t, "/api/v1/query_range", url.Values{"query": {q},
		"start": {unixSeconds(start)}, "end": {unixSeconds(end)}, "step": {scrapeInterval.String()}}))
}

// waitForScrapeAfter waits until Prometheus has scraped the exporter (up,
// or only tried to when up is false) more than one scrape interval after
// at, so the values of at are stored.
func (p *promServer) waitForScrapeAfter(t *testing.T, at time.Time, up bool) {
	t.Helper()
	q := `timestamp(up{job="flashsale"})`
	if up {
		q = `timestamp(up{job="flashsale"} == 1)`
	}
	// The wait is counted from at (which may lie ahead) and is generous: on
	// a loaded machine a scrape of the -race binary can time out, and up
	// is 1 again only at a later scrape.
	deadline := time.Now().Add(time.Minute)
	if at.After(time.Now()) {
		deadline = at.Add(time.Minute)
	}
	var last any
	for time.Now().Before(deadline) {
		res := p.api(t, "/api/v1/query", url.Values{"query": {q}})
		last = res
		if len(res) == 1 {
			ts, _ := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
			if ts > float64(at.Add(scrapeInterval).UnixNano())/1e9 {
				return
			}
		}
		time.Sleep(scrapeInterval / 2)
	}
	t.Fatalf("Prometheus did not scrape the sale after %v within a minute (last answer to %s: %v)", at, q, last)
}

func unixSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// waitForReport waits for the sale's closing report (its audit row) and
// returns stdout.
func waitForReport(t *testing.T, out, errs *exampletest.SyncBuffer, runErr <-chan error) string {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		if s := out.String(); strings.Contains(s, "\n  audit ") {
			return s
		}
		select {
		case err := <-runErr:
			t.Fatalf("run ended before its report: %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
		case <-deadline:
			t.Fatalf("no report after 2 minutes:\n%s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deductP99 reads the buyers' own p99 of Deduct from the report.
func deductP99(t *testing.T, report string) time.Duration {
	t.Helper()
	_, rest, ok := strings.Cut(report, "Deduct alone p99 ")
	if !ok {
		t.Fatalf("no Deduct p99 in the report:\n%s", report)
	}
	d, err := time.ParseDuration(strings.Fields(rest)[0])
	if err != nil || d <= 0 {
		t.Fatalf("Deduct p99 %q: %v", strings.Fields(rest)[0], err)
	}
	return d
}

// dashboardExprs returns every PromQL expression of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no expressions")
	}
	return out
}

// waitForSeries waits until the exporter on port shows a series whose name
// starts with prefix, or fails the test when run ends first.
func waitForSeries(t *testing.T, port int, prefix string, runErr <-chan error) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if strings.Contains(string(body), "\n"+prefix) {
				return
			}
		}
		select {
		case err := <-runErr:
			t.Fatalf("the run ended before its exporter showed %s series: %v", prefix, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("the exporter on port %d shows no %s series after a minute", port, prefix)
}

// contendForALock has a few goroutines take turns on one lock, through
// the global telemetry providers, until the returned func is called.
func contendForALock(t *testing.T, srv *redistest.Server) (stop func()) {
	t.Helper()
	rdb := srv.Client()
	locks, err := lock.New(rdb, lock.WithKeyPrefix("flashsale-test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			m := locks.Mutex("hot", lock.WithTTL(time.Second))
			for ctx.Err() == nil {
				l, err := m.Acquire(ctx)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("acquire: %v", err)
					}
					return
				}
				time.Sleep(2 * time.Millisecond)
				_ = l.Release(context.Background())
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			_ = locks.Close()
			_ = rdb.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// With OTEL_METRICS_EXPORTER=prometheus and no host or port of its own,
// the served flash sale answers GET /metrics on its own server, to a key
// with metrics:read (the generated admin key has it), and the series carry
// no SKU, order or buyer.
func TestRun_serve_sharedMetrics(t *testing.T) {
	noKeys(t)
	t.Setenv(redisconn.Env, "")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	admin := exampletest.NewClient(t, svc.URL).As(svc.AdminKey)
	admin.Do("POST", "/skus", "", `{"sku":"secret-sku","stock":3}`).Want(t, http.StatusCreated, "")
	admin.Do("POST", "/skus/secret-sku/orders", "secret-order", `{"qty":1}`).Want(t, http.StatusOK, "")

	exampletest.NewClient(t, svc.URL).Get("/metrics").Want(t, http.StatusUnauthorized, "unauthenticated")
	m := admin.Get("/metrics")
	if m.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", m.Status, m.Body)
	}
	for _, want := range []string{`redkit_stock_operation_duration_seconds_bucket{`, `redkit_operation="deduct"`, `redkit_stock_units_sold_total{`} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("GET /metrics lacks %s:\n%s", want, m.Body)
		}
	}
	if strings.Contains(m.Body, "secret") {
		t.Errorf("GET /metrics names a SKU, order or buyer:\n%s", m.Body)
	}
}

// With the console exporters the program's standard output stays its
// report: spans and metrics go to standard error.
func TestRun_consoleTelemetryOnStderr(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	capture := func(f **os.File) (restore func() string) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		old := *f
		*f = w
		var b strings.Builder
		done := make(chan struct{})
		go func() { _, _ = io.Copy(&b, r); close(done) }()
		return func() string {
			*f = old
			_ = w.Close()
			<-done
			return b.String()
		}
	}
	stdout, stderr := capture(&os.Stdout), capture(&os.Stderr)
	var report strings.Builder
	err := run(t.Context(), []string{"-stock", "20", "-buyers", "40", "-concurrency", "4"}, &report, io.Discard)
	toStderr, toStdout := stderr(), stdout()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if toStdout != "" {
		t.Errorf("telemetry on standard output (%d bytes): %.300s", len(toStdout), toStdout)
	}
	if !strings.Contains(toStderr, `"Name":"stock.deduct"`) {
		t.Errorf("no stock.deduct span on standard error: %.300s", toStderr)
	}
}
