package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// The failover model runs Sequences and Segments of one name, each a
// process with a client of its own, on a primary whose replica replicates
// it through a link that can be cut (a partition: what the primary writes
// meanwhile never reaches the replica). rapid draws the client type of
// each process (a *redis.Client, a wrapper implementing ClientWrapper, a
// wrapper that does not), how long its calls wait (some are given up at
// once, their replies still on the way), and a sequence of steps: a burst
// of calls of one process, the link cut or healed, the primary killed and
// its replica promoted (a new replica then joins it), a new process started
// (while a replica is connected: one that starts without seeing a replica
// never waits for one, as the package documentation says). Checked:
//
//   - no two values are the same, across every generator and failover:
//     with replicas, a reservation no replica acknowledged is never handed
//     out, whatever client the process has;
//   - a client type whose primary idgen cannot find is refused at start.

// failoverModelSize is how many sequences TestModel_failover draws, and
// their longest length: seconds in the normal suite.
func failoverModelSize() (checks, steps int) { return 6, 10 }

func TestModel_failover(t *testing.T) {
	checks, steps := failoverModelSize()
	runFailoverModel(t, checks, steps)
}

// TestChaos_Model_failover is TestModel_failover at a size for RUN_CHAOS=1
// (40×CHAOS_SCALE sequences of up to 12 steps).
func TestChaos_Model_failover(t *testing.T) {
	runFailoverModel(t, 40*redistest.Chaos(t), 12)
}

// replicated is a primary, its replica behind a link that can be cut, and
// the address every process dials (the current primary's).
type replicated struct {
	t       *testing.T
	primary *redistest.Server
	replica *redistest.Server
	link    *redistest.Proxy
	addr    atomic.Value // string
	servers []*redistest.Server
}

func newReplicated(t *testing.T) *replicated {
	r := &replicated{t: t}
	r.primary = r.start()
	r.addr.Store(r.primary.Addr())
	r.replica, r.link = r.follower(r.primary)
	return r
}

func (r *replicated) start() *redistest.Server {
	s, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.servers = append(r.servers, s)
	return s
}

func (r *replicated) close() {
	for _, s := range r.servers {
		_ = s.Close()
	}
}

// follower starts a replica of primary through a new link.
func (r *replicated) follower(primary *redistest.Server) (*redistest.Server, *redistest.Proxy) {
	s := r.start()
	link, err := redistest.StartProxy(primary.Addr())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = link.Close() })
	host, port, _ := net.SplitHostPort(link.Addr())
	c := s.Client()
	if err := c.Do(context.Background(), "REPLICAOF", host, port).Err(); err != nil {
		r.t.Fatal(err)
	}
	// A process that starts before the replica is connected counts none
	// and never waits for one (see the package documentation): the model
	// starts processes only while a replica is connected.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return s, link
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("replica %s not in sync", s.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failover kills the primary, promotes the replica and gives it a new
// replica; processes reconnect to it.
func (r *replicated) failover(rt *rapid.T) {
	if err := r.primary.Kill(); err != nil {
		rt.Fatal(err)
	}
	if err := r.replica.Client().Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		rt.Fatal(err)
	}
	r.primary = r.replica
	r.addr.Store(r.primary.Addr())
	r.replica, r.link = r.follower(r.primary)
}

// client returns a go-redis client of the current primary, following
// failovers, sending each command once.
func (r *replicated) client() *redis.Client {
	c := redis.NewClient(&redis.Options{
		MaxRetries:  -1,
		DialTimeout: time.Second,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.addr.Load().(string))
		},
	})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

type failoverGen struct {
	name  string
	g     idgen.Generator
	close func() error
	wait  time.Duration // how long each call waits before it is given up
}

func runFailoverModel(t *testing.T, checks, maxSteps int) {
	redistest.SetRapidChecks(t, checks)
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		r := newReplicated(t)
		defer r.close()
		name := fmt.Sprintf("fo%d", seq)
		var gens []*failoverGen
		defer func() {
			for _, g := range gens {
				if g.close != nil {
					_ = g.close()
				}
			}
		}()
		owner := map[int64]string{}
		cut := false
		start := func() {
			rdb := r.client()
			var c redis.UniversalClient = rdb
			switch rapid.SampledFrom([]string{"client", "unwrapping", "embedded"}).Draw(rt, "client type") {
			case "unwrapping":
				c = unwrapping{rdb}
			case "embedded":
				_, err := idgen.NewSequence(embedded{rdb}, name)
				if !errors.Is(err, idgen.ErrInvalid) {
					rt.Fatalf("BUG: a wrapper without ClientWrapper was accepted: %v", err)
				}
				return
			}
			fg := &failoverGen{name: fmt.Sprintf("gen%d", len(gens))}
			fg.wait = rapid.SampledFrom([]time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second}).Draw(rt, "call waits")
			opts := []idgen.Option{idgen.WithReplicaAckTimeout(200 * time.Millisecond)}
			if rapid.Bool().Draw(rt, "segment") {
				step := int64(rapid.IntRange(1, 20).Draw(rt, "step"))
				seg, err := idgen.NewSegment(c, name, append(opts, idgen.WithMinStep(step), idgen.WithMaxStep(step*4))...)
				if err != nil {
					rt.Fatal(err)
				}
				fg.g, fg.close = seg, seg.Close
			} else {
				s, err := idgen.NewSequence(c, name, opts...)
				if err != nil {
					rt.Fatal(err)
				}
				fg.g = s
			}
			gens = append(gens, fg)
		}
		// burst makes n calls of g, one after the other (some are given
		// up, their replies still on the way), and checks each value.
		burst := func(g *failoverGen, n int) {
			for range n {
				ctx, cancel := context.WithTimeout(context.Background(), g.wait)
				id, err := g.g.Next(ctx)
				cancel()
				if err != nil {
					continue
				}
				if o, dup := owner[id.Int64()]; dup {
					rt.Fatalf("BUG: %s and %s both handed out %d", o, g.name, id)
				}
				owner[id.Int64()] = g.name
			}
		}
		start()
		for i := range rapid.IntRange(1, maxSteps).Draw(rt, "steps") {
			switch rapid.SampledFrom([]string{"burst", "burst", "burst", "cut", "cut", "heal", "failover", "failover", "start", "start"}).Draw(rt, fmt.Sprint("step ", i)) {
			case "burst":
				if len(gens) > 0 {
					g := gens[rapid.IntRange(0, len(gens)-1).Draw(rt, "generator")]
					burst(g, rapid.SampledFrom([]int{1, 5, 20}).Draw(rt, "calls"))
				}
			case "cut":
				if err := r.link.Cut(true); err != nil {
					rt.Fatal(err)
				}
				cut = true
			case "heal":
				if err := r.link.Cut(false); err != nil {
					rt.Fatal(err)
				}
				cut = false
			case "failover":
				r.failover(rt)
				cut = false
			case "start":
				if !cut { // a process started while no replica is connected counts none (documented)
					start()
				}
			}
		}
	})
}
