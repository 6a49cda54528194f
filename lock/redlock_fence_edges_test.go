package lock_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// beforeRaise is a go-redis hook that runs fn with the lock key just
// before redlock_raise.lua is sent on this master.
type beforeRaise struct {
	sha string
	fn  func(lockKey string)
}

func newBeforeRaise(fn func(string)) *beforeRaise {
	return &beforeRaise{sha: fmt.Sprintf("%x", sha1.Sum([]byte(lock.Scripts()["redlock_raise.lua"]))), fn: fn}
}

func (h *beforeRaise) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforeRaise) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if cmd.Name() == "evalsha" && len(a) > 3 && a[1] == h.sha {
			h.fn(a[3].(string))
		}
		return next(ctx, cmd)
	}
}
func (h *beforeRaise) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// counterKeyOf returns master i's fence counter key (the test uses one name).
func (g *fenceRig) counterKeyOf(t *testing.T, i int) string {
	var keys []string
	eventually(t, func() bool {
		var err error
		keys, err = g.direct[i].Keys(context.Background(), g.prefix+":lock:v2:*:tokens").Result()
		return err == nil && len(keys) == 1
	}, "the master has its counter")
	return keys[0]
}

// TestRedlock_Fence_raiseMeetsAnotherOwner: A's counter is ahead, so an
// acquire raises B and C in a second round, and the raise finds another
// owner's lock on them (a hook sets it just before the raise is sent: the
// attempt's lock there expired and another attempt took it, which no
// fault reproduces on demand between the two rounds):
// no majority holds the lock at the token, the attempt gives back what it
// has and leaves the other owner's locks alone, and the counters are
// raised anyway. With one of them hijacked, the lease is returned and the
// hijacked master is at the token.
func TestRedlock_Fence_raiseMeetsAnotherOwner(t *testing.T) {
	for _, hijack := range [][]int{{1, 2}, {1}} {
		t.Run(fmt.Sprint(hijack), func(t *testing.T) {
			const A, C = 0, 2
			g := newFenceRig(t, 3, redistest.Options{})
			var (
				masters []redis.UniversalClient
				mu      sync.Mutex
				other   = lock.NewOwner() + ":999999"
				hit     = map[int]bool{}
			)
			for i, px := range g.proxies {
				c := clientOf(t, px.Addr(), sendOnce)
				if slices.Contains(hijack, i) {
					c.AddHook(newBeforeRaise(func(key string) {
						mu.Lock()
						hit[i] = true
						mu.Unlock()
						if err := g.direct[i].Set(context.Background(), key, other, time.Minute).Err(); err != nil {
							t.Errorf("hijack master %d: %v", i, err)
						}
					}))
				}
				masters = append(masters, c)
			}
			rl := mustRedlock(t, masters, lock.WithKeyPrefix(g.prefix), lock.WithTTL(10*time.Second))
			t.Cleanup(func() { _ = rl.Close() })
			ctx := t.Context()
			var log tokenLog
			g.takeAndRelease(t, rl, "report", &log, "warm-up")
			require.NoError(t, g.direct[A].IncrBy(ctx, g.counterKeyOf(t, A), 10).Err())
			// C's replies held: A and B decide the first round, so A's
			// counter is the token and B and C are raised.
			g.proxies[C].HoldReplies(100 * time.Millisecond)
			l, err := rl.Mutex("report").TryAcquire(ctx)
			g.proxies[C].HoldReplies(0)
			mu.Lock()
			hits := len(hit)
			mu.Unlock()
			require.Equal(t, len(hijack), hits, "the raise was sent to the hijacked masters")
			c := g.counters(t)
			if len(hijack) == 2 {
				require.Nil(t, l)
				require.ErrorIs(t, err, lock.ErrNotAcquired)
				for _, i := range hijack {
					k := redlockKey(t, g.direct[i], g.prefix, "report")
					v, _ := g.direct[i].Get(ctx, k).Result()
					require.Equal(t, other, v, "the other owner's lock on master %d is left alone", i)
					require.Equal(t, c[A], c[i], "master %d raised anyway", i)
				}
				eventually(t, func() bool { return redlockKey(t, g.direct[A], g.prefix, "report") == "" }, "A given back")
				return
			}
			require.NoError(t, err)
			log.add(t, l, "one hijacked")
			require.EqualValues(t, c[A], l.Fence().Token)
			require.GreaterOrEqual(t, c[1], c[A])
			require.NoError(t, l.Release(ctx))
		})
	}
}

