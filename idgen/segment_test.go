package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// drain takes n values from g in each of workers goroutines per generator,
// checking that each goroutine sees increasing values, and returns them all.
func drain(t testing.TB, gens []idgen.Generator, workers, n int) []int64 {
	t.Helper()
	var mu sync.Mutex
	all := make([]int64, 0, len(gens)*workers*n)
	var wg sync.WaitGroup
	for _, g := range gens {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]int64, 0, n)
				for i := 0; i < n; i++ {
					id, err := g.Next(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					got = append(got, id.Int64())
				}
				requireIncreasing(t, got)
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return all
}

// segments returns n Segments of one name on rdb, as n processes would
// have, closed at the end of t.
func segments(t *testing.T, rdb redis.UniversalClient, n int, name string, opts ...idgen.Option) []idgen.Generator {
	gens := make([]idgen.Generator, n)
	for i := range gens {
		seg, err := idgen.NewSegment(rdb, name, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, seg.Close()) })
		gens[i] = seg
	}
	return gens
}

func uniqueSegments(t *testing.T, total int) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	gens := segments(t, rdb, 4, "orders", idgen.WithMinStep(100), idgen.WithMaxStep(50_000))
	all := drain(t, gens, 2, total/8)
	require.Len(t, all, total)
	requireUnique(t, all)
}

func TestSegment_Next_uniqueAcrossGenerators_ConcurrentSafe(t *testing.T) {
	uniqueSegments(t, 1_000_000)
}

func TestChaos_Segment_Next_unique10M(t *testing.T) {
	uniqueSegments(t, 10_000_000*redistest.Chaos(t))
}

func TestSegment_Next_increasingAndRoundTrips(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	var calls scriptCounter
	rdb := s.Client()
	rdb.AddHook(&calls)
	seg, err := idgen.NewSegment(rdb, "inv", idgen.WithMinStep(10), idgen.WithMaxStep(1_000_000))
	require.NoError(t, err)
	defer seg.Close()
	var prev idgen.ID
	const n = 300_000
	for i := 0; i < n; i++ {
		id, err := seg.Next(t.Context())
		require.NoError(t, err)
		if id <= prev {
			t.Fatalf("%d after %d", id, prev)
		}
		prev = id
	}
	// Fixed ranges of 10 would take 30,000 round trips; adaptive ranges grow
	// to last ~10s at the observed rate, so a few dozen fetches suffice.
	require.Less(t, calls.n.Load(), int64(200), "fetches")
	require.Greater(t, seg.Runway(), int64(0))
}

func TestSegment_noGoroutineWhileIdle(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	before := goleak.IgnoreCurrent()
	seg, err := idgen.NewSegment(rdb, "idle", idgen.WithMinStep(10), idgen.WithMaxStep(10))
	require.NoError(t, err)
	require.NoError(t, goleak.Find(before), "NewSegment started a goroutine")
	for i := 0; i < 25; i++ { // crosses ranges and the prefetch point
		_, err := seg.Next(t.Context())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return seg.Runway() > 10 }, 10*time.Second, time.Millisecond)
	require.NoError(t, goleak.Find(before))
	require.NoError(t, seg.Close())
	_, err = seg.Next(t.Context())
	require.ErrorIs(t, err, idgen.ErrClosed)
	require.NoError(t, seg.Close())
}

