package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"pgregory.net/rapid"
)

// The model-based tests draw sequences of acquire (waiting or not), extend,
// release, give-ups at any step (a context that ends after a drawn delay,
// with replies slowed so it can end during an attempt, the subscription or
// the wait), lost replies (the command runs, the reply is dropped) and, for
// Redlock, a silent master, over every kind of lock. Two actors (two
// Clients, as two processes) take turns; the second reaches Redis through
// a proxy that injects the faults. After every step:
//
//   - exclusion: a lease is granted only when no lease the model holds is
//     still believed held (Err nil and Until not passed) in a conflicting
//     mode (a Mutex, a fair Mutex and a Redlock hold one owner, an RWMutex
//     one writer or readers, a Semaphore its permits);
//   - fencing: every fenced lease has a token above every earlier one of
//     its name;
//   - nothing a waiter left outlives its give-up: once every lease the
//     model holds is released, the lock is free for the other actor at
//     once (no writer mark, no queue entry, no lock held by nobody); an
//     RWMutex with no writer admits a reader at once after a writer gave
//     up;
//   - without a fault in the step, a free lock is granted, a held lease
//     extends and releases.

// modelSize is how many sequences TestModel_lock draws, and their longest
// length: seconds in the normal suite.
func modelSize() (checks, steps int) { return 40, 12 }

type modelKind string

const (
	kindMutex   modelKind = "mutex"
	kindFair    modelKind = "fair"
	kindRW      modelKind = "rwmutex"
	kindSem     modelKind = "semaphore"
	kindRedlock modelKind = "redlock"
)

const modelPermits = 2

// modelLock is one actor's handle on the lock under test.
type modelLock struct {
	try, wait func(ctx context.Context, write bool) (*lock.Lease, error)
}

type modelLease struct {
	l     *lock.Lease
	write bool // RWMutex write lease; true for every exclusive kind
	actor int
}

type modelRun struct {
	kind    modelKind
	actors  [2]modelLock
	px      *redistest.Proxy // actor 1's path (Redlock: the third master's)
	live    []*modelLease
	maxTok  uint64
	fenced  bool
	silent  bool // Redlock: the third master drops every reply
	dropped bool // the step's actor-1 call runs with replies dropped
	// healing: a give-up met lost replies, so its withdrawal goes on in
	// the background once they come again: "at once" becomes "soon".
	healing bool
}

// modelEnv is the servers and go-redis clients the sequences share; each
// sequence has its own key prefix and lock Clients.
type modelEnv struct {
	direct, slow redis.UniversalClient   // one server: directly, through px
	masters      []redis.UniversalClient // Redlock, actor 0
	mastersB     []redis.UniversalClient // Redlock, actor 1
	px, pxMaster *redistest.Proxy
	seq          atomic.Int64
}

func newModelEnv(t *testing.T) *modelEnv {
	env := &modelEnv{}
	fast := func(addr string) redis.UniversalClient {
		// A short read timeout and no go-redis re-sends keep a dropped
		// reply cheap; lock's own retries still run.
		c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	env.direct = sharedClient(t)
	env.px = redistest.NewProxy(t, shared.Addr())
	env.slow = fast(env.px.Addr())
	for i := range 3 {
		s := redistest.New(t, redistest.Options{})
		addr := s.Addr()
		env.masters = append(env.masters, fast(addr))
		if i == 2 {
			env.pxMaster = redistest.NewProxy(t, addr)
			addr = env.pxMaster.Addr()
			env.masters[2] = fast(addr)
		}
		env.mastersB = append(env.mastersB, fast(addr))
	}
	return env
}

// TestModel_lock: see the comment at the top of this file.
func TestModel_lock(t *testing.T) {
	checks, steps := modelSize()
	runModel(t, checks, steps)
}

// TestChaos_Model_lock is TestModel_lock at a size for RUN_CHAOS=1
// (300×CHAOS_SCALE sequences of up to 40 steps).
func TestChaos_Model_lock(t *testing.T) {
	runModel(t, 300*redistest.Chaos(t), 40)
}

func runModel(t *testing.T, checks, maxSteps int) {
	env := newModelEnv(t)
	redistest.SetRapidChecks(t, checks)
	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.SampledFrom([]modelKind{kindMutex, kindFair, kindRW, kindSem, kindRedlock}).Draw(rt, "kind")
		m := env.start(t, rt, kind)
		defer m.px.SetLatency(0)
		defer m.px.DropReplies(false)
		n := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
		for range n {
			m.step(rt)
		}
		m.releaseAll(rt, "end of sequence")
		m.mustBeFree(rt, "end of sequence", false)
	})
}

