package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"pgregory.net/rapid"
)

// The lease model draws the life of one lease: its kind, TTL, watchdog and
// max hold, how its client sends (go-redis's defaults or once; one pooled
// connection or several), then steps that let time pass, Extend it, slow
// its link, pause Redis (SIGSTOP), hold its client's only connection, or
// have a rival try to take the lock; and at last a Release during one of
// those faults. Checked after every step against what Redis recorded:
//
//   - Until is never after the lock's expiry as Redis has it: while the
//     lease is believed held (Err nil, before Until) the lock is this
//     lease's in Redis and expires no earlier than Until, and no rival
//     acquires it;
//   - a release's answer agrees with the history: Redis's keyspace events
//     say how the hold of a lock key (Mutex, fair mode, RWMutex writer)
//     ended, and Release returns nil exactly when it was deleted, not when
//     it expired. (Permits and read leases are entries of a sorted set,
//     without events of their own; the first property covers them.)

// leaseModelSize is how many lives TestModel_leaseLifecycle draws, and the
// most steps of one: seconds in the normal suite.
func leaseModelSize() (checks, steps int) { return 8, 6 }

// TestModel_leaseLifecycle: see the comment at the top of this file.
func TestModel_leaseLifecycle(t *testing.T) {
	checks, steps := leaseModelSize()
	runLeaseModel(t, checks, steps)
}

// TestChaos_Model_leaseLifecycle is TestModel_leaseLifecycle at a size for
// RUN_CHAOS=1 (100×CHAOS_SCALE lives of up to 12 steps).
func TestChaos_Model_leaseLifecycle(t *testing.T) {
	runLeaseModel(t, 100*redistest.Chaos(t), 12)
}

// keyEvents records the del and expired keyspace events of a server, in
// the order Redis ran them.
type keyEvents struct {
	ps     *redis.PubSub
	direct *redis.Client
	seq    atomic.Int64

	mu     sync.Mutex
	events []string // "del <key>", "expired <key>"
	marks  map[string]chan struct{}
}

const eventsMarker = "lease-model-marker"

func watchKeyEvents(t *testing.T, s *redistest.Server) *keyEvents {
	direct := s.Client()
	ps := direct.Subscribe(t.Context(), "__keyevent@0__:del", "__keyevent@0__:expired", eventsMarker)
	_, err := ps.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e := &keyEvents{ps: ps, direct: direct, marks: map[string]chan struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			e.mu.Lock()
			switch msg.Channel {
			case eventsMarker:
				if ch := e.marks[msg.Payload]; ch != nil {
					close(ch)
					delete(e.marks, msg.Payload)
				}
			default:
				_, kind, _ := strings.Cut(msg.Channel, ":")
				e.events = append(e.events, kind+" "+msg.Payload)
			}
			e.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ps.Close()
		<-done
	})
	return e
}

// sync waits until every event Redis ran before it was called is recorded,
// and returns how many there are.
func (e *keyEvents) sync(t *rapid.T) int {
	mark := fmt.Sprint(e.seq.Add(1))
	ch := make(chan struct{})
	e.mu.Lock()
	e.marks[mark] = ch
	e.mu.Unlock()
	if err := e.direct.Publish(context.Background(), eventsMarker, mark).Err(); err != nil {
		t.Fatalf("publish marker: %v", err)
	}
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("the keyspace events did not arrive")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.events)
}

// ended returns how the hold of key ended after event from: "del",
// "expired", or "" when neither happened yet.
func (e *keyEvents) ended(from int, key string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events[from:] {
		kind, k, _ := strings.Cut(ev, " ")
		if k == key {
			return kind
		}
	}
	return ""
}

// leaseLife is one drawn life.
type leaseLife struct {
	rt     *rapid.T
	s      *redistest.Server
	px     *redistest.Proxy
	holder *redis.Client // through px
	direct *redis.Client
	kind   leaseKind
	key    string // the lease's key in Redis
	keyed  bool   // a lock key (not a sorted set entry)
	ttl    time.Duration
	l      *lock.Lease
	rival  acquirer
	pool1  bool
	list   string
}

