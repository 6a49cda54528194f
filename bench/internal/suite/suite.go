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
	// measuring; ServerTime the CPU time of the Redis servers' main threads.
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
	// Min and Max are the spread of a ratio's per-run values.
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
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
	Case      string    `json:"case"`
	What      string    `json:"what,omitempty"`
	Runs      int       `json:"runs"`
	Median    float64   `json:"median_ops_per_s"`
	Min       float64   `json:"min_ops_per_s"`
	Max       float64   `json:"max_ops_per_s"`
	Rates     []float64 `json:"rates"`
	Yardstick string    `json:"yardstick,omitempty"`
	// Ratio is the median of the per-run ratios to the yardstick (runs taken
	// side by side), or Median over a fixed YardstickRate; 0 when unknown.
	// RatioMin and RatioMax are the extremes of the per-run ratios.
	Ratio      float64 `json:"ratio,omitempty"`
	RatioMin   float64 `json:"ratio_min,omitempty"`
	RatioMax   float64 `json:"ratio_max,omitempty"`
	TripsPerOp float64 `json:"round_trips_per_op"`
	CmdsPerOp  float64 `json:"commands_per_op"`
	// ClientCPU is the CPU time of the client side per operation, µs (this
	// process, or redis-benchmark for the server/* rows).
	ClientCPU float64 `json:"client_cpu_us_per_op"`
	// ServerTime is the CPU time of the Redis servers' main threads per
	// operation, µs (INFO cpu): the server's whole cost of the work,
	// counted once whatever the client sends (a script's inner commands are
	// not counted again, network reads and writes are counted).
	ServerTime float64  `json:"server_cpu_us_per_op"`
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
//
// Cases compared with each other (through Yardstick or Also) form a family,
// and a family's cases take turns: run 1 of each, then run 2 of each (in a
// rotated order, so no case always goes first), and so on. A ratio is the
// median of the per-run ratios of runs taken side by side, so it compares
// the same minutes of a machine whose load drifts, not one case's minutes
// with another's.
func Run(ctx context.Context, env *Env, cfg Config, cases []Case) []Result {
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Second
	}
	var sel []Case
	for _, c := range cases {
		if cfg.Only == nil || cfg.Only.MatchString(c.Name) {
			sel = append(sel, c)
		}
	}
	runs := make([][]*Sample, len(sel)) // per case, per round; nil where it did not run
	out := make([]Result, len(sel))
	for i, c := range sel {
		runs[i] = make([]*Sample, cfg.Runs)
		out[i] = Result{Case: c.Name, What: c.What, Yardstick: c.Yardstick}
		out[i].Skipped = skipReason(env, c)
	}
	for _, fam := range families(sel) {
		began := time.Now()
		for round := 0; round < cfg.Runs && ctx.Err() == nil; round++ {
			for k := range fam {
				i := fam[(k+round)%len(fam)]
				if out[i].Skipped != "" || out[i].Failed != "" || ctx.Err() != nil {
					continue
				}
				s, err := sel[i].Run(ctx, env, cfg.Duration)
				if err != nil {
					out[i].Failed = err.Error()
					continue
				}
				runs[i][round] = &s
			}
		}
		for _, i := range fam {
			aggregate(&out[i], runs[i])
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%-40s %-40s\n", out[i].Case, progressLine(out[i]))
			}
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%-40s %5.1fs\n", "", time.Since(began).Seconds())
		}
		if ctx.Err() != nil {
			break
		}
	}
	compare(out, sel, runs)
	return out
}