func (env *modelEnv) start(t *testing.T, rt *rapid.T, kind modelKind) *modelRun {
	prefix := fmt.Sprintf("model%d", env.seq.Add(1))
	m := &modelRun{kind: kind, px: env.px}
	opts := []lock.Option{lock.WithKeyPrefix(prefix), lock.WithWatchdog(false), lock.WithTTL(30 * time.Second)}
	if kind == kindRedlock {
		// The per-master deadline is 5% of the TTL: short, so a silent
		// master's release costs little.
		opts = []lock.Option{lock.WithKeyPrefix(prefix), lock.WithWatchdog(false), lock.WithTTL(4 * time.Second)}
		m.px = env.pxMaster
		m.fenced = true
		for i, masters := range [][]redis.UniversalClient{env.masters, env.mastersB} {
			rl := mustRedlock(t, masters, opts...)
			rt.Cleanup(func() { _ = rl.Close() })
			mu := rl.Mutex("res")
			m.actors[i] = modelLock{
				try:  func(ctx context.Context, _ bool) (*lock.Lease, error) { return mu.TryAcquire(ctx) },
				wait: func(ctx context.Context, _ bool) (*lock.Lease, error) { return mu.Acquire(ctx) },
			}
		}
		return m
	}
	for i, rdb := range []redis.UniversalClient{env.direct, env.slow} {
		c := mustNew(t, rdb, opts...)
		rt.Cleanup(func() { _ = c.Close() })
		switch kind {
		case kindMutex, kindFair:
			mu := c.Mutex("res", lock.WithFair(kind == kindFair))
			m.fenced = true
			m.actors[i] = modelLock{
				try:  func(ctx context.Context, _ bool) (*lock.Lease, error) { return mu.TryAcquire(ctx) },
				wait: func(ctx context.Context, _ bool) (*lock.Lease, error) { return mu.Acquire(ctx) },
			}
		case kindRW:
			rw := c.RWMutex("res")
			m.fenced = true
			m.actors[i] = modelLock{
				try: func(ctx context.Context, write bool) (*lock.Lease, error) {
					if write {
						return rw.TryAcquire(ctx)
					}
					return rw.TryAcquireRead(ctx)
				},
				wait: func(ctx context.Context, write bool) (*lock.Lease, error) {
					if write {
						return rw.Acquire(ctx)
					}
					return rw.AcquireRead(ctx)
				},
			}
		case kindSem:
			s := c.Semaphore("res", modelPermits)
			m.actors[i] = modelLock{
				try:  func(ctx context.Context, _ bool) (*lock.Lease, error) { return s.TryAcquire(ctx) },
				wait: func(ctx context.Context, _ bool) (*lock.Lease, error) { return s.Acquire(ctx) },
			}
		}
	}
	return m
}

// believed reports whether the library says l is still held.
func believed(l *lock.Lease) bool { return l.Err() == nil && time.Now().Before(l.Until()) }

// conflicts reports whether a new lease in mode write may be granted while
// the model's leases are believed held.
func (m *modelRun) conflicts(write bool) bool {
	n := 0
	for _, h := range m.live {
		if !believed(h.l) {
			continue
		}
		n++
		switch m.kind {
		case kindRW:
			if write || h.write {
				return true
			}
		case kindSem:
		default:
			return true
		}
	}
	return m.kind == kindSem && n >= modelPermits
}