// TestRedlock_Fence_extendThenRelease: a lease whose masters' counters
// differed (A ahead, B and C raised) is extended and released; the next
// leases, with each master cut off in turn, are above its token.
func TestRedlock_Fence_extendThenRelease(t *testing.T) {
	const A, B, C = 0, 1, 2
	g := newFenceRig(t, 3, redistest.Options{})
	rl, _ := g.redlock(t, goRedisDefaults, lock.WithTTL(5*time.Second))
	ctx := t.Context()
	var log tokenLog
	g.takeAndRelease(t, rl, "report", &log, "warm-up")
	require.NoError(t, g.direct[A].IncrBy(ctx, g.counterKeyOf(t, A), 7).Err())
	l, err := rl.Mutex("report").TryAcquire(ctx)
	require.NoError(t, err)
	log.add(t, l, "A ahead")
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))
	g.released(t, "report")
	for _, cut := range []int{A, B, C, A} {
		g.cut(t, cut, true)
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("%d cut", cut))
		g.cut(t, cut, false)
		g.reconnect(t)
	}
}

// TestRedlock_Fence_restartDuringRaise: a master is killed (SIGKILL)
// while the reply of its raise is held, and restarted from its AOF
// (appendfsync always) while the acquire runs, on go-redis's re-sends. The
// raise it ran survives the restart, and tokens keep increasing, also with
// each master cut off in turn afterwards.
func TestRedlock_Fence_restartDuringRaise(t *testing.T) {
	const A, B, C = 0, 1, 2
	g := newFenceRig(t, 3, redistest.Options{AOF: true, AppendFsync: "always"})
	rl, rts := g.redlock(t, goRedisDefaults, lock.WithTTL(30*time.Second))
	ctx := t.Context()
	var log tokenLog
	for r := range 4 {
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("round %d warm", r))
		require.NoError(t, g.direct[A].IncrBy(ctx, g.counterKeyOf(t, A), 5).Err())
		victim := []int{B, C}[r%2]
		raises := rts[victim].raises()
		g.proxies[victim].HoldReplies(2 * time.Second)
		type res struct {
			l   *lock.Lease
			err error
		}
		done := make(chan res, 1)
		go func() {
			l, err := rl.Mutex("report").TryAcquire(ctx)
			done <- res{l, err}
		}()
		eventually(t, func() bool { return rts[victim].raises() > raises }, "the raise was sent")
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, g.servers[victim].Kill())
		g.proxies[victim].HoldReplies(0)
		require.NoError(t, g.servers[victim].Restart(ctx))
		got := <-done
		require.NoError(t, got.err, "round %d: A and the master not stopped make a majority at the token", r)
		log.add(t, got.l, fmt.Sprintf("round %d", r))
		require.NoError(t, got.l.Release(ctx))
		g.reconnect(t)
		g.released(t, "report")
	}
	for _, cut := range []int{A, B, C} {
		g.cut(t, cut, true)
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("%d cut", cut))
		g.cut(t, cut, false)
		g.reconnect(t)
	}
}

// TestRedlock_Fence_fiveMasters_twoKilledForGood: five masters, A's
// counter ahead (as if it had granted acquisitions the others missed), D
// and E cut off: the lease is granted by A, B and C, A's counter is the
// token, and B and C are at it when the lease is returned. Then A and B
// are killed for good (SIGKILL, never restarted): the next leases, on C,
// D and E (all three needed), are above every earlier token, by two
// Redlocks taking turns, with one of the three ahead in turn.
func TestRedlock_Fence_fiveMasters_twoKilledForGood(t *testing.T) {
	const A, B, C, D, E = 0, 1, 2, 3, 4
	g := newFenceRig(t, 5, redistest.Options{})
	a, _ := g.redlock(t, sendOnce)
	b, _ := g.redlock(t, goRedisDefaults)
	ctx := t.Context()
	var log tokenLog
	g.takeAndRelease(t, a, "report", &log, "warm-up")
	require.NoError(t, g.direct[A].IncrBy(ctx, g.counterKeyOf(t, A), 10).Err())
	g.cut(t, D, true)
	g.cut(t, E, true)
	l, err := a.Mutex("report").TryAcquire(ctx)
	require.NoError(t, err)
	c := g.counters(t)
	log.add(t, l, "D and E cut")
	require.Equal(t, c[A], int64(l.Fence().Token), "A's counter is the token")
	require.Equal(t, []int64{c[A], c[A]}, []int64{c[B], c[C]}, "B and C raised before the lease was returned")
	require.NoError(t, l.Release(ctx))
	g.released(t, "report")
	g.cut(t, D, false)
	g.cut(t, E, false)
	g.reconnect(t, D, E)
	for _, i := range []int{A, B} {
		require.NoError(t, g.servers[i].Kill())
		g.isCut[i] = true
	}
	for i := range 6 {
		rl := []*lock.Redlock{a, b}[i%2]
		ahead := []int{C, D, E}[i%3]
		require.NoError(t, g.direct[ahead].IncrBy(ctx, g.counterKeyOf(t, ahead), 3).Err())
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("A and B dead, round %d", i))
	}
}

