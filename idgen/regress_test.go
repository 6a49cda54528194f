package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// A call in flight carries the floor it read before its round trip. When
// another call of the same Sequence returns meanwhile and the key is then
// lost, the late call must not be handed that call's value again.
func TestSequence_Next_staleFloorAfterKeyLoss_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	direct := s.Client()
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	const key = "redkit:idgen:v1:{stale}:seq:stale"
	seq, err := idgen.NewSequence(rdb, "stale")
	require.NoError(t, err)
	var got []int64
	for i := 0; i < 5; i++ {
		id, err := seq.Next(t.Context())
		require.NoError(t, err)
		got = append(got, id.Int64())
	}

	// The first call runs (the counter moves to 6) but its reply is held.
	px.HoldReplies(time.Second)
	first := make(chan idgen.ID, 1)
	go func() {
		id, err := seq.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		first <- id
	}()
	require.Eventually(t, func() bool { return direct.Get(t.Context(), key).Val() == "6" },
		10*time.Second, time.Millisecond)
	// The key is lost, then a second call starts before the first returns.
	require.NoError(t, direct.Del(t.Context(), key).Err())
	second, err := seq.Next(t.Context())
	require.NoError(t, err)
	got = append(got, (<-first).Int64(), second.Int64())
	requireUnique(t, got)
}

// seqLoad runs workers goroutines calling seq.Next until stop is closed,
// tolerating errors (the server may be down), and returns every value.
func seqLoad(t *testing.T, g idgen.Generator, workers int, stop <-chan struct{}) func() []int64 {
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			var got []int64
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, got...)
					mu.Unlock()
					return
				default:
				}
				id, err := g.Next(context.Background())
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				if len(got) > 0 && id.Int64() <= got[len(got)-1] {
					t.Errorf("%d after %d in one goroutine", id, got[len(got)-1])
				}
				got = append(got, id.Int64())
			}
		})
	}
	return func() []int64 { wg.Wait(); return all }
}

// sequenceNeverRepeats runs fault while 16 goroutines share the Sequence
// name on rdb (seqLoad), then requires that they got over 100 values and
// none twice.
func sequenceNeverRepeats(t *testing.T, rdb redis.UniversalClient, name string, fault func()) {
	seq, err := idgen.NewSequence(rdb, name)
	require.NoError(t, err)
	stop := make(chan struct{})
	collect := seqLoad(t, seq, 16, stop)
	fault()
	close(stop)
	all := collect()
	require.Greater(t, len(all), 100)
	requireUnique(t, all)
}

// 16 goroutines share one Sequence while its key is deleted again and again.
func TestSequence_Next_concurrentKeyLoss_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	sequenceNeverRepeats(t, rdb, "del", func() {
		for i := 0; i < 40; i++ {
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, rdb.Del(t.Context(), "redkit:idgen:v1:{del}:seq:del").Err())
		}
	})
}

// A Redis without persistence is killed and restarted under load: the
// Sequence never repeats its own values.
func TestSequence_Next_restartWithoutPersistence_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	// go-redis re-sends a failed call (MaxRetries 3 by default), with the
	// floor it read before the server went down.
	rdb := s.Client(func(o *redis.Options) { o.DialTimeout = 200 * time.Millisecond })
	sequenceNeverRepeats(t, rdb, "restart", func() {
		for i := 0; i < 10; i++ {
			time.Sleep(50 * time.Millisecond)
			require.NoError(t, s.Kill())
			require.NoError(t, s.Restart(t.Context()))
		}
		time.Sleep(50 * time.Millisecond)
	})
}

