// Command redkit-bench measures redkit beside the server's own ceilings and
// the libraries it is judged against, in one run against redis-server
// processes it starts itself, and checks correctness while it measures.
//
//	go run ./bench/cmd/redkit-bench [-runs 3] [-duration 1s] [-only regexp] [-quick] [-json] [-telemetry none|otlp]
//	go run ./bench/cmd/redkit-bench -scripts [-calls 20000] [-only regexp] [-json]
//
// Each case runs -runs times for -duration; the table shows the median,
// the spread (min–max), the ratio to the case's yardstick, Redis round trips
// per operation and, where measured, latency percentiles. A violation (two
// lock holders at once, oversold units, a double charge, a repeated ID) is
// printed loudly and makes the exit status 1; so does a case that fails.
//
// With -telemetry otlp the OpenTelemetry SDK is installed as a service's
// otelx/setup installs it, exporting every span and metric of redkit's
// calls over OTLP/HTTP to a sink on loopback; the peers, which have no
// telemetry, run as before, so the ratios show what telemetry costs.
//
// With -scripts it measures instead the Redis time of each redkit script on
// its own: -calls calls from one client on an idle server, read from INFO
// commandstats (usec_per_call of EVALSHA), beside the smallest script that
// does the same job, in the same run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/bench/internal/suite"
	"github.com/redkit-go/redkit/redistest"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		runs     = flag.Int("runs", 3, "runs per case; the table shows their median and spread")
		duration = flag.Duration("duration", time.Second, "measured time of one run of a case")
		only     = flag.String("only", "", "run only the cases whose name matches this regexp")
		quick    = flag.Bool("quick", false, "one short run per case (smoke test): -runs 1 -duration 100ms")
		asJSON   = flag.Bool("json", false, "print the results as JSON instead of a table")
		list     = flag.Bool("list", false, "list the cases and exit")
		scripts  = flag.Bool("scripts", false, "measure each script's Redis time (INFO commandstats) instead of the cases")
		calls    = flag.Int("calls", 20000, "calls per script with -scripts")
		tel      = flag.String("telemetry", "none", "none: the OpenTelemetry API with no SDK, as a library user without telemetry; otlp: the SDK installed and exporting every span and metric over OTLP/HTTP to a sink on loopback, as a service with telemetry")
	)
	flag.Parse()
	if *quick {
		*runs, *duration = 1, 100*time.Millisecond
	}
	cases := suite.Cases()
	var re *regexp.Regexp
	if *only != "" {
		var err error
		if re, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(os.Stderr, "redkit-bench: -only: %v\n", err)
			return 2
		}
	}
	if *list {
		for _, c := range cases {
			if re == nil || re.MatchString(c.Name) {
				fmt.Printf("%-36s %s\n", c.Name, c.What)
			}
		}
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *scripts {
		return runScripts(ctx, *calls, re, *asJSON)
	}
	switch *tel {
	case "none":
	case "otlp":
		stopTel, err := startTelemetry(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redkit-bench: -telemetry otlp: %v\n", err)
			return 1
		}
		defer stopTel()
	default:
		fmt.Fprintf(os.Stderr, "redkit-bench: -telemetry: %q is neither none nor otlp\n", *tel)
		return 2
	}
	env := &suite.Env{Quick: *quick}
	srv, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "redkit-bench: %v\n", err)
		return 1
	}
	defer srv.Close()
	env.Server = srv
	if wants(cases, re, "cluster") {
		c, err := redistest.StartCluster(ctx, redistest.ClusterOptions{Masters: 3})
		if err != nil {
			fmt.Fprintf(os.Stderr, "redkit-bench: !!! cluster: %v (cluster cases skipped)\n", err)
		} else {
			defer c.Close()
			env.Cluster = c
		}
	}
	env.AOF = map[string]*redistest.Server{}
	for _, fsync := range []string{"everysec", "always"} {
		if !wants(cases, re, "aof-"+fsync) {
			continue
		}
		s, err := redistest.Start(ctx, redistest.Options{AOF: true, AppendFsync: fsync})
		if err != nil {
			fmt.Fprintf(os.Stderr, "redkit-bench: !!! AOF %s server: %v (its cases skipped)\n", fsync, err)
			continue
		}
		defer s.Close()
		env.AOF[fsync] = s
	}
	env.RedisBenchmark = suite.FindRedisBenchmark()
	if env.RedisBenchmark == "" {
		fmt.Fprintf(os.Stderr, "redkit-bench: !!! redis-benchmark not found: the server/* ceilings are SKIPPED and ratios against them are missing; %s\n",
			suite.RedisBenchmarkHint)
	}
	version := "unknown"
	if v, err := srv.Version(ctx); err == nil {
		version = v.String()
	}
	fmt.Fprintf(os.Stderr, "redkit-bench: redis-server %s at %s, %d run(s) x %v per case, telemetry %s\n", version, srv.Addr(), *runs, *duration, *tel)

	start := time.Now()
	results := suite.Run(ctx, env, suite.Config{Runs: *runs, Duration: *duration, Only: re, Progress: os.Stderr}, cases)
	if *asJSON {
		err = suite.WriteJSON(os.Stdout, struct {
			RedisVersion string         `json:"redis_version"`
			Runs         int            `json:"runs"`
			Duration     string         `json:"duration"`
			Results      []suite.Result `json:"results"`
		}{version, *runs, duration.String(), results})
	} else {
		fmt.Printf("redkit-bench: %d run(s) x %v per case, redis-server %s, 64 clients/buyers unless named, telemetry %s; total %v\n\n",
			*runs, *duration, version, *tel, time.Since(start).Round(time.Second))
		err = suite.WriteTable(os.Stdout, results)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "redkit-bench: %v\n", err)
		return 1
	}
	status := 0
	if v := suite.Violations(results); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "\n!!! redkit-bench: %d CORRECTNESS VIOLATION(S):\n  %s\n", len(v), strings.Join(v, "\n  "))
		status = 1
	}
	for _, r := range results {
		if r.Failed != "" {
			fmt.Fprintf(os.Stderr, "redkit-bench: case %s FAILED: %s\n", r.Case, r.Failed)
			status = 1
		}
	}
	if ctx.Err() != nil {
		status = 1
	}
	return status
}

// wants reports whether a selected case needs the given extra servers.
func wants(cases []suite.Case, re *regexp.Regexp, needs string) bool {
	for _, c := range cases {
		if c.Needs == needs && (re == nil || re.MatchString(c.Name)) {
			return true
		}
	}
	return false
}

// runScripts measures each script alone on a server of its own.
func runScripts(ctx context.Context, calls int, re *regexp.Regexp, asJSON bool) int {
	srv, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "redkit-bench: %v\n", err)
		return 1
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	version := "unknown"
	if v, err := srv.Version(ctx); err == nil {
		version = v.String()
	}
	var only func(string) bool
	if re != nil {
		only = re.MatchString
	}
	costs := suite.MeasureScripts(ctx, rdb, calls, only)
	if asJSON {
		err = suite.WriteJSON(os.Stdout, struct {
			RedisVersion string             `json:"redis_version"`
			Calls        int                `json:"calls"`
			Scripts      []suite.ScriptCost `json:"scripts"`
		}{version, calls, costs})
	} else {
		fmt.Printf("redkit-bench -scripts: %d calls per script from one client, redis-server %s; µs are EVALSHA usec_per_call from INFO commandstats\n\n", calls, version)
		err = suite.WriteScriptTable(os.Stdout, costs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "redkit-bench: %v\n", err)
		return 1
	}
	for _, c := range costs {
		if c.Failed != "" {
			return 1
		}
	}
	return 0
}
