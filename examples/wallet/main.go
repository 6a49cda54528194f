// Command wallet is a wallet service built on redkit's wallet module: accounts
// with a currency and an optional overdraft, credits, debits, transfers within
// and across slot groups, holds that are captured (in part), voided or left to
// expire, balances and paged statements, all behind an HTTP API where the
// Idempotency-Key header is the transaction ID, as in Stripe's API.
//
// Without -serve it runs a load test and exits: it serves the API on a
// loopback port, opens accounts in a few slot groups, and drives a mix of
// concurrent credits, debits, transfers, holds and deliberate re-sends of the
// same transaction through it for a few seconds. Then it checks the books
// against its own record of what it was told: no transaction in a journal
// twice, no account below its limit, Verify clean on every account, and the sum
// of the balances equal to credits minus debits. It prints what it found and
// exits non-zero when a check fails.
//
//	go run ./examples/wallet                          # embedded in-process Redis
//	go run ./examples/wallet -duration 10s -workers 16
//	REDIS_URL=redis://localhost:6379 go run ./examples/wallet
//	REDIS_URL=10.0.0.1:7000,10.0.0.2:7000 go run ./examples/wallet   # a Redis Cluster
//
// With -serve it is an HTTP service instead (see server.go for the routes
// and scopes). Without API keys configured it serves only on a loopback
// address and prints an admin key for the run, once:
//
//	go run ./examples/wallet -serve 127.0.0.1:8080
//	KEY=rk_...   # the key it printed
//	curl -H "Authorization: Bearer $KEY" -X POST localhost:8080/accounts -d '{"id":"shop-7/alice","currency":"EUR"}'
//	curl -H "Authorization: Bearer $KEY" -X POST localhost:8080/accounts/shop-7%2Falice/credits -H 'Idempotency-Key: topup-1' -d '{"amount":5000}'
//	curl -H "Authorization: Bearer $KEY" localhost:8080/accounts/shop-7%2Falice
//
// To serve on another address, give keys: -new-key checkout:payments,read
// prints a key and the hashed line that stores it; put such lines in a file
// (-keys FILE, $API_KEYS_FILE) or in $API_KEYS. Such a key moves money only
// out of accounts opened for its principal ({"owner":"checkout"}) or that an
// admin granted it. The README's "Before you expose a template" lists the
// scopes, limits and flags.
//
// REDIS_URL names a server ("redis://", "rediss://", "unix://" or host:port;
// a Cluster node is recognised) or, as a comma list, a Cluster's nodes; with
// it unset an embedded Redis is used. Keys use the wallet module's default
// prefix ("redkit:wallet:v1:..."); the load test names its accounts after the
// run, so it never touches earlier data. Transfers across slot groups that a
// crashed process left in flight are finished by the ledger's recovery worker
// (wallet.WithRecovery), which also runs once at start-up. Telemetry is
// exported only when OTEL_* variables ask for it (OTEL_TRACES_EXPORTER=console,
// OTEL_EXPORTER_OTLP_ENDPOINT=..., see otelx/setup).
//
// With DATABASE_URL set (a PostgreSQL connection string), the load test
// also keeps a book of record (pgjournal, schema "wallet_book"): a sink
// books the accounts' journals while the load runs, and the report ends
// with the book's balances beside Redis's and the reconciler's verdict; a
// drift fails the run. Unset, nothing touches PostgreSQL.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/shop go run ./examples/wallet
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
	"github.com/redkit-go/redkit/wallet"
)

func main() { app.Main("wallet", run) }

// defaultRateLimit is how many payments per second one principal may make
// (-rate-limit): a checkout backend behind one key makes many.
var defaultRateLimit = app.Rate{N: 100, Per: time.Second}

// run is the whole program: main only adds the signals and the exit code.
// It returns an error when the load test broke one of its checks.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wallet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := defaultLoad()
	fs.IntVar(&cfg.Accounts, "accounts", cfg.Accounts, "accounts the load test opens")
	fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "slot groups the accounts are spread over (transfers between groups take the two-phase path)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent clients of the load test")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the load test sends new operations")
	serve := fs.String("serve", "", "serve HTTP on this address (\"127.0.0.1:8080\"; another than loopback needs -keys) instead of running the load test")
	recoverEvery := fs.Duration("recover-every", time.Minute, "how often to finish transfers across slot groups left in flight (wallet.WithRecovery; 0: never)")
	srvCfg := app.DefaultServerConfig(defaultRateLimit)
	srvCfg.Metered = "payments (debits, transfers, holds, captures, voids)"
	srvCfg.Flags(fs)
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	if *recoverEvery < 0 {
		return app.UsageError(fs, fmt.Errorf("-recover-every %v: must not be negative (0: never)", *recoverEvery))
	}
	a, edge, err := app.Launch{Flags: fs, Serve: *serve, Server: srvCfg, Scopes: scopes, CheckRun: cfg.check}.Start(ctx, stdout, stderr)
	if a == nil {
		return err // -new-key printed a key, or the service cannot start
	}
	defer a.Close(ctx)
	led, err := wallet.New(a.Redis.Client,
		wallet.WithTracerProvider(a.Tel.TracerProvider),
		wallet.WithMeterProvider(a.Tel.MeterProvider),
		wallet.WithRecovery(*recoverEvery))
	if err != nil {
		return err
	}
	defer led.Close()

	if *serve != "" {
		if !a.Redis.Embedded {
			app.WarnRiskySettings(ctx, a, led.Check, health.Warning)
		}
		return a.Serve(ctx, app.Server{Addr: *serve, Handler: newServer(led, a.Redis.Client, edge), Config: srvCfg, Auth: edge.Auth,
			Ready: app.Readiness(led.Check, health.Critical)})
	}
	if cfg.book, err = book.OpenEnv(ctx, "wallet_book", a.Log); err != nil {
		return err
	}
	defer cfg.book.Close()
	rep, err := runLoad(ctx, a, led, cfg)
	if err != nil {
		return err
	}
	rep.print(stdout)
	return app.Problems(rep.Problems)
}
