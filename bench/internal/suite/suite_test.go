package suite

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestCases_runQuick runs every case once, briefly, against real servers:
// each must measure something and find no violation.
func TestCases_runQuick(t *testing.T) {
	env := shared
	if env.RedisBenchmark == "" {
		t.Logf("redis-benchmark not found; the server/* cases are skipped (%s)", RedisBenchmarkHint)
	}
	results := Run(t.Context(), &env, Config{Runs: 1, Duration: 30 * time.Millisecond}, Cases())
	require.Len(t, results, len(Cases()))
	for i, r := range results {
		if r.Median == 0 && strings.HasPrefix(r.Failed, "no operation succeeded") {
			// A loaded machine may not schedule the workers within 30ms:
			// give the case a longer run before judging it.
			again := Run(t.Context(), &env, Config{Runs: 1, Duration: time.Second,
				Only: regexpMust(t, "^"+regexp.QuoteMeta(r.Case)+"$")}, Cases())
			require.Len(t, again, 1)
			r, results[i] = again[0], again[0]
		}
		if r.Skipped != "" {
			require.True(t, env.RedisBenchmark == "" && strings.HasPrefix(r.Case, "server/"), "%s skipped: %s", r.Case, r.Skipped)
			continue
		}
		require.Empty(t, r.Failed, r.Case)
		require.Empty(t, r.Violations, r.Case)
		require.Positive(t, r.Median, r.Case)
		require.Equal(t, 1, r.Runs, r.Case)
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, results))
	require.Contains(t, buf.String(), "flash/redkit-deduct")
	require.NotContains(t, buf.String(), "VIOLATION")
}

// TestRun_medianSpreadRatio checks the aggregation on cases with known rates.
func TestRun_medianSpreadRatio(t *testing.T) {
	fixed := func(rates ...int64) func(context.Context, *Env, time.Duration) (Sample, error) {
		var i atomic.Int64
		return func(context.Context, *Env, time.Duration) (Sample, error) {
			n := rates[i.Add(1)-1]
			return Sample{Ops: n, Elapsed: time.Second, Trips: 2 * n, Commands: 3 * n}, nil
		}
	}
	cases := []Case{
		{Name: "a", Run: fixed(100, 300, 200)},
		{Name: "b", Yardstick: "a", Also: []string{"c"}, Run: fixed(50, 50, 80)},
		{Name: "c", YardstickRate: 1000, Run: fixed(500, 400, 600)},
		{Name: "d", Run: func(context.Context, *Env, time.Duration) (Sample, error) { return Sample{}, errors.New("boom") }},
	}
	res := Run(t.Context(), &Env{}, Config{Runs: 3, Duration: time.Millisecond}, cases)
	require.Len(t, res, 4)
	require.InDelta(t, 200, res[0].Median, 1e-9)
	require.InDelta(t, 100, res[0].Min, 1e-9)
	require.InDelta(t, 300, res[0].Max, 1e-9)
	require.InDelta(t, 2, res[0].TripsPerOp, 1e-9)
	require.InDelta(t, 3, res[0].CmdsPerOp, 1e-9)
	// b against a, run by run: 50/100, 50/300, 80/200.
	require.InDelta(t, 0.4, res[1].Ratio, 1e-9)
	require.InDelta(t, 50.0/300, res[1].RatioMin, 1e-9)
	require.InDelta(t, 0.5, res[1].RatioMax, 1e-9)
	// b against c: 50/500, 50/400, 80/600.
	require.InDelta(t, 0.125, res[1].Ratios[0].Value, 1e-9)
	require.InDelta(t, 0.5, res[2].Ratio, 1e-9)
	require.Equal(t, "boom", res[3].Failed)

	cases[2].Run = fixed(700)
	only := Run(t.Context(), &Env{}, Config{Runs: 1, Only: regexpMust(t, "^c$")}, cases)
	require.Len(t, only, 1)
	require.Equal(t, "c", only[0].Case)
	require.InDelta(t, 700, only[0].Median, 1e-9)
}