// families groups the cases compared with each other, through Yardstick or
// Also, transitively: the indexes of each group in the order of cases.
func families(cases []Case) [][]int {
	parent := make([]int, len(cases))
	index := map[string]int{}
	for i, c := range cases {
		parent[i] = i
		index[c.Name] = i
	}
	var root func(int) int
	root = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i, c := range cases {
		for _, n := range append([]string{c.Yardstick}, c.Also...) {
			if j, ok := index[n]; ok {
				parent[root(i)] = root(j)
			}
		}
	}
	var out [][]int
	at := map[int]int{}
	for i := range cases {
		r := root(i)
		k, ok := at[r]
		if !ok {
			k = len(out)
			at[r] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

func progressLine(r Result) string {
	switch {
	case r.Skipped != "":
		return "skipped: " + r.Skipped
	case r.Failed != "" && r.Median == 0:
		return "FAILED: " + r.Failed
	}
	s := fmt.Sprintf("%12.0f ops/s", r.Median)
	if len(r.Violations) > 0 {
		s += fmt.Sprintf("  VIOLATIONS: %d", len(r.Violations))
	}
	return s
}

// skipReason says why c cannot run on env, or "".
func skipReason(env *Env, c Case) string {
	switch {
	case c.Needs == "cluster" && env.Cluster == nil:
		return "no cluster"
	case (c.Needs == "redis-benchmark" || strings.HasPrefix(c.Name, "server/")) && env.RedisBenchmark == "":
		return "redis-benchmark not found: " + RedisBenchmarkHint
	case strings.HasPrefix(c.Needs, "aof-") && env.AOF[strings.TrimPrefix(c.Needs, "aof-")] == nil:
		return "no server with appendfsync " + strings.TrimPrefix(c.Needs, "aof-")
	}
	return ""
}

// aggregate fills r from the samples of its runs (nil where a run is missing).
func aggregate(r *Result, runs []*Sample) {
	var samples []Sample
	for _, s := range runs {
		if s != nil {
			samples = append(samples, *s)
		}
	}
	if len(samples) == 0 {
		if r.Skipped == "" && r.Failed == "" {
			r.Failed = "no run completed"
		}
		return
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
		r.ClientCPU = float64(mid.CPU) / float64(time.Microsecond) / float64(mid.Ops)
		r.ServerTime = float64(mid.ServerTime) / float64(time.Microsecond) / float64(mid.Ops)
	}
	r.P50, r.P99 = ms(mid.P50), ms(mid.P99)
	r.Extra = mid.Extra
	if r.Median == 0 && r.Failed == "" {
		r.Failed = "no operation succeeded"
		if r.FirstError != "" {
			r.Failed += ": " + r.FirstError
		}
	}
}

// compare fills Ratio and Ratios: against a fixed rate, the median's ratio;
// against another case, the median of the ratios of the runs the two took
// side by side (the same round), with their spread.
func compare(results []Result, cases []Case, runs [][]*Sample) {
	index := map[string]int{}
	for i, r := range results {
		index[r.Case] = i
	}
	for i := range results {
		r := &results[i]
		c := cases[i]
		if r.Median == 0 {
			continue
		}
		switch j, ok := index[c.Yardstick]; {
		case c.YardstickRate > 0:
			r.Yardstick = fmt.Sprintf("%.0f/s", c.YardstickRate)
			r.Ratio = r.Median / c.YardstickRate
		case ok && j != i:
			if f, ok := pairedRatio(runs[i], runs[j]); ok {
				r.Ratio, r.RatioMin, r.RatioMax = f.Value, f.Min, f.Max
			}
		}
		for _, a := range c.Also {
			if j, ok := index[a]; ok && j != i {
				if f, ok := pairedRatio(runs[i], runs[j]); ok {
					f.Name = a
					r.Ratios = append(r.Ratios, f)
				}
			}
		}
	}
}

// pairedRatio is the median (and min, max) of a's rate over b's, run by run,
// over the rounds both ran.
func pairedRatio(a, b []*Sample) (Figure, bool) {
	var ratios []float64
	for k := range min(len(a), len(b)) {
		if a[k] == nil || b[k] == nil || b[k].Rate() == 0 {
			continue
		}
		ratios = append(ratios, a[k].Rate()/b[k].Rate())
	}
	if len(ratios) == 0 {
		return Figure{}, false
	}
	slices.Sort(ratios)
	return Figure{Value: median(ratios), Min: ratios[0], Max: ratios[len(ratios)-1], Unit: "x"}, true
}

// Even reports whether a ratio's per-run values lie on both sides of 1: the
// two cases do not differ beyond the spread of their runs, and the ratio is
// shown as such rather than as a difference.
func Even(min, max float64) bool { return min > 0 && min < 1 && max > 1 }

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
