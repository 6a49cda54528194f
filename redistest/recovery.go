package redistest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientShape is one way an application makes its ClusterClient.
type ClientShape struct {
	Name   string
	Adjust func(*redis.ClusterOptions)
}

// ClientShapes are the two shapes every Cluster test runs on: go-redis's
// defaults (the client re-sends and follows MOVED and ASK itself), and
// send-once (MaxRetries and MaxRedirects -1), which leaves every retry to
// the caller.
var ClientShapes = []ClientShape{
	{"defaults", func(*redis.ClusterOptions) {}},
	{"send-once", func(o *redis.ClusterOptions) { o.MaxRetries, o.MaxRedirects = -1, -1 }},
}

// AppClient returns a ClusterClient on the cluster made as an application
// makes its own: seeded with every node's address, adjusted by opt, and
// never refreshed by the cluster's operations (unlike Client's, which
// Failover refreshes), so after a fault its slot map is as stale as an
// application's. Close closes it.
func (c *Cluster) AppClient(opt ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: c.Nodes()[0].tlsConfig()}
	for _, f := range opt {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	c.mu.Lock()
	c.appClients = append(c.appClients, cc)
	c.mu.Unlock()
	return cc
}

// RecoveryFault is a Cluster fault that MeasureRecovery injects on the
// shard serving a key.
type RecoveryFault struct {
	Name string
	// Inject injects the fault and returns once the cluster agrees that it
	// is over for a caller of key (a new master serves the slot, the shard
	// is back), and a restore that puts the cluster back in shape for the
	// next fault (nil for none), which is not measured.
	Inject func(ctx context.Context, c *Cluster, key string) (restore func(context.Context) error, err error)
}

