// Command flashsale is a flash-sale service built on redkit's stock and idgen
// modules: a hot SKU with limited stock, a per-buyer limit, idempotent orders,
// reservations that expire on the Redis server's clock, a journal consumer and
// an audit of the books.
//
// Without arguments it simulates a sale and exits: many concurrent buyers
// deduct directly, reserve and confirm, or reserve and walk away (the
// reclaimer returns their units), and some re-send an order as a client would
// after a lost reply. It then prints what happened and checks it: nothing
// oversold, no buyer over the limit, every abandoned hold reclaimed, every
// re-sent order answered as the first time, and Audit clean.
//
//	go run ./examples/flashsale                        # embedded in-process Redis
//	go run ./examples/flashsale -buckets 8 -abandon 0.2
//	REDIS_URL=redis://localhost:6379 go run ./examples/flashsale
//	REDIS_URL=10.0.0.1:7000,10.0.0.2:7000 go run ./examples/flashsale   # a Redis Cluster
//
// With -serve it is an HTTP service instead (see server.go for the routes):
//
//	go run ./examples/flashsale -serve :8080
//	curl -X POST localhost:8080/skus -d '{"sku":"phone","stock":100,"limit":2}'
//	curl -X POST localhost:8080/skus/phone/orders -H 'Idempotency-Key: o-1' -d '{"buyer":"alice","qty":1}'
//
// REDIS_URL names a server ("redis://", "rediss://", "unix://" or host:port;
// a Cluster node is recognised) or, as a comma list, a Cluster's nodes; with
// it unset an embedded Redis is used. Keys start with "flashsale:". Telemetry
// is exported only when OTEL_* variables ask for it (OTEL_TRACES_EXPORTER=console,
// OTEL_EXPORTER_OTLP_ENDPOINT=..., see otelx/setup).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redkit-go/redkit/examples/internal/app"
	"github.com/redkit-go/redkit/examples/internal/redisconn"
	"github.com/redkit-go/redkit/stock"
)

// keyPrefix starts every key the service writes.
const keyPrefix = "flashsale"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // after the first signal, a second one kills at once
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// errUsage reports bad flags; the flag package has already said why.
var errUsage = errors.New("usage")

// run is the whole program: main only adds the signals and the exit code.
// It returns an error when the simulated sale broke one of its checks.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flashsale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := defaultSale()
	fs.Int64Var(&cfg.Stock, "stock", cfg.Stock, "units of the hot SKU")
	fs.IntVar(&cfg.Buyers, "buyers", cfg.Buyers, "buyers who come to the sale")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "buyers shopping at the same time")
	fs.Int64Var(&cfg.Limit, "limit", cfg.Limit, "units one buyer may hold or buy (0: no limit)")
	fs.IntVar(&cfg.Buckets, "buckets", cfg.Buckets, "split the SKU into this many buckets (stock.WithBuckets), 1.."+fmt.Sprint(stock.MaxBuckets))
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "stop letting buyers in after this long (0: when all have shopped)")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "how long a reservation holds units (at least 1s)")
	fs.Float64Var(&cfg.Abandon, "abandon", cfg.Abandon, "fraction of orders reserved and then abandoned")
	fs.Float64Var(&cfg.Reserve, "reserve", cfg.Reserve, "fraction of orders reserved and then confirmed")
	fs.Float64Var(&cfg.Resend, "resend", cfg.Resend, "fraction of orders sent twice, as after a lost reply")
	serve := fs.String("serve", "", "serve HTTP on this address (\":8080\") instead of simulating a sale")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flashsale: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *serve == "" {
		if err := cfg.check(); err != nil {
			fmt.Fprintln(stderr, "flashsale:", err)
			return errUsage
		}
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	a, err := app.Start(ctx, "flashsale", os.Getenv(redisconn.Env), log)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cerr := a.Close(cctx); cerr != nil {
			log.Warn("flashsale: close", "err", cerr)
		}
	}()
	// The reclaimer returns the units of expired holds a few times a second;
	// correctness never depends on it (an order reclaims them first).
	inv := stock.New(a.Redis.Client, stock.WithKeyPrefix(keyPrefix), stock.WithReclaimInterval(250*time.Millisecond))
	defer inv.Close()
	if !a.Redis.Embedded {
		warnRiskySettings(ctx, inv, log)
	}

	if *serve != "" {
		return a.Serve(ctx, *serve, newServer(inv, log), nil)
	}
	rep, err := simulate(ctx, a.Redis.Client, inv, cfg, stdout)
	if err != nil {
		return err
	}
	rep.print(stdout)
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%d check(s) failed: %v", len(rep.Problems), rep.Problems)
	}
	return nil
}

// warnRiskySettings logs the Redis settings that decide what a crash or
// memory pressure can lose (eviction, AOF, fsync). A production service might
// refuse to start on them instead.
func warnRiskySettings(ctx context.Context, inv *stock.Inventory, log *slog.Logger) {
	rep, err := inv.Check(ctx)
	if err != nil {
		log.Warn("flashsale: cannot check the Redis settings", "err", err)
		return
	}
	for _, f := range rep.Findings {
		if f.Severity >= stock.SeverityWarning {
			log.Warn("flashsale: risky Redis setting", "finding", f.String())
		}
	}
}
