// Package suite holds the cases of redkit-bench: each measures one way of
// doing a job (a lock, a flash-sale deduction, a debit, an ID) against a real
// redis-server, counts its Redis round trips, and checks its correctness
// while it runs. Run executes the cases several times and aggregates them into
// Results with a median, a spread and a ratio to each case's yardstick.
package suite

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redkit-go/redkit/redistest"
)

// Env is what the cases run against.
type Env struct {
	Server  *redistest.Server  // the single redis-server every non-cluster case uses
	Cluster *redistest.Cluster // a loopback 3-master cluster; nil skips the cluster cases
	// AOF holds servers with AOF on, by appendfsync policy ("everysec",
	// "always"), for the durability rows; a missing one skips its rows.
	AOF map[string]*redistest.Server
	// RedisBenchmark is the path of the redis-benchmark binary; "" skips the
	// server-ceiling cases (reported as skipped, with the install command).
	RedisBenchmark string
	// Quick shrinks workloads (IDs collected, batch sizes) for smoke tests.
	Quick bool
}

// Config says how to run the cases.
type Config struct {
	Runs     int            // runs per case (median and spread over them); default 3
	Duration time.Duration  // measured time per run; default 1s
	Only     *regexp.Regexp // run only the cases whose name matches; nil runs all
	Progress io.Writer      // one line per finished case; nil for none
}

// Case is one measured row.
type Case struct {
	Name string // group/implementation/shape, e.g. "lock/redkit/uncontended-16"
	// Yardstick names the case this one is compared against (ratio = this
	// median / its median); "" when YardstickRate is set or no comparison.
	Yardstick string
	// YardstickRate is a fixed ceiling in ops/s (e.g. the ID layout's limit).
	YardstickRate float64
	// Also names further cases the notes give a ratio against.
	Also []string
	// Needs says what the case cannot run without: "cluster",
	// "redis-benchmark", or "aof-everysec" / "aof-always" (plus
	// redis-benchmark for a server/* row).
	Needs string
	// What describes the operation counted as one op.
	What string
	Run  func(ctx context.Context, env *Env, d time.Duration) (Sample, error)
}

// Sample is the outcome of one run of a case.
type Sample struct {
	Ops      int64         // successful operations
	Elapsed  time.Duration // measured time
	Commands int64         // Redis commands sent (pipelined ones counted one by one)
	Trips    int64         // Redis round trips: single commands plus whole pipelines

	// CPU is the CPU time this process (and redis-benchmark) used while
	// measuring; ServerTime the command time the Redis servers report.
	CPU, ServerTime time.Duration

	// Latency percentiles of one operation (or of an Acquire's wait), when measured.
	P50, P99 time.Duration
	// Extra holds case-specific figures for the notes column, in order.
	Extra []Figure

	Errors     int64  // operations that failed unexpectedly
	FirstError string // the first of them
	Violations []string
}

// Figure is a named number of a Sample (handoff gap, re-acquire share, ...).
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// Rate is operations per second.
func (s Sample) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// Result aggregates the runs of one case.
type Result struct {
	Case       string    `json:"case"`
	What       string    `json:"what,omitempty"`
	Runs       int       `json:"runs"`
	Median     float64   `json:"median_ops_per_s"`
	Min        float64   `json:"min_ops_per_s"`
	Max        float64   `json:"max_ops_per_s"`
	Rates      []float64 `json:"rates"`
	Yardstick  string    `json:"yardstick,omitempty"`
	Ratio      float64   `json:"ratio,omitempty"` // Median / yardstick median; 0 when unknown
	TripsPerOp float64   `json:"round_trips_per_op"`
	CmdsPerOp  float64   `json:"commands_per_op"`
	// ClientCPU is the CPU time of the client side per operation, µs (this
	// process, or redis-benchmark for the server/* rows).
	ClientCPU float64 `json:"client_cpu_us_per_op"`
	// ServerTime is the command time inside Redis per operation, µs.
	ServerTime float64  `json:"server_us_per_op"`
	P50        float64  `json:"p50_ms,omitempty"`
	P99        float64  `json:"p99_ms,omitempty"`
	Extra      []Figure `json:"extra,omitempty"` // from the median run
	Ratios     []Figure `json:"ratios,omitempty"`
	Errors     int64    `json:"errors,omitempty"`
	FirstError string   `json:"first_error,omitempty"`
	Violations []string `json:"violations,omitempty"`
	Skipped    string   `json:"skipped,omitempty"` // why the case did not run
	Failed     string   `json:"failed,omitempty"`  // why the case could not be measured
}

