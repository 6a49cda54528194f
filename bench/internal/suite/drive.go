package suite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook counting round trips and commands: a single
// command is one of each; a pipeline is one round trip and len(cmds)
// commands. The handshake of a new connection (HELLO, CLIENT SETINFO) is
// not counted: it is a cost of the pool, not of an operation.
type Counter struct {
	trips, cmds atomic.Int64
	usage       usage // the servers the client talks to
}

func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

var _ redis.Hook = (*Counter)(nil)

// DialHook implements redis.Hook.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			c.trips.Add(1)
			c.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := int64(0)
		for _, cmd := range cmds {
			if !handshake(cmd) {
				n++
			}
		}
		if n > 0 {
			c.trips.Add(1)
			c.cmds.Add(n)
		}
		return next(ctx, cmds)
	}
}

// Reset zeroes the counts.
func (c *Counter) Reset() { c.trips.Store(0); c.cmds.Store(0) }

// Counts returns the round trips and commands since the last Reset.
func (c *Counter) Counts() (trips, cmds int64) { return c.trips.Load(), c.cmds.Load() }

// poolSize fits the 64 concurrent callers of the widest case.
const poolSize = 128

// client returns a new client of the case's server with a Counter hook.
func client(env *Env) (*redis.Client, *Counter) {
	rdb := redis.NewClient(&redis.Options{Addr: env.Server.Addr(), PoolSize: poolSize})
	c := &Counter{usage: usage{addrs: []string{env.Server.Addr()}}}
	rdb.AddHook(c)
	return rdb, c
}

// clusterClient returns a new client of the case's cluster with a Counter
// hook on every node, so that a pipeline split over three nodes counts as
// three round trips.
func clusterClient(env *Env) (*redis.ClusterClient, *Counter) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: env.Cluster.Addrs(), PoolSize: poolSize})
	c := &Counter{usage: usage{addrs: env.Cluster.Addrs()}}
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(c) })
	return rdb, c
}

var prefixSeq atomic.Int64

// prefix returns a key prefix no other run of this process uses.
func prefix(kind string) string {
	return fmt.Sprintf("bench-%s-%d-%d", kind, time.Now().UnixNano()%1e9, prefixSeq.Add(1))
}

func goroutines(n int) string {
	if n == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", n)
}

// errSkip marks an operation that neither succeeded nor failed (a refused
// attempt the case tallies on its own).
var errSkip = errors.New("skip")

// errTally counts unexpected errors and keeps the first.
type errTally struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (t *errTally) add(err error) {
	t.n.Add(1)
	t.once.Do(func() { t.first = err.Error() })
}

func (t *errTally) fill(s *Sample) {
	s.Errors = t.n.Load()
	s.FirstError = t.first
}

// drive runs op on workers goroutines until d has passed (or ctx ends) and
// returns the number of successful calls and the time measured. The ctx
// handed to op ends at the deadline; an error after that is not counted.
// Round trips are counted on rt from the start of the measurement. With
// timed, the latency percentiles of the successful calls are filled in.
func drive(ctx context.Context, d time.Duration, workers int, rt *Counter, timed bool,
	op func(ctx context.Context, worker int) error) Sample {
	var (
		ops  atomic.Int64
		errs errTally
		wg   sync.WaitGroup
		lat  latencies
		stop atomic.Bool
	)
	u := usage{}
	if rt != nil {
		u = rt.usage
		rt.Reset()
	}
	u.begin(ctx)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			var (
				n    int64
				mine []time.Duration
				t0   time.Time
			)
			for !stop.Load() && ctx.Err() == nil {
				if timed {
					t0 = time.Now()
				}
				err := op(ctx, w)
				switch {
				case err == nil:
					n++
					if timed {
						mine = append(mine, time.Since(t0))
					}
				case errors.Is(err, errSkip), ctx.Err() != nil:
				default:
					errs.add(err)
				}
			}
			ops.Add(n)
			lat.add(mine...)
		})
	}
	wg.Wait()
	s := Sample{Ops: ops.Load(), Elapsed: time.Since(start)}
	s.CPU, s.ServerTime = u.end(context.WithoutCancel(ctx))
	if timed {
		s.P50, s.P99 = percentile(lat.d, 50), percentile(lat.d, 99)
	}
	if rt != nil {
		s.Trips, s.Commands = rt.Counts()
	}
	errs.fill(&s)
	return s
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// percentile returns the p-th percentile (0..100) of d, sorting d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(float64(len(d)-1) * p / 100)
	return d[i]
}