// granted checks a lease just granted and records it.
func (m *modelRun) granted(rt *rapid.T, l *lock.Lease, write bool, actor int, what string) {
	if m.conflicts(write) {
		rt.Fatalf("%s: granted while a conflicting lease is held (exclusion broken)", what)
	}
	if m.fenced && (m.kind != kindRW || write) {
		tok := l.Fence().Token
		if tok <= m.maxTok {
			rt.Fatalf("%s: fencing token %d not above %d", what, tok, m.maxTok)
		}
		m.maxTok = tok
	}
	m.live = append(m.live, &modelLease{l: l, write: write || m.kind != kindRW, actor: actor})
}

// canGrant reports whether the model says a lease in mode write must be
// granted at once: nothing unreleased stands in its way.
func (m *modelRun) canGrant(write bool) bool {
	switch m.kind {
	case kindRW:
		for _, h := range m.live {
			if write || h.write {
				return false
			}
		}
		return true
	case kindSem:
		return len(m.live) < modelPermits
	default:
		return len(m.live) == 0
	}
}

// fault reports whether this step's call by actor meets a fault.
// A Redlock's silent master is no fault here: the two others decide.
func (m *modelRun) fault(actor int) bool { return actor == 1 && m.dropped }

func (m *modelRun) step(rt *rapid.T) {
	actor := rapid.IntRange(0, 1).Draw(rt, "actor")
	write := m.kind != kindRW || rapid.Bool().Draw(rt, "write")
	op := rapid.SampledFrom([]string{
		"try", "try", "wait", "giveUp", "giveUp", "extend", "release", "release", "handoff", "drop", "slow", "silence",
	}).Draw(rt, "op")
	m.dropped = false
	switch op {
	case "drop":
		if m.kind == kindRedlock {
			return // a Redlock's faults are the silent master
		}
		// The next call by actor 1 runs; its replies are lost.
		m.dropped = true
		actor = 1
		op = rapid.SampledFrom([]string{"try", "giveUp", "extend", "release"}).Draw(rt, "dropped op")
		m.px.DropReplies(true)
		defer m.px.DropReplies(false)
	case "slow":
		d := rapid.SampledFrom([]time.Duration{0, time.Millisecond, 5 * time.Millisecond}).Draw(rt, "latency")
		m.px.SetLatency(d)
		return
	case "silence":
		if m.kind != kindRedlock {
			return
		}
		m.silent = !m.silent
		m.px.DropReplies(m.silent)
		return
	}
	ctx := context.Background()
	name := fmt.Sprintf("%s by %d (write %v)", op, actor, write)
	switch op {
	case "try":
		if m.canGrant(write) && !m.fault(actor) {
			m.granted(rt, m.grantNow(rt, actor, write, false, name+": a free lock"), write, actor, name)
			return
		}
		l, err := m.actors[actor].try(ctx, write)
		if err == nil {
			m.granted(rt, l, write, actor, name)
		} else if m.dropped {
			m.afterGiveUp(rt, name)
		}
	case "wait", "giveUp":
		// A context that ends after a drawn delay: before, during or
		// after the first attempt, the subscription or the wait.
		d := rapid.SampledFrom([]time.Duration{0, 100 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 20 * time.Millisecond}).Draw(rt, "give up after")
		free := m.canGrant(write)
		if op == "wait" && free {
			d = 10 * time.Second
		}
		wctx, cancel := context.WithTimeout(ctx, d)
		l, err := m.actors[actor].wait(wctx, write)
		cancel()
		if err == nil {
			m.granted(rt, l, write, actor, name)
			return
		}
		if op == "wait" && free && !m.fault(actor) {
			rt.Fatalf("%s: a free lock was not granted within the wait: %v", name, err)
		}
		if !errors.Is(err, lock.ErrNotAcquired) && !m.fault(actor) {
			rt.Fatalf("%s: %v", name, err)
		}
		m.afterGiveUp(rt, name)
	case "extend":
		if len(m.live) == 0 {
			return
		}
		h := m.live[rapid.IntRange(0, len(m.live)-1).Draw(rt, "lease")]
		held := believed(h.l)
		err := h.l.Extend(ctx)
		if err != nil && held && !m.fault(h.actor) {
			rt.Fatalf("%s: extend of a held lease: %v", name, err)
		}
	case "release":
		if len(m.live) == 0 {
			return
		}
		i := rapid.IntRange(0, len(m.live)-1).Draw(rt, "lease")
		m.release(rt, i, name)
		if len(m.live) == 0 {
			m.mustBeFree(rt, name, m.dropped)
		}
	case "handoff":
		// A waiter is woken (or polls) when every lease is released.
		if len(m.live) == 0 || m.fault(actor) {
			return
		}
		got := make(chan error, 1)
		var l *lock.Lease
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var err error
			l, err = m.actors[actor].wait(wctx, write)
			got <- err
		}()
		time.Sleep(time.Duration(rapid.IntRange(0, 5).Draw(rt, "release after ms")) * time.Millisecond)
		m.releaseAll(rt, name)
		if err := <-got; err != nil {
			rt.Fatalf("%s: the waiter did not get the released lock: %v", name, err)
		}
		m.granted(rt, l, write, actor, name)
	}
}