// TestRun_alternatesRelatedCases checks that cases compared with each other
// take turns run by run, in a rotated order, and that a case compared with
// none runs on its own.
func TestRun_alternatesRelatedCases(t *testing.T) {
	var order []string
	rec := func(name string) func(context.Context, *Env, time.Duration) (Sample, error) {
		return func(context.Context, *Env, time.Duration) (Sample, error) {
			order = append(order, name)
			return Sample{Ops: 1, Elapsed: time.Second}, nil
		}
	}
	cases := []Case{
		{Name: "a", Run: rec("a")},
		{Name: "lone", Run: rec("lone")},
		{Name: "b", Yardstick: "a", Run: rec("b")},
		{Name: "c", Also: []string{"b"}, Run: rec("c")},
	}
	Run(t.Context(), &Env{}, Config{Runs: 3, Duration: time.Millisecond}, cases)
	require.Equal(t, []string{"a", "b", "c", "b", "c", "a", "c", "a", "b", "lone", "lone", "lone"}, order)
}

func TestEven_marksRatiosOnBothSidesOfOne(t *testing.T) {
	require.True(t, Even(0.9, 1.1))
	require.False(t, Even(0.7, 0.95))
	require.False(t, Even(1.05, 1.3))
	require.False(t, Even(0, 0))
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, []Result{
		{Case: "x/even", Runs: 3, Median: 10, Min: 9, Max: 11, Ratio: 1.01, RatioMin: 0.93, RatioMax: 1.08, Yardstick: "x/base"},
		{Case: "x/less", Runs: 3, Median: 10, Min: 9, Max: 11, Ratio: 0.8, RatioMin: 0.78, RatioMax: 0.83, Yardstick: "x/base"},
	}))
	require.Contains(t, buf.String(), "~1.01x (0.93–1.08)")
	require.Contains(t, buf.String(), " 0.80x (0.78–0.83)")
}

// TestHandoffs_countOnlyHandoffs checks that a goroutine taking its own
// lock straight back is no handoff and its wait is left out.
func TestHandoffs_countOnlyHandoffs(t *testing.T) {
	h := handoffs{last: -1, winners: map[int]bool{}}
	t0 := time.Now()
	h.got(0, t0, t0.Add(time.Millisecond)) // the first acquisition follows nobody
	h.releasing(0, t0.Add(2*time.Millisecond))
	h.got(0, t0, t0.Add(3*time.Millisecond)) // straight back: not a handoff
	h.releasing(0, t0.Add(4*time.Millisecond))
	h.got(1, t0, t0.Add(9*time.Millisecond)) // from 0 to 1: a handoff after a 9ms wait
	require.Equal(t, 3, h.acquired)
	require.Equal(t, 1, h.reacquired)
	require.Equal(t, 1, h.handoffs)
	require.Equal(t, []time.Duration{9 * time.Millisecond}, h.waits)
	require.Equal(t, []time.Duration{5 * time.Millisecond}, h.gaps)
}

func TestMainThreadCPU(t *testing.T) {
	d, ok := mainThreadCPU("# CPU\r\nused_cpu_sys:9\r\nused_cpu_sys_main_thread:1.250000\r\nused_cpu_user_main_thread:0.000500\r\n")
	require.True(t, ok)
	require.Equal(t, 1250500*time.Microsecond, d)
	_, ok = mainThreadCPU("# CPU\r\nused_cpu_sys:9\r\n")
	require.False(t, ok)
}

func TestHolders_reportsASecondHolder(t *testing.T) {
	var h Holders
	h.Enter()
	h.Exit()
	h.Enter()
	h.Exit()
	require.Empty(t, h.Violations())
	h.Enter()
	h.Enter() // a second holder while the first is inside
	h.Exit()
	h.Exit()
	require.Len(t, h.Violations(), 1)
}

func TestDuplicates_reportsRepeatedIDs(t *testing.T) {
	require.Empty(t, Duplicates([]int64{3, 1, 2}))
	v := Duplicates([]int64{5, 1, 5, 2, 1})
	require.Len(t, v, 1)
	require.Contains(t, v[0], "2 repeated IDs")
}

func TestConserved_reportsOversoldAndLostUnits(t *testing.T) {
	require.Empty(t, Conserved("units", 10, 3, 7))
	require.Contains(t, strings.Join(Conserved("units", 10, 4, 7), ";"), "oversold: 1 units")
	require.Contains(t, strings.Join(Conserved("units", 10, 2, 7), ";"), "1 units lost")
	require.Contains(t, strings.Join(Conserved("units", 1, 2, -1), ";"), "below zero")
}

