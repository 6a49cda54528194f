package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/redistest"
)

// The model tests run Sequences, Segments and leased Snowflakes under
// concurrent Next calls while rapid draws a sequence of faults and new
// processes: the counter key deleted, FLUSHALL, the node table deleted,
// Redis killed and restarted without persistence, a new generator started.
// Each generator stands for a process. Checked against the package
// documentation:
//
//   - no generator repeats its own values, and each goroutine sees them
//     increasing;
//   - two counter generators (Sequence or Segment, same name) share a value
//     only when the counter was lost at a moment it was at or above that
//     value;
//   - two leased Snowflakes share an ID only when the node table was lost
//     after the first started and before the second did (a process starting
//     after the loss, before the running holder wrote its entry back), and
//     such a start takes a running holder's node only by chance: over the
//     whole test, at most 1 + 1/20 of those starts may.

// modelSize is how many sequences TestModel_generators draws, and their
// longest length: seconds in the normal suite.
func modelSize() (checks, steps int) { return 20, 10 }

func TestModel_generators(t *testing.T) {
	checks, steps := modelSize()
	runGeneratorModel(t, checks, steps)
}

// TestChaos_Model_generators is TestModel_generators at a size for
// RUN_CHAOS=1 (200×CHAOS_SCALE sequences of up to 30 steps).
func TestChaos_Model_generators(t *testing.T) {
	runGeneratorModel(t, 200*redistest.Chaos(t), 30)
}

// modelGen is one generator (one process) and what it handed out.
type modelGen struct {
	name    string
	g       idgen.Generator
	close   func() error
	counter bool                    // Sequence or Segment; else a leased Snowflake
	key     string                  // the counter's name
	reader  *sdkmetric.ManualReader // a Snowflake's metrics: how often it leased a node
	started int                     // index of the event log when it started
	stop    chan struct{}           // closed to end its load
	wg      sync.WaitGroup

	mu  sync.Mutex
	ids []int64
}

// load calls Next in workers goroutines until stop is closed, tolerating
// the errors a fault may cause, and records every value.
func (m *modelGen) load(t *testing.T, workers int) {
	for w := 0; w < workers; w++ {
		m.wg.Go(func() {
			var got []int64
			defer func() {
				m.mu.Lock()
				m.ids = append(m.ids, got...)
				m.mu.Unlock()
			}()
			for {
				select {
				case <-m.stop:
					return
				default:
				}
				id, err := m.g.Next(context.Background())
				if err != nil {
					if errors.Is(err, idgen.ErrClosed) || errors.Is(err, idgen.ErrExhausted) {
						t.Errorf("%s: %v", m.name, err)
						return
					}
					time.Sleep(time.Millisecond) // Redis down, a lease being renewed
					continue
				}
				if len(got) > 0 && id.Int64() <= got[len(got)-1] {
					t.Errorf("%s: %d after %d in one goroutine", m.name, id, got[len(got)-1])
					return
				}
				got = append(got, id.Int64())
				if !m.counter || len(got)%64 == 0 {
					time.Sleep(200 * time.Microsecond) // leave the CPU to Redis
				}
			}
		})
	}
}

// modelEvent is a fault the model injected.
type modelEvent struct {
	kind          string           // "del", "flushall", "deltable", "restart", "start"
	counterBefore map[string]int64 // by name, each counter when it was lost (counter losses)
	tableLost     bool
}