// Run runs the selected cases, cfg.Runs times each, and returns one Result
// per selected case in the order of cases.
func Run(ctx context.Context, env *Env, cfg Config, cases []Case) []Result {
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Second
	}
	var out []Result
	for _, c := range cases {
		if cfg.Only != nil && !cfg.Only.MatchString(c.Name) {
			continue
		}
		began := time.Now()
		r := runCase(ctx, env, cfg, c)
		out = append(out, r)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%-40s %-40s %5.1fs\n", r.Case, progressLine(r), time.Since(began).Seconds())
		}
		if ctx.Err() != nil {
			break
		}
	}
	compare(out, cases)
	return out
}

func progressLine(r Result) string {
	switch {
	case r.Skipped != "":
		return "skipped: " + r.Skipped
	case r.Failed != "":
		return "FAILED: " + r.Failed
	}
	s := fmt.Sprintf("%12.0f ops/s", r.Median)
	if len(r.Violations) > 0 {
		s += fmt.Sprintf("  VIOLATIONS: %d", len(r.Violations))
	}
	return s
}

func runCase(ctx context.Context, env *Env, cfg Config, c Case) Result {
	r := Result{Case: c.Name, What: c.What, Yardstick: c.Yardstick}
	switch {
	case c.Needs == "cluster" && env.Cluster == nil:
		r.Skipped = "no cluster"
		return r
	case (c.Needs == "redis-benchmark" || strings.HasPrefix(c.Name, "server/")) && env.RedisBenchmark == "":
		r.Skipped = "redis-benchmark not found: " + RedisBenchmarkHint
		return r
	case strings.HasPrefix(c.Needs, "aof-") && env.AOF[strings.TrimPrefix(c.Needs, "aof-")] == nil:
		r.Skipped = "no server with appendfsync " + strings.TrimPrefix(c.Needs, "aof-")
		return r
	}
	var samples []Sample
	for i := 0; i < cfg.Runs && ctx.Err() == nil; i++ {
		s, err := c.Run(ctx, env, cfg.Duration)
		if err != nil {
			r.Failed = err.Error()
			break
		}
		samples = append(samples, s)
	}
	if len(samples) == 0 {
		if r.Failed == "" {
			r.Failed = "no run completed"
		}
		return r
	}
	r.Runs = len(samples)
	slices.SortStableFunc(samples, func(a, b Sample) int {
		switch ra, rb := a.Rate(), b.Rate(); {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	for _, s := range samples {
		r.Rates = append(r.Rates, s.Rate())
		r.Errors += s.Errors
		if r.FirstError == "" {
			r.FirstError = s.FirstError
		}
		r.Violations = append(r.Violations, s.Violations...)
	}
	r.Min, r.Max = r.Rates[0], r.Rates[len(r.Rates)-1]
	r.Median = median(r.Rates)
	mid := samples[len(samples)/2]
	if mid.Ops > 0 {
		r.TripsPerOp = float64(mid.Trips) / float64(mid.Ops)
		r.CmdsPerOp = float64(mid.Commands) / float64(mid.Ops)
		r.ClientCPU = float64(mid.CPU.Microseconds()) / float64(mid.Ops)
		r.ServerTime = float64(mid.ServerTime.Microseconds()) / float64(mid.Ops)
	}
	r.P50, r.P99 = ms(mid.P50), ms(mid.P99)
	r.Extra = mid.Extra
	if r.Median == 0 && r.Failed == "" {
		r.Failed = "no operation succeeded"
		if r.FirstError != "" {
			r.Failed += ": " + r.FirstError
		}
	}
	return r
}

// compare fills Ratio and Ratios from the yardsticks' medians.
func compare(results []Result, cases []Case) {
	med := map[string]float64{}
	for _, r := range results {
		med[r.Case] = r.Median
	}
	byName := map[string]Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	for i := range results {
		r := &results[i]
		c := byName[r.Case]
		if r.Median == 0 {
			continue
		}
		switch {
		case c.YardstickRate > 0:
			r.Yardstick = fmt.Sprintf("%.0f/s", c.YardstickRate)
			r.Ratio = r.Median / c.YardstickRate
		case c.Yardstick != "" && c.Yardstick != c.Name && med[c.Yardstick] > 0:
			r.Ratio = r.Median / med[c.Yardstick]
		}
		for _, a := range c.Also {
			if a != c.Name && med[a] > 0 {
				r.Ratios = append(r.Ratios, Figure{Name: a, Value: r.Median / med[a], Unit: "x"})
			}
		}
	}
}

// Violations lists every violation of every result, prefixed by its case.
func Violations(results []Result) []string {
	var out []string
	for _, r := range results {
		for _, v := range r.Violations {
			out = append(out, r.Case+": "+v)
		}
	}
	return out
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