func runLeaseModel(t *testing.T, checks, maxSteps int) {
	s := redistest.New(t, redistest.Options{Config: []string{"notify-keyspace-events Egx"}})
	px := redistest.NewProxy(t, s.Addr())
	events := watchKeyEvents(t, s)
	direct := s.Client()
	n := 0
	redistest.SetRapidChecks(t, checks)
	rapid.Check(t, func(rt *rapid.T) {
		n++
		k := rapid.SampledFrom(leaseKinds).Draw(rt, "kind")
		ttl := rapid.SampledFrom([]time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}).Draw(rt, "ttl")
		o := &redis.Options{Addr: px.Addr(), ReadTimeout: 3 * time.Second}
		if rapid.Bool().Draw(rt, "sends once") {
			o.MaxRetries = -1
		}
		pool1 := rapid.Bool().Draw(rt, "one pooled connection")
		if pool1 {
			o.PoolSize, o.PoolTimeout = 1, time.Minute
		}
		holder := redis.NewClient(o)
		defer holder.Close()
		opts := []lock.Option{lock.WithTTL(ttl), lock.WithWatchdog(rapid.Bool().Draw(rt, "watchdog"))}
		if mh := rapid.SampledFrom([]int{0, 2, 3, 4}).Draw(rt, "max hold, in TTL/2"); mh > 0 {
			opts = append(opts, lock.WithMaxHold(time.Duration(mh)*ttl/2))
		}
		p := fmt.Sprintf("lm%d", n)
		locks := mustNew(t, holder, append([]lock.Option{lock.WithKeyPrefix(p), lock.WithReleaseTimeout(time.Minute)}, opts...)...)
		defer locks.Close()
		rivals := mustNew(t, direct, lock.WithKeyPrefix(p))
		defer rivals.Close()
		defer px.SetLatency(0)

		life := &leaseLife{rt: rt, s: s, px: px, holder: holder, direct: direct, kind: k, ttl: ttl,
			rival: k.rivalOf(rivals, "res", lock.WithTTL(time.Minute)), pool1: pool1, list: p + ":list"}
		mine := k.lock(locks, "res", opts...)
		// The key: the only one of the prefix once the lock is held, but
		// the fence counter and the acquire's own marks.
		l, err := mine.TryAcquire(context.Background())
		if err != nil {
			rt.Fatalf("acquire of a free lock: %v", err)
		}
		life.l = l
		life.key, life.keyed = leaseKey(rt, direct, p, k.name)
		from := events.sync(rt)

		steps := rapid.IntRange(0, maxSteps).Draw(rt, "steps")
		for i := range steps {
			life.step(fmt.Sprintf("step %d", i))
			life.checkUntil(fmt.Sprintf("after step %d", i))
		}
		fault := rapid.SampledFrom([]string{"none", "pause", "pool", "slow"}).Draw(rt, "release during")
		d := rapid.SampledFrom([]time.Duration{ttl / 2, ttl, 3 * ttl / 2}).Draw(rt, "fault for")
		until := l.Until()
		called := time.Now()
		rerr, returned := life.releaseDuring(fault, d)
		px.SetLatency(0)

		if !life.keyed {
			return
		}
		events.sync(rt)
		how := events.ended(from, life.key)
		switch {
		case rerr == nil && how != "del":
			rt.Fatalf("BUG: Release returned nil, but the hold ended by %q in Redis (called %v before Until, returned %v after it)",
				how, until.Sub(called), returned.Sub(until))
		case rerr != nil && how == "del" && (errors.Is(rerr, lock.ErrLeaseExpired) || errors.Is(rerr, lock.ErrLeaseTaken)):
			if returned.Sub(called) < o.ReadTimeout { // no send of it can have been re-sent
				rt.Fatalf("BUG: Release returned %v, but it deleted the lock in Redis", rerr)
			}
		}
	})
}

// leaseKey returns the key of the lease just taken under prefix p: the lock
// key (keyed) or the sorted set holding the permit.
func leaseKey(rt *rapid.T, rdb *redis.Client, p, kind string) (string, bool) {
	want := map[string]string{"mutex": ":mutex:", "fair": ":mutex:", "rwWrite": ":rw:", "rwRead": ":rwr:", "semaphore": ":sem:"}[kind]
	keys, err := rdb.Keys(context.Background(), p+":*").Result()
	if err != nil {
		rt.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, want) {
			return k, want == ":mutex:" || want == ":rw:"
		}
	}
	rt.Fatalf("no %s key under %s: %v", kind, p, keys)
	return "", false
}

