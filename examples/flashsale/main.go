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
// With -serve it is an HTTP service instead (see server.go for the routes
// and scopes). Without API keys configured it serves only on a loopback
// address and prints an admin key for the run, once:
//
//	go run ./examples/flashsale -serve 127.0.0.1:8080
//	KEY=rk_...   # the key it printed
//	curl -H "Authorization: Bearer $KEY" -X POST localhost:8080/skus -d '{"sku":"phone","stock":100,"limit":2}'
//	curl -H "Authorization: Bearer $KEY" -X POST localhost:8080/skus/phone/orders -H 'Idempotency-Key: o-1' -d '{"qty":1}'
//
// The buyer of an order is the key's principal ("admin" for that key). To
// give buyers their own keys, -new-key alice:buy prints a key and the
// hashed line that stores it; put such lines in a file (-keys FILE,
// $API_KEYS_FILE) or in $API_KEYS, which is also what serving on a
// non-loopback address needs. The README's "Before you expose a template"
// lists the scopes, limits and flags.
//
// REDIS_URL names a server ("redis://", "rediss://", "unix://" or host:port;
// a Cluster node is recognised) or, as a comma list, a Cluster's nodes; with
// it unset an embedded Redis is used. Keys start with "flashsale:". Telemetry
// is exported only when OTEL_* variables ask for it (OTEL_TRACES_EXPORTER=console,
// OTEL_EXPORTER_OTLP_ENDPOINT=..., see otelx/setup).
//
// With DATABASE_URL set (a PostgreSQL connection string), a simulated sale
// also keeps a book of record (pgjournal, schema "flashsale_book"): a sink
// books the SKU's journal while the sale runs, and the report ends with the
// book's levels beside Redis's and the reconciler's verdict; a drift fails
// the run. Unset, nothing touches PostgreSQL.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/shop go run ./examples/flashsale
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/stock"
)

// keyPrefix starts every key the service writes.
const keyPrefix = "flashsale"

// defaultRateLimit is how many orders and reservations per second one
// buyer may send (-rate-limit): more than a person clicks, fewer than a bot.
var defaultRateLimit = app.Rate{N: 5, Per: time.Second}

func main() { app.Main("flashsale", run) }

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
	linger := fs.Duration("linger", 0, "after a simulated sale, keep exporting telemetry this long before exiting (for a Prometheus scrape of the final values)")
	serve := fs.String("serve", "", "serve HTTP on this address (\"127.0.0.1:8080\"; another than loopback needs -keys) instead of simulating a sale")
	srvCfg := app.DefaultServerConfig(defaultRateLimit)
	srvCfg.Metered = "orders and reservations (buy, reserve, confirm, cancel)"
	srvCfg.Flags(fs)
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	if *linger < 0 {
		return app.UsageError(fs, fmt.Errorf("-linger %v: must not be negative", *linger))
	}
	a, edge, err := app.Launch{Flags: fs, Serve: *serve, Server: srvCfg, Scopes: scopes, CheckRun: cfg.check}.Start(ctx, stdout, stderr)
	if a == nil {
		return err // -new-key printed a key, or the service cannot start
	}
	defer a.Close(ctx)
	// The reclaimer returns the units of expired holds a few times a second;
	// correctness never depends on it (an order reclaims them first).
	inv, err := stock.New(a.Redis.Client, stock.WithKeyPrefix(keyPrefix), stock.WithReclaimInterval(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer inv.Close()
	if !a.Redis.Embedded {
		app.WarnRiskySettings(ctx, a, inv.Check, health.Warning)
	}

	if *serve != "" {
		return a.Serve(ctx, app.Server{Addr: *serve, Handler: newServer(inv, edge), Config: srvCfg, Auth: edge.Auth,
			Ready: app.Readiness(inv.Check, health.Critical)})
	}
	if cfg.book, err = book.OpenEnv(ctx, "flashsale_book", a.Log); err != nil {
		return err
	}
	defer cfg.book.Close()
	rep, err := simulate(ctx, a.Redis.Client, inv, cfg, stdout)
	if err != nil {
		return err
	}
	rep.print(stdout)
	if *linger > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(*linger):
		}
	}
	return app.Problems(rep.Problems)
}