func runGeneratorModel(t *testing.T, checks, steps int) {
	redistest.SetRapidChecks(t, checks)
	s := redistest.New(t, redistest.Options{}) // no persistence: a restart loses everything
	// go-redis re-sends a failed call (MaxRetries 3), with the arguments it
	// was built with.
	rdb := s.Client(func(o *redis.Options) { o.DialTimeout = 200 * time.Millisecond })
	// Faults go through a client of their own: calls blocked by CLIENT
	// PAUSE may hold every connection of the generators' pool.
	admin := s.Client()
	iteration := 0
	var sfStarts, sfShared atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		name := fmt.Sprintf("model%d", iteration)
		// Segments share the Sequences' counter, or have one of their own
		// (where a Segment's high floor cannot hide a Sequence's stale one).
		segName := name
		if !rapid.Bool().Draw(rt, "shared counter") {
			segName = name + "-seg"
		}
		counterKeys := []string{"redkit:idgen:v1:{" + name + "}:seq:" + name, "redkit:idgen:v1:{" + segName + "}:seq:" + segName}
		tableKey := nodeTable(name)
		ctx := context.Background()
		var events []modelEvent
		var gens []*modelGen
		defer func() {
			for _, g := range gens {
				close(g.stop)
			}
			for _, g := range gens {
				g.wg.Wait()
				_ = g.close()
			}
		}()
		start := func(kind string) {
			m := &modelGen{name: fmt.Sprintf("%s#%d", kind, len(gens)), started: len(events), stop: make(chan struct{})}
			switch kind {
			case "sequence":
				seq, err := idgen.NewSequence(rdb, name)
				if err != nil {
					rt.Fatal(err)
				}
				m.g, m.close, m.counter, m.key = seq, func() error { return nil }, true, name
			case "segment":
				step := int64(rapid.IntRange(1, 200).Draw(rt, "minStep"))
				seg, err := idgen.NewSegment(rdb, segName, idgen.WithMinStep(step), idgen.WithMaxStep(step*20))
				if err != nil {
					rt.Fatal(err)
				}
				m.g, m.close, m.counter, m.key = seg, seg.Close, true, segName
			case "snowflake":
				m.reader = sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(m.reader))
				sf, err := idgen.NewLeasedSnowflake(ctx, rdb, name, idgen.WithLeaseTTL(time.Second), idgen.WithMeterProvider(mp))
				if err != nil {
					return // Redis down: this process did not start
				}
				m.g, m.close = sf, sf.Close
			}
			if !m.counter {
				// A process starting after a table loss may share the node of
				// a holder running across it only by chance (a free node is
				// picked at random): count the starts that did.
				lost := false
				for _, e := range events {
					lost = lost || e.tableLost
				}
				if lost {
					sfStarts.Add(1)
					for _, o := range gens {
						if !o.counter && o.g.(*idgen.Snowflake).Node() == m.g.(*idgen.Snowflake).Node() {
							sfShared.Add(1)
							break
						}
					}
				}
			}
			events = append(events, modelEvent{kind: "start"})
			gens = append(gens, m)
			workers := rapid.IntRange(1, 3).Draw(rt, "workers")
			if kind == "sequence" {
				workers = rapid.IntRange(8, 16).Draw(rt, "workers") // calls in flight with older floors
			}
			m.load(t, workers)
		}
		for _, kind := range []string{"sequence", "segment", "snowflake"} {
			for range rapid.IntRange(1, 2).Draw(rt, kind+"s") {
				start(kind)
			}
		}
		n := rapid.IntRange(1, steps).Draw(rt, "steps")
		for i := 0; i < n; i++ {
			time.Sleep(time.Duration(rapid.IntRange(1, 40).Draw(rt, "ms")) * time.Millisecond)
			switch action := rapid.SampledFrom([]string{"run", "del", "flushall", "deltable", "restart", "sequence", "segment", "snowflake"}).Draw(rt, "action"); action {
			case "run":
			case "del", "flushall":
				times := 1
				if action == "del" {
					times = rapid.IntRange(1, 20).Draw(rt, "times") // a lost key, again and again
				}
				for j := 0; j < times; j++ {
					if j > 0 {
						time.Sleep(time.Millisecond)
					}
					var get [2]*redis.StringCmd
					_, err := admin.TxPipelined(ctx, func(p redis.Pipeliner) error {
						get[0], get[1] = p.Get(ctx, counterKeys[0]), p.Get(ctx, counterKeys[1])
						if action == "del" {
							p.Del(ctx, counterKeys[0])
							p.Del(ctx, counterKeys[1])
						} else {
							p.FlushAll(ctx)
						}
						return nil
					})
					if err != nil && !errors.Is(err, redis.Nil) {
						rt.Fatal(err)
					}
					e := modelEvent{kind: action, counterBefore: map[string]int64{}, tableLost: action == "flushall"}
					e.counterBefore[name], _ = get[0].Int64()
					e.counterBefore[segName], _ = get[1].Int64()
					events = append(events, e)
				}
			case "deltable":
				if err := admin.Del(ctx, tableKey).Err(); err != nil {
					rt.Fatal(err)
				}
				events = append(events, modelEvent{kind: action, tableLost: true})
			case "restart":
				// Writes are paused so that the counter read is the one lost.
				if err := admin.Do(ctx, "CLIENT", "PAUSE", 5000, "WRITE").Err(); err != nil {
					rt.Fatal(err)
				}
				e := modelEvent{kind: action, counterBefore: map[string]int64{}, tableLost: true}
				for i, n := range []string{name, segName} {
					before, err := admin.Get(ctx, counterKeys[i]).Int64()
					if err != nil && !errors.Is(err, redis.Nil) {
						rt.Fatal(err)
					}
					e.counterBefore[n] = before
				}
				if err := s.Kill(); err != nil {
					rt.Fatal(err)
				}
				time.Sleep(time.Duration(rapid.IntRange(0, 100).Draw(rt, "down ms")) * time.Millisecond)
				if err := s.Restart(t.Context()); err != nil {
					rt.Fatal(err)
				}
				events = append(events, e)
			default:
				start(action)
			}
		}
		time.Sleep(20 * time.Millisecond)
		for _, g := range gens {
			close(g.stop)
		}
		for _, g := range gens {
			g.wg.Wait()
		}
		gens2 := gens
		gens = nil // closed below, not again by the deferred cleanup
		for _, g := range gens2 {
			if err := g.close(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				rt.Logf("close %s: %v", g.name, err)
			}
		}
		if t.Failed() {
			rt.Fatal("a load goroutine failed")
		}
		checkModel(rt, gens2, events)
	})
	t.Logf("%d Snowflake starts after a table loss, %d on a running holder's node", sfStarts.Load(), sfShared.Load())
	if sfShared.Load() > 1+sfStarts.Load()/20 {
		t.Fatalf("%d of %d Snowflake starts after a table loss took a running holder's node: free nodes are not picked at random",
			sfShared.Load(), sfStarts.Load())
	}
}

