// Command idservice is an ID service in the manner of Meituan Leaf, built on
// redkit's idgen module: time-ordered Snowflake IDs from a node ID leased in
// Redis (no node numbers assigned by hand), Leaf-style segment IDs served from
// memory per name, and strictly increasing sequence values, over HTTP.
//
// It serves on 127.0.0.1:8080 by default: an ID service has no batch run of
// its own. Every route but /healthz and /readyz needs an API key with the
// ids scope; without keys configured (-keys FILE, $API_KEYS_FILE,
// $API_KEYS; -new-key billing:ids makes one) the service serves only on a
// loopback address and prints an admin key for the run, once. The README's
// "Before you expose a template" says more.
// With -demo it prints a few IDs of each kind and its status instead, and
// exits (releasing its node lease, as a stopped service does).
//
//	go run ./examples/idservice                       # embedded in-process Redis, 127.0.0.1:8080
//	go run ./examples/idservice -addr :9090 -keys keys.txt -service checkout
//	go run ./examples/idservice -demo
//	REDIS_URL=redis://localhost:6379 go run ./examples/idservice
//	REDIS_URL=10.0.0.1:7000,10.0.0.2:7000 go run ./examples/idservice   # a Redis Cluster
//
//	KEY=rk_...   # the key it printed
//	curl -H "Authorization: Bearer $KEY" localhost:8080/id/snowflake
//	curl -H "Authorization: Bearer $KEY" 'localhost:8080/id/snowflake?n=5'
//	curl -H "Authorization: Bearer $KEY" localhost:8080/id/segment/order-no
//	curl -H "Authorization: Bearer $KEY" localhost:8080/id/sequence/shop-7/invoice
//	curl -H "Authorization: Bearer $KEY" localhost:8080/status
//
// Every instance started with the same -service name on one Redis leases its
// own Snowflake node (0..1023), so their IDs never collide; stopping one
// (SIGINT, SIGTERM) releases its node for the next. REDIS_URL names a server
// ("redis://", "rediss://", "unix://" or host:port; a Cluster node is
// recognised) or, as a comma list, a Cluster's nodes; with it unset an
// embedded Redis is used, whose counters and leases end with the process.
// Keys use idgen's default prefix ("redkit:idgen:v1:..."). Telemetry is
// exported only when OTEL_* variables ask for it (OTEL_TRACES_EXPORTER=console,
// OTEL_EXPORTER_OTLP_ENDPOINT=..., see otelx/setup).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/idgen"
)

func main() { app.Main("idservice", run) }

// run is the whole program: main only adds the signals and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idservice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{Service: "idservice", MaxNames: 1000, LeaseTTL: idgen.DefaultLeaseTTL}
	addr := fs.String("addr", "127.0.0.1:8080", "serve HTTP on this address (another than loopback needs -keys)")
	demo := fs.Bool("demo", false, "print a few IDs and the status, then exit")
	fs.StringVar(&cfg.Service, "service", cfg.Service, "Snowflake service name: instances sharing it lease distinct node IDs")
	fs.IntVar(&cfg.MaxNames, "max-names", cfg.MaxNames, "most segment and sequence names served")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "Snowflake node lease TTL, renewed every third of it (1s..1h)")
	srvCfg := app.DefaultServerConfig(app.Rate{})
	srvCfg.Metered = "ID requests (/id/...)"
	srvCfg.Flags(fs)
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	if cfg.MaxNames < 0 {
		return app.UsageError(fs, errors.New("-max-names: must not be negative"))
	}
	l := app.Launch{Flags: fs, Serve: *addr, Server: srvCfg, Scopes: scopes}
	if *demo {
		l.Serve = "" // the demo serves nothing and needs no keys
	}
	a, edge, err := l.Start(ctx, stdout, stderr)
	if a == nil {
		return err // -new-key printed a key, or the service cannot start
	}
	defer a.Close(ctx)
	cfg.Options = []idgen.Option{
		idgen.WithTracerProvider(a.Tel.TracerProvider),
		idgen.WithMeterProvider(a.Tel.MeterProvider),
	}
	g, err := newGenerators(ctx, a.Redis.Client, cfg)
	if err != nil {
		return err
	}
	a.Log.Info("idservice: leased a Snowflake node", "service", cfg.Service, "node", g.sf.Node())
	// Closing releases the node lease; it runs after the server has drained.
	defer func() {
		if cerr := g.Close(); cerr != nil {
			a.Log.Warn("idservice: release", "err", cerr)
		}
	}()

	if *demo {
		return runDemo(ctx, g, stdout)
	}
	// Any Sequence's Check inspects the server; this one issues nothing.
	probe, err := idgen.NewSequence(a.Redis.Client, "readyz")
	if err != nil {
		return err
	}
	return a.Serve(ctx, app.Server{Addr: *addr, Handler: newServer(g, edge), Config: srvCfg, Auth: edge.Auth,
		Ready: app.Readiness(probe.Check, health.Critical)})
}

// runDemo prints a few IDs of each kind and the status.
func runDemo(ctx context.Context, g *generators, out io.Writer) error {
	show := func(kind string, gen idgen.Generator) error {
		for range 3 {
			id, err := gen.Next(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			fmt.Fprintf(out, "%-26s %-20s %s\n", kind, id, id.Base32())
		}
		return nil
	}
	seg, err := g.segment("order-no")
	if err != nil {
		return err
	}
	seq, err := g.sequence("shop-7/invoice")
	if err != nil {
		return err
	}
	for _, k := range []struct {
		kind string
		gen  idgen.Generator
	}{
		{fmt.Sprintf("snowflake (node %d)", g.sf.Node()), generatorFunc(g.nextSnowflake)},
		{"segment order-no", seg},
		{"sequence shop-7/invoice", seq},
	} {
		if err := show(k.kind, k.gen); err != nil {
			return err
		}
	}
	st, _ := g.status(ctx, nil)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nGET /status\n%s\n", b)
	return nil
}