// A background fetch refused once (a short network blip at the prefetch
// point) is tried again after the backoff while the current range lasts.
func TestSegment_prefetch_refusedOnce_retried(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	seg, err := idgen.NewSegment(rdb, "blip", idgen.WithMinStep(100), idgen.WithMaxStep(100),
		idgen.WithTracerProvider(tp))
	require.NoError(t, err)
	defer seg.Close()
	for i := 0; i < 19; i++ { // the 20th value starts the prefetch
		_, err := seg.Next(t.Context())
		require.NoError(t, err)
	}
	require.NoError(t, px.Cut(true))
	_, err = seg.Next(t.Context())
	require.NoError(t, err)
	failed := func() bool {
		return slices.ContainsFunc(spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Status().Code == codes.Error })
	}
	require.Eventually(t, failed, 10*time.Second, time.Millisecond, "the prefetch failed")
	require.EqualValues(t, 80, seg.Runway(), "nothing fetched ahead")
	require.NoError(t, px.Cut(false))
	// No Next meanwhile: the retry comes from the backoff, not from a caller.
	require.Eventually(t, func() bool { return seg.Runway() == 180 }, 10*time.Second, time.Millisecond,
		"the next range was fetched after the blip")
	// The whole runway is served through the next outage.
	require.NoError(t, px.Cut(true))
	served := 0
	for {
		if _, err := seg.Next(t.Context()); err != nil {
			require.ErrorIs(t, err, idgen.ErrUnavailable)
			break
		}
		served++
	}
	require.Equal(t, 180, served)
}

// A counter below zero is moved up to the floor exactly: the counter then
// covers the whole range reserved above it, and a Sequence of the same name
// gets a value above that range.
func TestCounter_negative_movedUpExactly(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const key = "redkit:idgen:v1:{neg}:seq:neg"
	require.NoError(t, rdb.Set(t.Context(), key, "-9007199254740991", 0).Err())
	seg, err := idgen.NewSegment(rdb, "neg", idgen.WithMinStep(10), idgen.WithMaxStep(10))
	require.NoError(t, err)
	a, err := seg.Next(t.Context()) // the range [1, 10]; its prefetch starts at 2
	require.NoError(t, err)
	require.Equal(t, idgen.ID(1), a)
	require.NoError(t, seg.Close())
	require.Equal(t, "10", rdb.Get(t.Context(), key).Val(), "the counter covers the range reserved")
	seq, err := idgen.NewSequence(rdb, "neg")
	require.NoError(t, err)
	id, err := seq.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, idgen.ID(11), id)
}

// Generator.Next: "ctx bounds any wait for Redis or for the clock". A clock
// that goes backwards inside the process (a custom WithClock) makes Next wait
// until it has caught up: the caller's deadline ends that wait, with an
// error wrapping ctx's (the old code waited the whole step and returned an
// ID).
func TestSnowflake_clockBackwards_ctxDeadline(t *testing.T) {
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	sf, err := idgen.NewSnowflake(1, idgen.WithClock(clock))
	require.NoError(t, err)
	defer sf.Close()
	last, err := sf.Next(t.Context())
	require.NoError(t, err)
	offset.Store(int64(-2 * time.Second)) // the custom clock steps back 2s
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	id, err := sf.Next(ctx)
	t.Logf("Next after a 2s backwards step with a 100ms deadline: %v, %v after %v", id, err, time.Since(start))
	require.ErrorIs(t, err, context.DeadlineExceeded,
		"Snowflake.Next ignored its ctx while waiting for a clock that stepped back 2s")
	// The value given up is skipped: once the clock has caught up, IDs go on
	// above every ID handed out.
	offset.Store(0)
	next, err := sf.Next(t.Context())
	require.NoError(t, err)
	require.Greater(t, next, last)
}

// frozen starts a server and a client with no read timeout at all
// (ReadTimeout -1), so that a call left to go-redis on a frozen server
// (SIGSTOP, as in a long pause of its process or VM) never returns: only a
// bound of idgen's own ends it.
func frozen(t *testing.T) (*redistest.Server, *redis.Client) {
	s := redistest.New(t, redistest.Options{})
	return s, s.Client(func(o *redis.Options) { o.ReadTimeout = -1 })
}

// pause freezes s until the test ends.
func pause(t *testing.T, s *redistest.Server) {
	require.NoError(t, s.Pause())
	t.Cleanup(func() { _ = s.Resume() })
}