func TestSegment_KillRedis_servesRunwayThenRecovers(t *testing.T) {
	s := redistest.New(t, redistest.Options{}) // no persistence: the restart loses the counter
	rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1; o.DialTimeout = 200 * time.Millisecond })
	seg, err := idgen.NewSegment(rdb, "kill", idgen.WithMinStep(1000), idgen.WithMaxStep(1000))
	require.NoError(t, err)
	defer seg.Close()
	var issued []int64
	nextCtx := func(ctx context.Context) error {
		id, err := seg.Next(ctx)
		if err == nil {
			issued = append(issued, id.Int64())
		}
		return err
	}
	next := func() error { return nextCtx(t.Context()) }
	require.NoError(t, next())
	for i := 0; i < 300; i++ { // past the prefetch point
		require.NoError(t, next())
	}
	require.Eventually(t, func() bool { return seg.Runway() == 1699 }, 10*time.Second, time.Millisecond)

	require.NoError(t, s.Kill())
	runway := seg.Runway()
	served := 0
	for ; ; served++ {
		if err := next(); err != nil {
			require.ErrorIs(t, err, idgen.ErrUnavailable)
			break
		}
	}
	require.Equal(t, int(runway), served, "served exactly the runway")
	require.Zero(t, seg.Runway())
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err = nextCtx(ctx) // bounded by the caller's deadline while Redis is down
	cancel()
	require.ErrorIs(t, err, idgen.ErrUnavailable)

	require.NoError(t, s.Restart(t.Context()))
	require.Eventually(t, func() bool { return next() == nil }, 30*time.Second, 20*time.Millisecond)
	for i := 0; i < 3000; i++ {
		require.NoError(t, next())
	}
	requireIncreasing(t, issued)
	// The restarted server had lost the counter; the Segment moved it past its own values.
	v, err := rdb.Get(t.Context(), "redkit:idgen:v1:{kill}:seq:kill").Int64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, v, issued[len(issued)-1])
}

func TestSegment_Next_ctxBoundsWait(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	seg, err := idgen.NewSegment(rdb, "paused", idgen.WithFetchTimeout(30*time.Second))
	require.NoError(t, err)
	defer seg.Close()
	require.NoError(t, s.Pause())
	defer func() { _ = s.Resume() }()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = seg.Next(ctx)
	require.ErrorIs(t, err, idgen.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, s.Resume())
	id, err := seg.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, idgen.ID(1), id)
}

func TestSegment_replicaAck_failover_noDuplicates(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	var primary atomic.Value
	primary.Store(p.Primary.Addr())
	rdb := redis.NewClient(&redis.Options{
		MaxRetries:  -1,
		DialTimeout: time.Second,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, primary.Load().(string))
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	gens := segments(t, rdb, 4, "fo", idgen.WithMinStep(50), idgen.WithMaxStep(500))

	stop := make(chan struct{})
	collect := loadUntil(t, gens, 1, stop)
	counterAtLeast := func(n int64) {
		t.Helper()
		require.Eventually(t, func() bool {
			v, _ := rdb.Get(t.Context(), "redkit:idgen:v1:{fo}:seq:fo").Int64()
			return v >= n
		}, 60*time.Second, 5*time.Millisecond, "counter below %d", n)
	}
	counterAtLeast(20_000)
	require.NoError(t, p.Failover(t.Context()))
	primary.Store(p.Primary.Addr())
	require.NoError(t, p.Replica.KillClients(t.Context())) // clients reconnect to the new primary
	counterAtLeast(40_000)
	close(stop)
	perGen, _ := collect()
	all := slices.Concat(perGen...)
	require.Greater(t, len(all), 1000)
	requireUnique(t, all)
}

func TestSegment_replicaAck_required(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	var calls waitCounter
	rdb := p.Primary.Client()
	rdb.AddHook(&calls)
	seg, err := idgen.NewSegment(rdb, "acked", idgen.WithMinStep(10), idgen.WithMaxStep(10),
		idgen.WithReplicaAckTimeout(time.Second))
	require.NoError(t, err)
	defer seg.Close()
	require.Eventually(t, func() bool { _, err := seg.Next(t.Context()); return err == nil },
		30*time.Second, 20*time.Millisecond)
	require.Positive(t, calls.n.Load(), "fetches wait for a replica")

	// A replica that cannot acknowledge: the range is never served.
	require.NoError(t, p.Replica.Pause())
	var got error
	for i := 0; i < 100 && got == nil; i++ {
		_, got = seg.Next(t.Context())
	}
	require.ErrorIs(t, got, idgen.ErrUnavailable)
	require.ErrorContains(t, got, "replica")
	require.NoError(t, p.Replica.Resume())
	require.Eventually(t, func() bool { _, err := seg.Next(t.Context()); return err == nil }, 30*time.Second, 20*time.Millisecond)

	// A replica that is gone (the primary counts none connected) is waited
	// for all the same: reserving without it would let a later failover to
	// it hand the range out again.
	require.NoError(t, p.Replica.Kill())
	require.Eventually(t, func() bool {
		info, _ := rdb.Info(t.Context(), "replication").Result()
		return strings.Contains(info, "connected_slaves:0")
	}, 30*time.Second, 20*time.Millisecond)
	got = nil
	for i := 0; i < 100 && got == nil; i++ {
		_, got = seg.Next(t.Context())
	}
	require.ErrorIs(t, got, idgen.ErrUnavailable)
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		_, err := seg.Next(t.Context()) // re-probed after each failure: still no range without a replica
		require.ErrorIs(t, err, idgen.ErrUnavailable)
	}
	require.NoError(t, p.Replica.Restart(t.Context()))
	require.Eventually(t, func() bool { _, err := seg.Next(t.Context()); return err == nil }, 30*time.Second, 20*time.Millisecond)
}