// acquires returns how many times a Snowflake leased a node.
func acquires(rt *rapid.T, m *modelGen) int64 {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		rt.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "redkit.idgen.lease.operations" {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				op, _ := dp.Attributes.Value(otelx.AttrOperation)
				outcome, _ := dp.Attributes.Value("redkit.outcome")
				if op.AsString() == "acquire" && outcome.AsString() == "ok" {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// checkModel checks what each generator handed out against the faults.
func checkModel(rt *rapid.T, gens []*modelGen, events []modelEvent) {
	owner := map[string]map[int64]int{} // counter (or "" for Snowflakes) -> value -> first generator that had it
	for gi, g := range gens {
		seen := map[int64]bool{}
		for _, v := range g.ids {
			if seen[v] {
				rt.Fatalf("%s repeated its own value %d", g.name, v)
			}
			seen[v] = true
			m := owner[g.key]
			if m == nil {
				m = map[int64]int{}
				owner[g.key] = m
			}
			oi, shared := m[v]
			if !shared {
				m[v] = gi
				continue
			}
			other := gens[oi]
			if g.counter {
				// The counter must have been lost while at or above v.
				ok := false
				for _, e := range events {
					before, lost := e.counterBefore[g.key]
					ok = ok || (lost && before >= v)
				}
				if !ok {
					rt.Fatalf("%s and %s both had %d, and the counter was never lost above it (events %+v)", other.name, g.name, v, events)
				}
				continue
			}
			// A Snowflake ID is shared only by a process started after a
			// table loss with one that was running across it, or after a
			// loss by a holder that leased a node again (its lease ran out
			// before a renewal got through, or its node was taken).
			first, second := other, g
			if first.started > second.started {
				first, second = second, first
			}
			ok, lost := false, false
			for ei, e := range events {
				lost = lost || e.tableLost
				ok = ok || (e.tableLost && ei >= first.started && ei < second.started)
			}
			ok = ok || (lost && (acquires(rt, first) > 1 || acquires(rt, second) > 1))
			if !ok {
				rt.Fatalf("%s and %s both issued %d, with no table loss between their starts (events %+v)", other.name, g.name, v, events)
			}
		}
	}
}