// Generator.Next: "ctx bounds any wait for Redis". Sequence.Next is one round
// trip per value; with Redis frozen it returns an error wrapping the
// caller's deadline (the old code waited for go-redis's ReadTimeout: 5s on
// go-redis defaults, for ever here).
func TestSequence_Next_ctxDeadline_frozenRedis(t *testing.T) {
	s, rdb := frozen(t)
	seq, err := idgen.NewSequence(rdb, "frozen-seq")
	require.NoError(t, err)
	_, err = seq.Next(t.Context()) // probe cached, script loaded
	require.NoError(t, err)
	pause(t, s)
	runWithin(t, 10*time.Second, func() { _ = s.Resume() }, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err = seq.Next(ctx)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// NewLeasedSnowflake: ctx bounds its wait for Redis. With Redis frozen, a
// start with a 200ms deadline gives up with an error wrapping it.
func TestNewLeasedSnowflake_ctxDeadline_frozenRedis(t *testing.T) {
	s, rdb := frozen(t)
	warm, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "frozen-sf")
	require.NoError(t, err)
	pause(t, s)
	var sf *idgen.Snowflake
	runWithin(t, 10*time.Second, func() { _ = s.Resume() }, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		sf, err = idgen.NewLeasedSnowflake(ctx, rdb, "frozen-sf")
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, sf)
	require.NoError(t, s.Resume())
	require.NoError(t, warm.Close())
}

// options.go: "WithFetchTimeout bounds one Segment range fetch". doc.go:
// "When the runway is spent, Next returns ErrUnavailable (wrapping the
// cause) within the caller's deadline". A caller without a deadline of its
// own relies on the fetch timeout; with Redis frozen it gets ErrUnavailable
// wrapping the fetch's deadline. And Close, with a fetch in flight on the
// frozen server, cancels it rather than waiting for go-redis (the old code
// waited for the ReadTimeout in both cases).
func TestSegment_fetchTimeout_frozenRedis(t *testing.T) {
	s, rdb := frozen(t)
	opts := []idgen.Option{idgen.WithFetchTimeout(200 * time.Millisecond), idgen.WithReplicaAckTimeout(100 * time.Millisecond)}
	seg, err := idgen.NewSegment(rdb, "frozen", opts...)
	require.NoError(t, err)
	_, err = seg.Next(t.Context()) // the client has a connection and knows the script
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	seg, err = idgen.NewSegment(rdb, "frozen", opts...)
	require.NoError(t, err)
	pause(t, s)
	runWithin(t, 10*time.Second, func() { _ = s.Resume() }, func() {
		_, err = seg.Next(context.Background()) // no runway: the first range must be fetched
	})
	require.ErrorIs(t, err, idgen.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, seg.Close())

	slow, err := idgen.NewSegment(rdb, "frozen", idgen.WithFetchTimeout(time.Minute))
	require.NoError(t, err)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = slow.Next(short) // the caller gives up; the fetch goes on
	cancel()
	require.ErrorIs(t, err, idgen.ErrUnavailable)
	runWithin(t, 10*time.Second, func() { _ = s.Resume() }, func() { err = slow.Close() })
	require.NoError(t, err)
}

// doc.go, "Losing the node table": "A process that leases a node between the
// loss and that renewal ... may take a node still in use. The node is picked
// at random, so with k such nodes in use it takes one with a chance of k in
// the number of free nodes." (README: "picked at random: k in the free nodes
// for k such holders"; "among them one is picked at random, not the lowest").
//
// Real fault: Redis without AOF restarts from its last RDB snapshot, losing
// the latest lease (a holder that is still running). lease_acquire.lua takes
// the FIRST free node after a random start, so a node's chance is the length
// of the run of leased nodes before it, plus one, in 1,024, not 1 in the
// number of free nodes.
func TestLeasedSnowflake_partialTableLoss_pickUniform(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	ctx := t.Context()
	const service = "pick"
	ttl := idgen.WithLeaseTTL(time.Hour) // no renewal during the test
	held := map[int64]*idgen.Snowflake{}
	t.Cleanup(func() {
		for _, sf := range held {
			_ = sf.Close()
		}
	})
	for i := 0; i < 1024; i++ {
		sf, err := idgen.NewLeasedSnowflake(ctx, rdb, service, ttl)
		if err != nil {
			t.Fatal(err)
		}
		held[sf.Node()] = sf
	}
	// Free nodes: 0..99 and X=700; 100..699 and 701..1023 stay leased.
	const x = 700
	free := []int64{x}
	for n := int64(0); n < 100; n++ {
		free = append(free, n)
	}
	for _, n := range free {
		if err := held[n].Close(); err != nil {
			t.Fatal(err)
		}
		delete(held, n)
	}
	if err := rdb.Save(ctx).Err(); err != nil { // the last snapshot before the crash
		t.Fatal(err)
	}
	// The holder H takes X after the snapshot (its lease is the write lost):
	// lease free nodes until X comes, then give the others back (those
	// releases are lost too, and the snapshot has them free).
	var h *idgen.Snowflake
	var others []*idgen.Snowflake
	for h == nil {
		if len(others) > len(free) {
			t.Fatal("never took X")
		}
		sf, err := idgen.NewLeasedSnowflake(ctx, rdb, service, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if sf.Node() == x {
			h = sf
		} else {
			others = append(others, sf)
		}
	}
	for _, sf := range others {
		if err := sf.Close(); err != nil {
			t.Fatal(err)
		}
	}
	held[x] = h
	if _, err := h.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// New processes start before H's next renewal (TTL/3 = 20 minutes).
	const trials = 200
	took := 0
	for i := 0; i < trials; i++ {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		sf, err := idgen.NewLeasedSnowflake(c, rdb, service, ttl)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if sf.Node() == x {
			took++
		}
		if err := sf.Close(); err != nil {
			t.Fatal(err)
		}
	}
	k, nfree := 1, len(free)
	expect := float64(trials) * float64(k) / float64(nfree)
	t.Logf("%d of %d new processes took node %d, still used by a running holder; the doc's chance k/free = %d/%d predicts about %.1f",
		took, trials, x, k, nfree, expect)
	if took > 15 { // P(Binomial(200, 1/101) > 15) < 1e-9
		t.Fatalf("doc.go \"The node is picked at random, so with k such nodes in use it takes one with a chance of k in "+
			"the number of free nodes\": after a restart from RDB lost one running holder's lease (k=1, %d free nodes), "+
			"%d of %d new processes took that holder's node %d (expected about %.1f); the first free node after a random "+
			"start is taken, so the node after 600 leased nodes is picked with chance 601/1024",
			nfree, took, trials, x, expect)
	}
}

// doc.go: "The error window lasts until a renewal gets through ... both
// happen in the background, retried every 200ms at most, and Next recovers by
// itself." lease.go bounds a renewal attempt by TTL/3.
//
// Real fault: renewal replies are lost (the proxy drops replies) until the
// lease lapses, then the network is fine again. The client is on go-redis defaults. The stuck
// renewal holds the renewal goroutine for the client's ReadTimeout, not
// TTL/3, so Next stays in ErrLeaseLost for seconds after Redis answers again.
func TestLeasedSnowflake_lostRenewalReply_recoversSoon(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr()}) // go-redis defaults
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	const ttl = time.Second
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "stall", idgen.WithLeaseTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	if _, err := sf.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// Every reply is lost until the lease lapses (Next fails closed once
	// TTL - TTL/10 has passed since the last renewal that got through), then
	// Redis answers again: Next must recover soon after.
	n := px.Dropped()
	px.DropReplies(true)
	var firstLost, recovered time.Time
	for deadline := time.Now().Add(10 * time.Second); firstLost.IsZero(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease never lapsed while every reply was lost")
		}
		if _, err := sf.Next(ctx); errors.Is(err, idgen.ErrLeaseLost) {
			firstLost = time.Now()
		} else if err != nil {
			t.Fatal(err)
		}
	}
	px.DropReplies(false)
	if px.Dropped() == n {
		t.Fatal("no renewal reply was dropped")
	}
	healed := time.Now()
	for time.Since(healed) < 20*time.Second && recovered.IsZero() {
		if _, err := sf.Next(ctx); err == nil {
			recovered = time.Now()
		} else if !errors.Is(err, idgen.ErrLeaseLost) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if recovered.IsZero() {
		t.Fatal("never recovered")
	}
	down := recovered.Sub(firstLost)
	since := recovered.Sub(healed)
	t.Logf("ErrLeaseLost from %v before the heal to %v after it (down %v); ReadTimeout %v, TTL %v, lease: %+v",
		healed.Sub(firstLost).Round(time.Millisecond), since.Round(time.Millisecond), down.Round(time.Millisecond),
		rdb.Options().ReadTimeout, ttl, sf.Lease())
	// A renewal attempt bounded by TTL/3 (333ms), then retries every 200ms:
	// recovery within about a second of Redis answering again.
	if limit := ttl; since > limit {
		t.Fatalf("doc.go \"The error window lasts until a renewal gets through ... retried every 200ms at most, "+
			"and Next recovers by itself\": after lost renewal replies (TTL %v), Redis answered again from t=0 but "+
			"Next returned ErrLeaseLost until t=%v (down %v): the renewal attempt blocked for go-redis's ReadTimeout %v, "+
			"not TTL/3", ttl, since.Round(time.Millisecond), down.Round(time.Millisecond), rdb.Options().ReadTimeout)
	}
}

