package suite

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	"github.com/redkit-go/redkit/idgen"
)

// snowflakeLimit is the most IDs per second one node of the 41/10/12 layout
// can issue: 4,096 per millisecond.
const snowflakeLimit = 4_096_000

// sonyflakeLimit is sonyflake's: 256 per 10 ms.
const sonyflakeLimit = 25_600

// maxCollected bounds the IDs kept per run for the uniqueness check.
const maxCollected = 2 << 20

// idCases are the ID generator rows.
func idCases() []Case {
	var out []Case
	for _, g := range []int{1, 2, 8} {
		out = append(out, Case{
			Name: fmt.Sprintf("ids/bwmarrin-%d", g), What: "bwmarrin/snowflake v0.3.0 Node.Generate, " + goroutines(g),
			YardstickRate: snowflakeLimit, Run: bwmarrinRun(g, false),
		})
	}
	out = append(out, Case{
		Name: "ids/sonyflake-1", What: "sony/sonyflake v1.2.0 NextID, 1 goroutine",
		YardstickRate: sonyflakeLimit,
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
			if err != nil {
				return Sample{}, err
			}
			return idRun(ctx, env, d, 1, nil, false, func(int) (int64, error) {
				id, err := sf.NextID()
				return int64(id), err
			}), nil
		},
	}, Case{
		Name: "ids/redis-incr-16", What: "one Redis INCR per ID, 16 goroutines",
		Yardstick: "server/INCR",
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			rdb, rt := client(env)
			defer rdb.Close()
			key := prefix("incr")
			return idRun(ctx, env, d, 16, rt, true, func(int) (int64, error) {
				return rdb.Incr(context.WithoutCancel(ctx), key).Result()
			}), nil
		},
	})
	for _, g := range []int{1, 2, 8} {
		out = append(out, Case{
			Name: fmt.Sprintf("ids/redkit-snowflake-%d", g), What: "idgen.Snowflake (leased node), " + goroutines(g),
			YardstickRate: snowflakeLimit, Also: []string{fmt.Sprintf("ids/bwmarrin-%d", g)},
			Run: snowflakeRun(g, false),
		})
	}
	out = append(out, Case{
		Name: "ids/redkit-segment-8", What: "idgen.Segment, 8 goroutines, after a warm-up of a fifth of the run",
		Yardstick: "ids/redis-incr-16", Run: segmentRun(false),
	}, Case{
		Name: "ids/redkit-sequence-16", What: "idgen.Sequence (one script call per ID), 16 goroutines",
		Yardstick: "ids/redis-incr-16",
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			rdb, rt := client(env)
			defer rdb.Close()
			seq, err := idgen.NewSequence(rdb, "bench", idgen.WithKeyPrefix(prefix("ids")))
			if err != nil {
				return Sample{}, err
			}
			return idRun(ctx, env, d, 16, rt, true, func(int) (int64, error) {
				id, err := seq.Next(context.WithoutCancel(ctx))
				return int64(id), err
			}), nil
		},
	})
	// The -timed rows time every call of the in-memory generators at 8
	// goroutines, for the wait percentiles and the worst wait at
	// saturation. Reading the clock twice per ID lowers their rate; the
	// untimed rows give the rate.
	out = append(out, Case{
		Name: "ids/bwmarrin-8-timed", What: "as ids/bwmarrin-8, every call timed: p50/p99 of a call, p99.9 and worst in notes",
		Run: bwmarrinRun(8, true),
	}, Case{
		Name: "ids/redkit-snowflake-8-timed", What: "as ids/redkit-snowflake-8, every call timed",
		Yardstick: "ids/bwmarrin-8-timed", Run: snowflakeRun(8, true),
	}, Case{
		Name: "ids/redkit-segment-8-timed", What: "as ids/redkit-segment-8, every call timed",
		Run: segmentRun(true),
	})
	return out
}

type runFunc = func(ctx context.Context, env *Env, d time.Duration) (Sample, error)

// bwmarrinRun runs bwmarrin/snowflake's Node.Generate on g goroutines.
func bwmarrinRun(g int, timed bool) runFunc {
	return func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
		node, err := snowflake.NewNode(1)
		if err != nil {
			return Sample{}, err
		}
		return idRun(ctx, env, d, g, nil, timed, func(int) (int64, error) { return node.Generate().Int64(), nil }), nil
	}
}

// snowflakeRun runs idgen's Snowflake, on a node leased from the server, on
// g goroutines.
func snowflakeRun(g int, timed bool) runFunc {
	return func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
		rdb, _ := client(env)
		defer rdb.Close()
		sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "bench", idgen.WithKeyPrefix(prefix("ids")))
		if err != nil {
			return Sample{}, err
		}
		defer sf.Close()
		return idRun(ctx, env, d, g, nil, timed, func(int) (int64, error) {
			id, err := sf.Next(ctx)
			return int64(id), err
		}), nil
	}
}

