package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

func TestMain(m *testing.M) {
	exampletest.SilenceRedisLog() // the fault tests make go-redis log every failed read
	goleak.VerifyTestMain(m)
}

// openInventory opens the inventory on rdb as run does.
func openInventory(t *testing.T, rdb redis.UniversalClient) *stock.Inventory {
	t.Helper()
	inv, err := stock.New(rdb, stock.WithKeyPrefix(keyPrefix), stock.WithReclaimInterval(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	return inv
}

// reportNumber reads one number of the printed report.
func reportNumber(t *testing.T, report, row string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(row) + `\s+(\S+)`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no %q row in the report:\n%s", row, report)
	}
	return m[1]
}

func TestRun_sale(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, _ redis.UniversalClient, url string) {
		t.Setenv(redisconn.Env, url)
		report, errs := exampletest.Run(t, run, "-stock", "60", "-buyers", "300", "-concurrency", "8",
			"-abandon", "0.3", "-reserve", "0.2", "-resend", "0.3")
		for row, want := range map[string]string{"units": "60", "oversold": "0", "limit violations": "0", "audit": "OK"} {
			if got := reportNumber(t, report, row); got != want {
				t.Errorf("%s = %s, want %s\n%s", row, got, want, report)
			}
		}
		if reportNumber(t, report, "holds reclaimed") == "0" {
			t.Errorf("no abandoned hold was reclaimed\n%s", report)
		}
		if m := regexp.MustCompile(`their (\d+) units went back to available`).FindStringSubmatch(report); m == nil || m[1] == "0" {
			t.Errorf("the report does not say how many units the expired holds gave back\n%s", report)
		}
		if strings.Contains(report, "PROBLEM") {
			t.Errorf("the report has problems:\n%s", report)
		}
		if !strings.Contains(errs, "flashsale: using") {
			t.Errorf("stderr lacks the line saying which Redis is used:\n%s", errs)
		}
	})
}

func TestSimulate(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		for _, buckets := range []int{1, 4} {
			inv := openInventory(t, rdb)
			cfg := defaultSale()
			cfg.Stock, cfg.Buyers, cfg.Concurrency, cfg.Buckets = 80, 400, 16, buckets
			cfg.Abandon, cfg.Reserve, cfg.Resend = 0.25, 0.25, 0.3
			var out bytes.Buffer
			r, err := simulate(t.Context(), rdb, inv, cfg, &out)
			if err != nil {
				t.Fatalf("%d buckets: %v", buckets, err)
			}
			r.print(&out)
			lv := r.Levels
			switch {
			case len(r.Problems) > 0:
				t.Errorf("problems: %q", r.Problems)
			case r.Oversold != 0, r.LimitViolations != 0, !r.Audit.OK():
				t.Errorf("oversold %d, limit violations %d, audit %v", r.Oversold, r.LimitViolations, r.Audit.Problems)
			case lv.Sold > cfg.Stock, lv.Sold+lv.Available+lv.Reserved != cfg.Stock, lv.Reserved != 0:
				t.Errorf("levels %+v do not add up to %d units", lv, cfg.Stock)
			case r.Told != lv.Sold:
				t.Errorf("buyers were told %d units, Redis sold %d", r.Told, lv.Sold)
			case r.Abandoned == 0 || r.Expired < int(r.Abandoned):
				t.Errorf("%d holds abandoned, %d reclaimed", r.Abandoned, r.Expired)
			case r.Replays == 0 || r.ReplayMismatches != 0:
				t.Errorf("%d replays, %d answered differently", r.Replays, r.ReplayMismatches)
			case r.SoldOut == 0:
				t.Errorf("400 buyers for 80 units, and nobody heard sold out")
			case r.Buyers != cfg.Buyers || r.Orders < int64(cfg.Buyers):
				t.Errorf("%d buyers shopped, %d orders", r.Buyers, r.Orders)
			case r.Journal != r.Audit.Entries:
				t.Errorf("journal consumer got %d entries, audit replayed %d", r.Journal, r.Audit.Entries)
			case r.Retried != 0:
				t.Errorf("%d calls failed on a healthy server; the first: %v", r.Retried, r.FirstRetried)
			}
			if t.Failed() {
				t.Fatalf("%d buckets:\n%s", buckets, &out)
			}
		}
	})
}

// On a Cluster, a SKU split into buckets spreads over the masters.
func TestRun_cluster(t *testing.T) {
	cl := redistest.NewCluster(t, redistest.ClusterOptions{})
	t.Setenv(redisconn.Env, strings.Join(cl.Addrs(), ","))
	var out bytes.Buffer
	err := run(t.Context(), []string{"-stock", "60", "-buyers", "300", "-concurrency", "8", "-buckets", "6",
		"-abandon", "0.3", "-resend", "0.3"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for row, want := range map[string]string{"oversold": "0", "limit violations": "0", "retried": "0", "audit": "OK"} {
		if got := reportNumber(t, out.String(), row); got != want {
			t.Errorf("%s = %s, want %s\n%s", row, got, want, &out)
		}
	}
}

// -duration stops letting buyers in; the report is still complete.
func TestRun_duration(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	var out bytes.Buffer
	err := run(t.Context(), []string{"-stock", "100", "-buyers", "1000000", "-duration", "300ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "stopped early") || reportNumber(t, out.String(), "audit") != "OK" {
		t.Fatalf("want a complete report of a sale stopped early:\n%s", &out)
	}
}

// A signal (the end of ctx) also stops the sale with a report.
func TestRun_interrupted(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out bytes.Buffer
	if err := run(ctx, []string{"-buyers", "1000000"}, &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "stopped early") || reportNumber(t, out.String(), "oversold") != "0" {
		t.Fatalf("want a complete report of a sale stopped early:\n%s", &out)
	}
}

func TestRun_usage(t *testing.T) {
	for _, args := range [][]string{
		{"-stock", "0"}, {"-hold", "500ms"}, {"-abandon", "0.7", "-reserve", "0.5"}, {"-buckets", "65"},
		{"-nope"}, {"extra"}, {"-concurrency", "0"}, {"-linger", "-1s"}, {"-serve", "127.0.0.1:0", "-linger", "-1s"},
	} {
		var errs bytes.Buffer
		if err := run(t.Context(), args, io.Discard, &errs); !errors.Is(err, app.ErrUsage) {
			t.Errorf("run %q = %v, want app.ErrUsage", args, err)
		} else if errs.Len() == 0 {
			t.Errorf("run %q said nothing on stderr", args)
		}
	}
	var errs bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, io.Discard, &errs); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs.String(), "-buckets") {
		t.Errorf("run -h = %v, want flag.ErrHelp and the flags on stderr:\n%s", err, &errs)
	}
}

// -serve serves until ctx ends, then shuts down cleanly.
func TestRun_serve(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	c := exampletest.NewClient(t, svc.URL).As(svc.AdminKey)
	c.Do(http.MethodPost, "/skus", "", `{"sku":"phone","stock":1}`).Want(t, http.StatusCreated, "")
	if err := svc.Stop(); err != nil {
		t.Fatalf("run -serve after shutdown: %v\n%s", err, svc.Log)
	}
}