// TestRedlock_Fence_restartDuringGrant: a master's grant reply is held,
// the master killed (SIGKILL) and restarted from its AOF (appendfsync
// always) meanwhile, on go-redis's re-sends; on odd rounds another master
// is ahead, so the acquire raises. Every acquire returns a lease, and
// tokens keep increasing.
func TestRedlock_Fence_restartDuringGrant(t *testing.T) {
	g := newFenceRig(t, 3, redistest.Options{AOF: true, AppendFsync: "always"})
	rl, rts := g.redlock(t, goRedisDefaults, lock.WithTTL(30*time.Second))
	ctx := t.Context()
	var log tokenLog
	for r := range 6 {
		victim := r % 3
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("round %d warm", r))
		if r%2 == 1 {
			require.NoError(t, g.direct[(victim+1)%3].IncrBy(ctx, g.counterKeyOf(t, (victim+1)%3), 4).Err())
		}
		before := rts[victim].acquires()
		g.proxies[victim].HoldReplies(2 * time.Second)
		type res struct {
			l   *lock.Lease
			err error
		}
		done := make(chan res, 1)
		go func() {
			l, err := rl.Mutex("report").TryAcquire(ctx)
			done <- res{l, err}
		}()
		eventually(t, func() bool { return rts[victim].acquires() > before }, "the grant was sent")
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, g.servers[victim].Kill())
		g.proxies[victim].HoldReplies(0)
		require.NoError(t, g.servers[victim].Restart(ctx))
		got := <-done
		require.NoError(t, got.err)
		log.add(t, got.l, fmt.Sprintf("round %d", r))
		require.NoError(t, got.l.Release(ctx))
		g.reconnect(t)
		g.released(t, "report")
	}
	for _, cut := range []int{0, 1, 2} {
		g.cut(t, cut, true)
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("%d cut", cut))
		g.cut(t, cut, false)
		g.reconnect(t)
	}
}

// TestRedlock_Fence_fiveMasters_Linearizable_ConcurrentSafe records four
// clients (two Redlocks with different TTLs, one sending once, one on
// go-redis's re-sends) taking and releasing one name on five masters while
// two at a time, drawn at random, are stopped (SIGSTOP) or lose their
// replies (so counters differ and acquires raise), and checks the history
// with porcupine as TestRedlock_Fence_Linearizable_ConcurrentSafe does.
func TestRedlock_Fence_fiveMasters_Linearizable_ConcurrentSafe(t *testing.T) {
	g := newFenceRig(t, 5, redistest.Options{})
	rls := make([]*lock.Redlock, 2)
	var rts0, rts1 []*scriptCounter
	rls[0], rts0 = g.redlock(t, sendOnce)
	rls[1], rts1 = g.redlock(t, goRedisDefaults)
	defer func() {
		var n int64
		for _, rt := range append(rts0, rts1...) {
			n += rt.raises()
		}
		t.Logf("raises sent: %d, counters %v", n, g.counters(t))
	}()
	ttls := []time.Duration{20 * time.Second, time.Minute}
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		granted int
	)
	stop := make(chan struct{})
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		r := rand.New(rand.NewPCG(5, 6))
		for {
			down := r.Perm(5)[:2]
			pause := r.IntN(2) == 0
			for _, m := range down {
				if pause {
					_ = g.servers[m].Pause()
				} else {
					g.proxies[m].DropReplies(true)
				}
			}
			select {
			case <-stop:
			case <-time.After(100 * time.Millisecond):
			}
			for _, m := range down {
				if pause {
					_ = g.servers[m].Resume()
				} else {
					g.proxies[m].DropReplies(false)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for c := range 4 {
		m := rls[c%2].Mutex("linear5", lock.WithTTL(ttls[c%2]))
		wg.Go(func() {
			var ops []porcupine.Operation
			ok := 0
			for len(ops) < 50 {
				call := now()
				l, _ := m.TryAcquire(t.Context())
				ret := now()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{client: c, acquire: true},
					Call: call, Output: lockOutput{ok: l != nil, token: l.Fence().Token}, Return: ret})
				if l == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				ok++
				call = now()
				err := l.Release(t.Context())
				ret = now()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{client: c},
					Call: call, Output: lockOutput{ok: err == nil}, Return: ret})
			}
			mu.Lock()
			history = append(history, ops...)
			granted += ok
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	<-faults
	t.Logf("%d operations, %d leases", len(history), granted)
	require.Positive(t, granted)
	res := porcupine.CheckOperationsTimeout(redlockHoldModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res)
}