// segmentRun runs idgen's Segment on 8 goroutines, after a warm-up of a
// fifth of the run in which its range size adapts to the rate.
func segmentRun(timed bool) runFunc {
	return func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
		rdb, rt := client(env)
		defer rdb.Close()
		seg, err := idgen.NewSegment(rdb, "bench", idgen.WithKeyPrefix(prefix("ids")))
		if err != nil {
			return Sample{}, err
		}
		defer seg.Close()
		next := func(int) (int64, error) {
			id, err := seg.Next(ctx)
			return int64(id), err
		}
		warm := idRun(ctx, env, d/5, 8, nil, false, next)
		s := idRun(ctx, env, d, 8, rt, timed, next)
		s.Violations = append(s.Violations, warm.Violations...)
		if s.Ops > 0 && !timed {
			s.Extra = append([]Figure{
				{Name: "RT/1000 IDs", Value: float64(s.Trips) * 1000 / float64(s.Ops)},
				{Name: "ns/ID", Value: float64(s.Elapsed.Nanoseconds()) / float64(s.Ops)},
			}, s.Extra...)
		}
		return s, nil
	}
}

// idRun calls next on workers goroutines for d, keeps (up to a bound) the
// IDs, and reports repeated ones as violations, as well as any ID not above
// the previous one of its goroutine (all generators measured here issue
// increasing IDs, so that check covers the IDs not kept too). With timed, every call is
// timed (up to the same bound) for the percentiles, and the worst call of
// all is reported.
func idRun(ctx context.Context, env *Env, d time.Duration, workers int, rt *Counter, timed bool,
	next func(worker int) (int64, error)) Sample {
	per := maxCollected / workers
	if env.Quick {
		per = 1 << 16
	}
	var (
		stop  atomic.Bool
		ops   atomic.Int64
		errs  errTally
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []int64
		extra int64 // IDs issued but not kept
		// IDs not above the previous one of the same goroutine: every
		// generator here issues increasing IDs, so this checks every ID
		// for repeats within a goroutine, kept or not.
		notIncreasing int64
		lat           latencies
		worst         time.Duration
	)
	// Allocate before the clock starts.
	idBufs, waitBufs := make([][]int64, workers), make([][]time.Duration, workers)
	for w := range workers {
		idBufs[w] = make([]int64, 0, per)
		if timed {
			waitBufs[w] = make([]time.Duration, 0, per)
		}
	}
	u := usage{}
	if rt != nil {
		u = rt.usage
		rt.Reset()
	}
	u.begin(ctx)
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			ids, waits := idBufs[w], waitBufs[w]
			var (
				n, dropped int64
				prev       int64 = math.MinInt64
				backwards  int64
				slowest    time.Duration
				t0         time.Time
			)
			for !stop.Load() && ctx.Err() == nil {
				if timed {
					t0 = time.Now()
				}
				id, err := next(w)
				if err != nil {
					errs.add(err)
					continue
				}
				if timed {
					took := time.Since(t0)
					slowest = max(slowest, took)
					if len(waits) < per {
						waits = append(waits, took)
					}
				}
				n++
				if id <= prev {
					backwards++
				}
				prev = id
				if len(ids) < per {
					ids = append(ids, id)
				} else {
					dropped++
				}
			}
			ops.Add(n)
			lat.add(waits...)
			mu.Lock()
			all = append(all, ids...)
			extra += dropped
			notIncreasing += backwards
			worst = max(worst, slowest)
			mu.Unlock()
		})
	}
	wg.Wait()
	s := Sample{Ops: ops.Load(), Elapsed: time.Since(start)}
	s.CPU, s.ServerTime = u.end(ctx)
	if rt != nil {
		s.Trips, s.Commands = rt.Counts()
	}
	errs.fill(&s)
	s.Violations = Duplicates(all)
	if notIncreasing > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%d IDs not above the previous ID of the same goroutine", notIncreasing))
	}
	if timed {
		s.P50, s.P99 = percentile(lat.d, 50), percentile(lat.d, 99)
		s.Extra = append(s.Extra,
			Figure{Name: "p99.9", Value: ms(percentile(lat.d, 99.9)), Unit: "ms"},
			Figure{Name: "worst", Value: ms(worst), Unit: "ms"})
	}
	if extra > 0 {
		s.Extra = append(s.Extra, Figure{Name: "order-checked only", Value: float64(extra), Unit: " IDs"})
	}
	return s
}