// Redis writes "-0" and "007" back as they were SET, but INCRBY refuses
// them: the counter must be refused as not an integer by idgen itself, with
// nothing written, not by INCRBY's raw error.
func TestSequence_Next_nonCanonicalInteger_notAnInteger(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	for i, raw := range []string{"-0", "007", "+1"} {
		name := fmt.Sprintf("noncanon%d", i)
		key := "redkit:idgen:v1:{" + name + "}:seq:" + name
		require.NoError(t, rdb.Set(t.Context(), key, raw, 0).Err())
		seq, err := idgen.NewSequence(rdb, name)
		require.NoError(t, err)
		_, err = seq.Next(t.Context())
		require.ErrorContains(t, err, "idgen: counter key does not hold an integer", "counter %q", raw)
		require.NotContains(t, err.Error(), "ERR value is not an integer", "counter %q", raw)
		require.Equal(t, raw, rdb.Get(t.Context(), key).Val(), "counter %q changed", raw)
	}
}

// runWithin runs f in a goroutine of its own (f must not call t.FailNow) and
// fails the test when it has not returned within limit: a call that ignores
// its ctx on a server frozen for good (a client with ReadTimeout -1) would
// otherwise hang the test. unfreeze then runs before waiting for f.
func runWithin(t *testing.T, limit time.Duration, unfreeze func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		unfreeze()
		<-done
		t.Fatalf("no return within %v while Redis was frozen: the call's ctx was ignored", limit)
	}
}