// waitCounter counts WAIT commands.
type waitCounter struct{ n atomic.Int64 }

func (c *waitCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (c *waitCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *waitCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "wait" {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// Repeated kills under load. With the counter persisted (AOF, fsync always)
// no value is ever handed out twice. Without persistence the counter restarts
// at 0: each Segment still never repeats its own values, but two Segments can
// be handed overlapping ranges (documented).
func TestChaos_Segment_KillRestart_underLoad(t *testing.T) {
	scale := redistest.Chaos(t)
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprintf("aof=%v", aof), func(t *testing.T) {
			s := redistest.New(t, redistest.Options{AOF: aof, AppendFsync: "always"})
			rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1; o.DialTimeout = 200 * time.Millisecond })
			gens := segments(t, rdb, 4, "chaos", idgen.WithMinStep(100), idgen.WithMaxStep(5000))
			stop := make(chan struct{})
			collect := loadUntil(t, gens, 2, stop)
			for round := 0; round < 5*scale; round++ {
				time.Sleep(200 * time.Millisecond)
				require.NoError(t, s.Kill())
				time.Sleep(300 * time.Millisecond)
				require.NoError(t, s.Restart(t.Context()))
			}
			time.Sleep(200 * time.Millisecond)
			close(stop)
			perGen, unavailable := collect()
			all := slices.Concat(perGen...)
			t.Logf("%d IDs, %d ErrUnavailable", len(all), unavailable)
			for _, ids := range perGen {
				requireUnique(t, ids)
			}
			if aof {
				requireUnique(t, all)
			}
		})
	}
}

// loadUntil calls Next in workers goroutines per generator until stop is
// closed, tolerating ErrUnavailable, and checks that each goroutine sees
// increasing values. collect waits for the goroutines and returns the values
// per generator and the number of ErrUnavailable.
func loadUntil(t *testing.T, gens []idgen.Generator, workers int, stop <-chan struct{}) (collect func() ([][]int64, int64)) {
	var mu sync.Mutex
	perGen := make([][]int64, len(gens))
	var unavailable atomic.Int64
	var wg sync.WaitGroup
	for gi, g := range gens {
		for w := 0; w < workers; w++ {
			wg.Go(func() {
				var got []int64
				defer func() {
					mu.Lock()
					perGen[gi] = append(perGen[gi], got...)
					mu.Unlock()
				}()
				for {
					select {
					case <-stop:
						return
					default:
					}
					id, err := g.Next(context.Background())
					if err != nil {
						if !errors.Is(err, idgen.ErrUnavailable) {
							t.Error(err)
							return
						}
						unavailable.Add(1)
						time.Sleep(time.Millisecond)
						continue
					}
					if len(got) > 0 && id.Int64() <= got[len(got)-1] {
						t.Errorf("%d after %d", id, got[len(got)-1])
						return
					}
					got = append(got, id.Int64())
				}
			})
		}
	}
	return func() ([][]int64, int64) {
		wg.Wait()
		return perGen, unavailable.Load()
	}
}