// noLock grants every acquire at once: no mutual exclusion at all.
type noLock struct{}

func (noLock) close() error             { return nil }
func (noLock) handle(string) lockHandle { return noLock{} }
func (noLock) take(_ context.Context, wait bool) (func(context.Context) error, error) {
	if wait {
		time.Sleep(50 * time.Microsecond) // let the goroutines overlap
	}
	return func(context.Context) error { return nil }, nil
}

// TestLockHandoff_detectsBrokenExclusion feeds the handoff case a "lock"
// that excludes nobody: the holder check must report it.
func TestLockHandoff_detectsBrokenExclusion(t *testing.T) {
	env := shared
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := lockHandoff(t.Context(), &env, 50*time.Millisecond, 16,
			func(*redis.Client, string) locker { return noLock{} })
		require.NoError(t, err)
		if len(s.Violations) > 0 {
			require.Contains(t, s.Violations[0], "mutual exclusion broken")
			return
		}
		require.True(t, time.Now().Before(deadline), "16 goroutines without a lock never overlapped")
	}
}

// TestIDRun_detectsRepeatedIDs feeds the ID runner a generator that repeats.
func TestIDRun_detectsRepeatedIDs(t *testing.T) {
	env := shared
	var n atomic.Int64
	deadline := time.Now().Add(time.Minute)
	for {
		// Fewer than 101 calls cannot repeat an ID modulo 100.
		s := idRun(t.Context(), &env, 20*time.Millisecond, 2, nil, true, func(int) (int64, error) { return n.Add(1) % 100, nil })
		if s.Ops > 100 {
			require.NotEmpty(t, s.Violations)
			require.Contains(t, s.Violations[0], "repeated IDs")
			break
		}
		require.True(t, time.Now().Before(deadline), "the ID runner made too few calls")
	}
	n.Store(0)
	s := idRun(t.Context(), &env, 20*time.Millisecond, 2, nil, false, func(int) (int64, error) { return n.Add(1), nil })
	require.Empty(t, s.Violations)
}

// TestFlash_detectsOversell runs the conservation check of the flash-sale
// cases against a real lost-update race: GET then SET without a lock.
func TestFlash_detectsOversell(t *testing.T) {
	env := shared
	rdb, rt := client(&env)
	defer rdb.Close()
	key := prefix("oversell") + ":stock"
	require.NoError(t, rdb.Set(t.Context(), key, saleStock, 0).Err())
	deadline := time.Now().Add(time.Minute)
	for {
		s := drive(t.Context(), 50*time.Millisecond, 16, rt, false, func(ctx context.Context, _ int) error {
			ctx = context.WithoutCancel(ctx)
			left, err := rdb.Get(ctx, key).Int64()
			if err != nil {
				return err
			}
			return rdb.Set(ctx, key, left-1, 0).Err() // lost update when two buyers read the same level
		})
		require.Zero(t, s.Errors, s.FirstError)
		left, err := rdb.Get(t.Context(), key).Int64()
		require.NoError(t, err)
		if v := Conserved("units", saleStock, s.Ops, left); len(v) > 0 {
			require.Contains(t, v[0], "oversold")
			return
		}
		require.True(t, time.Now().Before(deadline), "no lost update in a minute of racing")
	}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA abc 0","42372.88","0.768","0.272","0.759","0.847","1.111","2.879"
`
	rps, p50, p99, err := parseRedisBenchmarkCSV([]byte(out))
	require.NoError(t, err)
	require.InDelta(t, 42372.88, rps, 1e-6)
	require.Equal(t, 759*time.Microsecond, p50)
	require.Equal(t, 1111*time.Microsecond, p99)
	_, _, _, err = parseRedisBenchmarkCSV([]byte("ERROR\n"))
	require.Error(t, err)
}

func TestWriteTable_showsViolationsLoudly(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, []Result{
		{Case: "x/ok", Runs: 1, Median: 10, Min: 10, Max: 10},
		{Case: "x/bad", Runs: 1, Median: 10, Min: 10, Max: 10, Violations: []string{"oversold: 1 units"}},
		{Case: "x/skip", Skipped: "no cluster"},
	}))
	require.Contains(t, buf.String(), "!!! VIOLATION x/bad: oversold: 1 units")
	require.Contains(t, buf.String(), "no cluster")
}