// A start that gives up on a frozen Redis (ctx ended, the acquire script
// still queued) must not keep the node it is then granted: the late reply's
// node is released at once, so only the running holder holds a node.
func TestNewLeasedSnowflake_ctxEnded_lateNodeReleased(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) { o.ReadTimeout = -1 }) // no read timeout at all
	const service = "late-node"
	warm, err := idgen.NewLeasedSnowflake(t.Context(), rdb, service)
	require.NoError(t, err)
	t.Cleanup(func() { _ = warm.Close() })
	require.NoError(t, s.Pause())
	t.Cleanup(func() { _ = s.Resume() })
	var sf *idgen.Snowflake
	runWithin(t, 10*time.Second, func() { _ = s.Resume() }, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		sf, err = idgen.NewLeasedSnowflake(ctx, rdb, service)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, sf)
	require.NoError(t, s.Resume())
	key := "redkit:idgen:v1:{" + service + "}:nodes:" + service
	held := func() []string {
		var owners []string
		for node, v := range s.Client().HGetAll(t.Context(), key).Val() {
			if !strings.HasPrefix(v, "|") { // "owner|expires|hw|start"; released: no owner
				owners = append(owners, node)
			}
		}
		return owners
	}
	require.Eventually(t, func() bool { return len(held()) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the abandoned start's node stays leased: nodes held %v (only node %d is in use)", held(), warm.Node())
	require.Equal(t, []string{fmt.Sprint(warm.Node())}, held())
}

// Close of a leased Snowflake on a frozen Redis returns once its release
// gives up, without waiting for a reply that the client (ReadTimeout -1)
// would wait for for ever; the lease then expires by itself.
func TestLeasedSnowflake_Close_frozenRedis_returns(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) { o.ReadTimeout = -1 })
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "frozen-close")
	require.NoError(t, err)
	_, err = sf.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, s.Pause())
	t.Cleanup(func() { _ = s.Resume() })
	runWithin(t, 30*time.Second, func() { _ = s.Resume() }, func() { err = sf.Close() })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "the lease expires by itself")
	_, err = sf.Next(t.Context())
	require.ErrorIs(t, err, idgen.ErrClosed)
}