func (life *leaseLife) step(what string) {
	rt, ttl := life.rt, life.ttl
	switch op := rapid.SampledFrom([]string{"sleep", "sleep", "extend", "extend", "slow", "pause", "pool", "rival", "rival"}).Draw(rt, what); op {
	case "sleep":
		time.Sleep(rapid.SampledFrom([]time.Duration{0, ttl / 4, ttl / 2, ttl}).Draw(rt, "sleep"))
	case "extend":
		_ = life.l.Extend(context.Background())
	case "slow":
		life.px.SetLatency(rapid.SampledFrom([]time.Duration{0, time.Millisecond, 20 * time.Millisecond, ttl / 4}).Draw(rt, "latency"))
	case "pause", "pool":
		d := rapid.SampledFrom([]time.Duration{ttl / 2, ttl, 3 * ttl / 2}).Draw(rt, "for")
		end := life.fault(op, d)
		time.Sleep(d)
		end()
	case "rival":
		life.tryRival(what)
	}
}

// fault starts pausing Redis, or holding the holder's only connection, and
// returns the function that ends it. "slow" slows the holder's link.
func (life *leaseLife) fault(kind string, d time.Duration) (end func()) {
	switch kind {
	case "pause":
		if err := life.s.Pause(); err != nil {
			life.rt.Fatal(err)
		}
		return func() {
			if err := life.s.Resume(); err != nil {
				life.rt.Fatal(err)
			}
		}
	case "pool":
		if !life.pool1 {
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = life.holder.BLPop(context.Background(), time.Minute, life.list).Err()
		}()
		return func() {
			if err := life.direct.RPush(context.Background(), life.list, "x").Err(); err != nil {
				life.rt.Fatal(err)
			}
			<-done
		}
	case "slow":
		life.px.SetLatency(d / 2)
		return func() { life.px.SetLatency(0) }
	}
	return func() {}
}

// releaseDuring calls Release while fault lasts for d, and returns its
// result and when it returned.
func (life *leaseLife) releaseDuring(fault string, d time.Duration) (error, time.Time) {
	end := life.fault(fault, d)
	got := make(chan error, 1)
	go func() { got <- life.l.Release(context.Background()) }()
	time.Sleep(d)
	end()
	err := <-got
	return err, time.Now()
}

// tryRival has the rival try the lock; it must not get it while the lease
// is believed held.
func (life *leaseLife) tryRival(what string) {
	rl, err := life.rival.TryAcquire(context.Background())
	if err != nil {
		if !errors.Is(err, lock.ErrNotAcquired) {
			life.rt.Fatalf("%s: rival: %v", what, err)
		}
		return
	}
	held, left := life.l.Err() == nil, time.Until(life.l.Until())
	_ = rl.Release(context.Background())
	if held && left > 0 {
		life.rt.Fatalf("BUG: %s: a rival acquired while the lease is believed held (%v before its Until)", what, left)
	}
}

// checkUntil checks that Until is not after the lease's expiry in Redis.
func (life *leaseLife) checkUntil(what string) {
	l, ctx := life.l, context.Background()
	before := l.Until()
	var (
		ours   bool
		expiry time.Time // the latest the lease's entry can expire, on this clock
	)
	if life.keyed {
		var get *redis.StringCmd
		var pttl *redis.DurationCmd
		if _, err := life.direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
			get, pttl = p.Get(ctx, life.key), p.PTTL(ctx, life.key)
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			life.rt.Fatal(err)
		}
		ours = strings.HasPrefix(get.Val(), l.Owner())
		expiry = time.Now().Add(pttl.Val() + time.Millisecond)
	} else {
		var now *redis.TimeCmd
		var score *redis.FloatCmd
		if _, err := life.direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
			now, score = p.Time(ctx), p.ZScore(ctx, life.key, l.Owner())
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			life.rt.Fatal(err)
		}
		left := time.Duration(int64(score.Val())-now.Val().UnixMilli()) * time.Millisecond
		ours = score.Err() == nil && left > 0
		expiry = time.Now().Add(left + time.Millisecond)
	}
	replied := time.Now()
	if l.Err() != nil {
		return
	}
	// A renewal that left before the reply may have lowered the lock's
	// expiry and Until; one answered since may have raised both.
	until := before
	if u := l.Until(); u.Before(until) {
		until = u
	}
	switch {
	case !ours && until.After(replied):
		life.rt.Fatalf("BUG: %s: the lease is believed held for %v more, but Redis no longer has it", what, until.Sub(replied))
	case ours && until.After(expiry):
		life.rt.Fatalf("BUG: %s: Until is %v after the lease's expiry in Redis", what, until.Sub(expiry))
	}
}