// RecoveryFaults are the faults a master's death or a slot's move can be:
// a clean CLUSTER FAILOVER; the master killed and left down (its replica
// promoted; a new node replaces it afterwards); the master killed and back
// on another port; the slot migrated; the whole shard (master and
// replicas) killed and restarted (give the cluster AOF to keep the data).
// Each needs a replica per master, and the kills a short
// cluster-node-timeout.
func RecoveryFaults() []RecoveryFault {
	return []RecoveryFault{
		{"clean failover (CLUSTER FAILOVER)", func(ctx context.Context, c *Cluster, key string) (func(context.Context) error, error) {
			return nil, c.Failover(ctx, key, FailoverPlain)
		}},
		{"master killed, stays down", func(ctx context.Context, c *Cluster, key string) (func(context.Context) error, error) {
			killed, err := c.KillMaster(ctx, key)
			return func(ctx context.Context) error { _, err := c.Replace(ctx, killed); return err }, err
		}},
		{"master killed, rejoins on another port", func(ctx context.Context, c *Cluster, key string) (func(context.Context) error, error) {
			killed, err := c.KillMaster(ctx, key)
			if err != nil {
				return nil, err
			}
			_, err = c.RejoinElsewhere(ctx, killed)
			return nil, err
		}},
		{"slot migrated", func(ctx context.Context, c *Cluster, key string) (func(context.Context) error, error) {
			_, err := c.MoveSlot(ctx, key)
			return nil, err
		}},
		{"shard down and back", func(ctx context.Context, c *Cluster, key string) (func(context.Context) error, error) {
			down, err := c.KillShard(ctx, key)
			if err != nil {
				return nil, err
			}
			for _, s := range down {
				if err := c.Rejoin(ctx, s); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}},
	}
}

// Recovery is what MeasureRecovery saw.
type Recovery struct {
	Fault string
	// Outage is from the fault's start to the cluster's agreement that it
	// is over (Inject's return).
	Outage time.Duration
	// Next is from the agreement until every caller's first call started
	// after it was answered: how long a caller waits for its next call to
	// succeed once the cluster has settled.
	Next time.Duration
	// Slowest is the longest call of the run.
	Slowest time.Duration
	// Calls counts the calls made; Errors the errors they returned, by
	// kind; ErrorsAfter the calls started after the agreement that failed.
	Calls       int
	Errors      map[string]int
	ErrorsAfter int
}

// String is one line for a test log: the fault, Outage, Next, Slowest,
// calls and errors.
func (r Recovery) String() string {
	var kinds []string
	for k, n := range r.Errors {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%s | outage %v | next call answered %v after | slowest call %v | %d calls | errors after: %d | errors: %s",
		r.Fault, r.Outage.Round(time.Millisecond), r.Next.Round(time.Millisecond), r.Slowest.Round(time.Millisecond),
		r.Calls, r.ErrorsAfter, strings.Join(kinds, ", "))
}

// RecoveryRun is the work MeasureRecovery runs during a fault.
type RecoveryRun struct {
	// Callers call Call again and again, each with its own w, i counting
	// its calls; Call returns nil when the call was answered (a success or
	// a decision), an error otherwise. Each call has a 30 s timeout.
	Callers int
	Call    func(ctx context.Context, w, i int) error
	// Kinds names the sentinel errors to tally by name (errors.Is); any
	// other error is tallied by its text.
	Kinds map[string]error
}

// MeasureRecovery runs r while f hits the shard serving key: the callers
// start, each is answered once (so the clients have their slot maps and
// connections), f is injected, and the callers go on until each has had a
// call started after the cluster's agreement answered (at most a minute).
// Then f's restore runs. tb fails if the fault could not be injected,
// restored, or a caller never got an answer after it.
func (c *Cluster) MeasureRecovery(tb testing.TB, ctx context.Context, key string, f RecoveryFault, r RecoveryRun) Recovery {
	tb.Helper()
	var (
		mu      sync.Mutex
		rec     = Recovery{Fault: f.Name, Errors: map[string]int{}}
		agreed  time.Time
		warm    = make([]bool, r.Callers)
		after   = make([]bool, r.Callers)
		nwarm   int
		nafter  int
		warmed  = make(chan struct{})
		settled = make(chan struct{})
	)
	kind := func(err error) string {
		for name, k := range r.Kinds {
			if errors.Is(err, k) {
				return name
			}
		}
		return err.Error()
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range r.Callers {
		wg.Go(func() {
			for i := 0; run.Err() == nil; i++ {
				start := time.Now()
				cctx, cancel := context.WithTimeout(context.WithoutCancel(run), 30*time.Second)
				err := r.Call(cctx, w, i)
				cancel()
				end := time.Now()
				mu.Lock()
				rec.Calls++
				rec.Slowest = max(rec.Slowest, end.Sub(start))
				started := !agreed.IsZero() && !start.Before(agreed)
				if err != nil {
					rec.Errors[kind(err)]++
					if started {
						rec.ErrorsAfter++
					}
				} else {
					if !warm[w] {
						warm[w] = true
						if nwarm++; nwarm == r.Callers {
							close(warmed)
						}
					}
					if started && !after[w] {
						after[w] = true
						rec.Next = max(rec.Next, end.Sub(agreed))
						if nafter++; nafter == r.Callers {
							close(settled)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	fail := func(format string, a ...any) {
		stop()
		wg.Wait()
		tb.Fatalf(format, a...)
	}
	select {
	case <-warmed:
	case <-time.After(time.Minute):
		fail("%s: the callers were never answered before the fault", f.Name)
	}
	// The last fault's aftermath (replicas still syncing, the masters'
	// vote window) is not this fault's outage.
	if err := c.settle(ctx, key); err != nil {
		fail("%s: %v", f.Name, err)
	}
	start := time.Now()
	restore, err := f.Inject(ctx, c, key)
	if err != nil {
		fail("%s: %v", f.Name, err)
	}
	mu.Lock()
	agreed = time.Now()
	rec.Outage = agreed.Sub(start)
	mu.Unlock()
	select {
	case <-settled:
	case <-time.After(time.Minute):
		fail("%s: a caller got no answer within a minute of the cluster's agreement", f.Name)
	}
	stop()
	wg.Wait()
	if restore != nil {
		if err := restore(ctx); err != nil {
			tb.Fatalf("%s: restore: %v", f.Name, err)
		}
	}
	return rec
}

// DialProber is the function of go-redis's goroutine that probes a node
// whose dials kept failing, once a second, until its client is closed
// (ConnPool.tryDial). It sees the Close only after the next second's
// sleep, longer than goleak looks again for goroutines to end, so packages
// whose tests kill nodes for good pass it to goleak.IgnoreAnyFunction.
const DialProber = "github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"

// settle waits until every node agrees and the masters would vote about
// the master serving key's slot again (see Failover).
func (c *Cluster) settle(ctx context.Context, key string) error {
	if err := c.waitStable(ctx); err != nil {
		return err
	}
	sh, err := c.shardOf(ctx, key)
	if err != nil {
		return err
	}
	c.mu.Lock()
	wait := time.Until(c.votedAbout[sh.master].Add(2*c.nodeTimeout() + 100*time.Millisecond))
	c.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