// afterGiveUp checks that a waiter that gave up left nothing: a reader gets
// in if no writer is held, and anyone on a free lock; at once, or, when the
// step's replies were lost (the withdrawal could not get through either),
// as soon as they come again.
func (m *modelRun) afterGiveUp(rt *rapid.T, what string) {
	lost := m.dropped
	m.healing = m.healing || lost
	m.heal()
	if m.kind == kindRW && m.canGrant(false) {
		l := m.grantNow(rt, 0, false, lost, what+": a reader after a waiter gave up")
		m.granted(rt, l, false, 0, what+": reader")
		m.release(rt, len(m.live)-1, what+": reader")
	}
	if len(m.live) == 0 {
		m.mustBeFree(rt, what, lost)
	}
}

// heal ends the step's lost replies.
func (m *modelRun) heal() {
	if m.dropped {
		m.px.DropReplies(false)
	}
}

// grantNow is actor's TryAcquire, which must succeed at once, or within a
// few seconds of retries after lost replies. A Redlock's release and
// give-back return on a majority, so the third master's may still be on
// its way; with another master silent a new owner needs that one too, and
// gets the lock once it lands: a Redlock also gets the few seconds.
func (m *modelRun) grantNow(rt *rapid.T, actor int, write, lost bool, what string) *lock.Lease {
	lost = lost || m.healing || m.kind == kindRedlock
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := m.actors[actor].try(context.Background(), write)
		if err == nil {
			return l
		}
		if !lost || time.Now().After(deadline) {
			rt.Fatalf("%s: refused (something a waiter left?): %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (m *modelRun) release(rt *rapid.T, i int, what string) {
	h := m.live[i]
	m.live = append(m.live[:i], m.live[i+1:]...)
	held := believed(h.l)
	err := h.l.Release(context.Background())
	if err != nil && held && !m.fault(h.actor) {
		rt.Fatalf("%s: release of a held lease: %v", what, err)
	}
	// A release whose replies were lost may not have run: it is retried
	// in the background once they come again.
	m.healing = m.healing || err != nil && m.fault(h.actor)
}

func (m *modelRun) releaseAll(rt *rapid.T, what string) {
	for len(m.live) > 0 {
		m.release(rt, 0, what)
	}
}

// mustBeFree: with every lease released, the other actor (the one with the
// direct path) gets the lock in every mode, and gives it back.
func (m *modelRun) mustBeFree(rt *rapid.T, what string, lost bool) {
	m.heal()
	l := m.grantNow(rt, 0, true, lost, what+": the lock once every lease is released")
	m.granted(rt, l, true, 0, what+": free check")
	m.release(rt, len(m.live)-1, what+": free check")
}
