package suite

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redkit-go/redkit/redistest"
)

// RedisBenchmarkHint says how to get redis-benchmark on Debian and Ubuntu.
const RedisBenchmarkHint = "install it with: sudo apt-get install -y redis-tools"

// rbClients is the client count of every redis-benchmark run, the same as
// the widest Go case (64 buyers).
const rbClients = 64

// rbKeyspace is the -r range of __rand_int__: wide enough that two calls
// seldom draw the same operation ID.
const rbKeyspace = 1_000_000_000

// FindRedisBenchmark returns the path of redis-benchmark: on PATH, or next
// to the redis-server redistest runs. "" when there is none.
func FindRedisBenchmark() string {
	if p, err := exec.LookPath("redis-benchmark"); err == nil {
		return p
	}
	if srv, err := redistest.Binary(); err == nil {
		p := filepath.Join(filepath.Dir(srv), "redis-benchmark")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// rbRates remembers the last rate of each command line, to size the next
// run to the requested duration.
var rbRates sync.Map // string -> float64

// redisBenchmark runs redis-benchmark against the case's server with 64
// clients for about d, with args naming the test (-t set) or the command.
// Ops is the number of requests; Elapsed is derived from the reported rate.
func redisBenchmark(ctx context.Context, env *Env, d time.Duration, args ...string) (Sample, error) {
	key := strings.Join(args, " ")
	rate, ok := rbRates.Load(key)
	if !ok {
		// Calibrate with a short run.
		s, err := redisBenchmarkN(ctx, env, 1000, args)
		if err != nil {
			return Sample{}, err
		}
		rate = s.Rate()
	}
	n := max(int64(rate.(float64)*d.Seconds()), 1000)
	s, err := redisBenchmarkN(ctx, env, n, args)
	if err == nil {
		rbRates.Store(key, s.Rate())
	}
	return s, err
}

func redisBenchmarkN(ctx context.Context, env *Env, n int64, args []string) (Sample, error) {
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(env.Server.Port()),
		"-c", strconv.Itoa(rbClients), "-n", strconv.FormatInt(n, 10),
		"-r", strconv.Itoa(rbKeyspace), "--csv"}, args...)
	cmd := exec.CommandContext(ctx, env.RedisBenchmark, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	u := usage{addrs: []string{env.Server.Addr()}}
	u.begin(ctx)
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("redis-benchmark: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	cpu, server := u.end(ctx)
	rps, p50, p99, err := parseRedisBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return Sample{}, err
	}
	return Sample{
		Ops:        n,
		Elapsed:    time.Duration(float64(n) / rps * float64(time.Second)),
		Trips:      n,
		Commands:   n,
		P50:        p50,
		P99:        p99,
		CPU:        cpu,
		ServerTime: server,
	}, nil
}

// parseRedisBenchmarkCSV reads the last data row of redis-benchmark --csv:
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
func parseRedisBenchmarkCSV(out []byte) (rps float64, p50, p99 time.Duration, err error) {
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("redis-benchmark output: %w", err)
	}
	if len(recs) < 2 || len(recs[len(recs)-1]) < 7 {
		return 0, 0, 0, fmt.Errorf("redis-benchmark output: no result in %q", out)
	}
	row := recs[len(recs)-1]
	f := func(i int) float64 { v, _ := strconv.ParseFloat(row[i], 64); return v }
	rps = f(1)
	if rps <= 0 {
		return 0, 0, 0, fmt.Errorf("redis-benchmark output: no rate in %q", out)
	}
	msDur := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return rps, msDur(f(4)), msDur(f(6)), nil
}

// scriptLoad loads src on the case's server and returns its SHA1.
func scriptLoad(ctx context.Context, env *Env, src string) (string, error) {
	rdb, _ := client(env)
	defer rdb.Close()
	return rdb.ScriptLoad(ctx, src).Result()
}

// serverCases are the server's own ceilings, from redis-benchmark.
func serverCases() []Case {
	rb := func(name, what string, setup func(ctx context.Context, env *Env) ([]string, error)) Case {
		return Case{Name: name, What: what, Needs: "redis-benchmark",
			Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
				args, err := setup(ctx, env)
				if err != nil {
					return Sample{}, err
				}
				return redisBenchmark(ctx, env, d, args...)
			}}
	}
	fixed := func(args ...string) func(context.Context, *Env) ([]string, error) {
		return func(context.Context, *Env) ([]string, error) { return args, nil }
	}
	return []Case{
		rb("server/SET", "redis-benchmark SET, random keys, 64 clients", fixed("-t", "set")),
		// 16 clients, as the 16 goroutines of the ID rows compared with it.
		rb("server/INCR", "redis-benchmark INCR, 16 clients", fixed("-c", "16", "-t", "incr")),
		rb("server/EVALSHA-return1", "redis-benchmark EVALSHA of `return 1`, 64 clients",
			func(ctx context.Context, env *Env) ([]string, error) {
				sha, err := scriptLoad(ctx, env, "return 1")
				return []string{"EVALSHA", sha, "0"}, err
			}),
	}
}
