package lock_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// fencedWrite writes ARGV[2] to KEYS[2] when the token ARGV[1] passes the
// fence at KEYS[1] (FenceLua), and answers "STALE fence" otherwise.
var fencedWrite = redis.NewScript(lock.FenceLua + `
if not redkit_fence(KEYS[1], ARGV[1]) then return redis.error_reply('STALE fence') end
redis.call('SET', KEYS[2], ARGV[2])
return 1`)

// TestRedlock_Fence_pausedHolderRefused: Kleppmann's scenario on a
// Redlock whose masters' counters differ. C misses three acquisitions (its
// counter behind), then X takes the lock on A and C (B cut off) and pauses
// past its TTL; Y takes it on B and C (A cut off). The largest counter of
// Y's majority would equal X's token had C not been raised to it before X's
// lease was returned; with the raise, Y's token is above X's, and X's late
// write is refused by the resource's own Redis, through FenceLua in the
// writing script and through CheckFence.
func TestRedlock_Fence_pausedHolderRefused(t *testing.T) {
	const A, B, C = 0, 1, 2
	g := newFenceRig(t, 3, redistest.Options{})
	rl, _ := g.redlock(t, sendOnce)
	res := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	var log tokenLog
	g.cut(t, C, true)
	for i := range 3 {
		g.takeAndRelease(t, rl, "storage", &log, fmt.Sprintf("C cut, round %d", i))
	}
	g.cut(t, C, false)
	g.cut(t, B, true)
	// A TTL of 4s gives each master 200ms to answer on a loaded machine.
	m := rl.Mutex("storage", lock.WithTTL(4*time.Second), lock.WithWatchdog(false))
	x, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	log.add(t, x, "X")
	fenceKey := lock.FenceKey(g.prefix, "file", m.Name())
	dataKey := g.prefix + ":{file}:data"
	require.NoError(t, fencedWrite.Run(ctx, res, []string{fenceKey, dataKey}, x.Fence().Token, "X").Err())

	// X pauses (it neither renews nor writes); A becomes unreachable.
	g.cut(t, B, false)
	g.cut(t, A, true)
	// Y tries once X's TTL has run out on C (an attempt refused there
	// would draw B's counter again, and hide what this test shows).
	eventually(t, func() bool { return redlockKey(t, g.direct[C], g.prefix, "storage") == "" }, "X's lock expired on C")
	y, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	log.add(t, y, "Y, on B and C")
	require.NoError(t, fencedWrite.Run(ctx, res, []string{fenceKey, dataKey}, y.Fence().Token, "Y").Err())

	// X resumes and writes late.
	err = fencedWrite.Run(ctx, res, []string{fenceKey, dataKey}, x.Fence().Token, "X late").Err()
	require.ErrorContains(t, err, "STALE", "X's late write is refused")
	require.ErrorIs(t, lock.CheckFence(ctx, res, fenceKey, x.Fence()), lock.ErrStaleFence)
	require.NoError(t, lock.CheckFence(ctx, res, fenceKey, y.Fence()))
	v, err := res.Get(ctx, dataKey).Result()
	require.NoError(t, err)
	require.Equal(t, "Y", v)
	require.ErrorIs(t, x.Err(), lock.ErrLeaseExpired)
	require.NoError(t, y.Release(ctx))
}

// TestRedlock_Fence_withoutPersistence shows what the token does not
// survive: a master restarted without persistence comes back with no
// counter. C misses three acquisitions; A is killed and restarted without
// AOF (its counter and lock are gone); the next lease, granted by A and C
// (B cut off), draws 1 on both: its token is below the earlier ones. A
// resource that saw them refuses the new holder's writes (ErrStaleFence)
// and would take a write from an earlier holder still running.
func TestRedlock_Fence_withoutPersistence(t *testing.T) {
	const A, B, C = 0, 1, 2
	g := newFenceRig(t, 3, redistest.Options{})
	rl, _ := g.redlock(t, sendOnce)
	res := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	fenceKey := lock.FenceKey(g.prefix, "file", "storage")
	var (
		log  tokenLog
		last *lock.Lease
	)
	g.cut(t, C, true)
	for i := range 3 {
		last = g.takeAndRelease(t, rl, "storage", &log, fmt.Sprintf("C cut, round %d", i))
		require.NoError(t, lock.CheckFence(ctx, res, fenceKey, last.Fence()))
	}
	g.cut(t, C, false)
	require.NoError(t, g.servers[A].Kill())
	require.NoError(t, g.servers[A].Restart(ctx))
	g.reconnect(t)
	require.Equal(t, []int64{0, 3, 0}, g.counters(t), "A forgot its counter")
	g.cut(t, B, true)
	l, err := rl.Mutex("storage").TryAcquire(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, l.Fence().Token, "A and C drew 1: the token went back")
	require.Less(t, l.Fence().Token, last.Fence().Token)
	require.ErrorIs(t, lock.CheckFence(ctx, res, fenceKey, l.Fence()), lock.ErrStaleFence,
		"the resource refuses the new holder")
	require.NoError(t, l.Release(ctx))
}

// TestRedlock_Fence_pausedMaster: master C is stopped (SIGSTOP) for four
// acquisitions by two Redlocks; their calls to it queue up and run when it
// resumes (the grants then come late and are given back, its counter is
// raised). Tokens keep increasing through the pause and after it, when
// C's counter is behind and B is cut off.
func TestRedlock_Fence_pausedMaster(t *testing.T) {
	const B, C = 1, 2
	g := newFenceRig(t, 3, redistest.Options{})
	a, _ := g.redlock(t, sendOnce)
	b, _ := g.redlock(t, goRedisDefaults)
	var log tokenLog
	require.NoError(t, g.servers[C].Pause())
	g.isCut[C] = true // not read while stopped
	for i := range 4 {
		rl := []*lock.Redlock{a, b}[i%2]
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("C stopped, round %d", i))
	}
	require.NoError(t, g.servers[C].Resume())
	g.isCut[C] = false
	g.released(t, "report")
	g.cut(t, B, true)
	for i := range 4 {
		rl := []*lock.Redlock{a, b}[i%2]
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("C resumed, B cut, round %d", i))
	}
}

// redlockHoldModel is a lock with fencing tokens seen through Redlock
// leases: a lease is granted only while no other is held, with a token
// above every earlier one. A refused TryAcquire is always possible (a
// Redlock attempt can lose the vote of a master to a concurrent attempt,
// or meet a lock an earlier attempt is still giving back); a release of a
// held lease always succeeds (the TTL outlasts the test).
var redlockHoldModel = porcupine.Model{
	Init: lockModel.Init,
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		switch {
		case in.acquire && out.ok:
			return s.holder == -1 && out.token > s.last, lockState{holder: in.client, last: out.token}
		case in.acquire:
			return true, s
		case out.ok:
			return s.holder == in.client, lockState{holder: -1, last: s.last}
		default:
			return false, s
		}
	},
	Equal:             lockModel.Equal,
	DescribeOperation: lockModel.DescribeOperation,
}

// TestRedlock_Fence_Linearizable_ConcurrentSafe records four clients (two
// Redlocks, one sending once, one on go-redis's re-sends) taking and
// releasing one name on three masters while each master in turn loses its
// replies or is stopped for a while (so the counters differ and acquires
// raise them), and
// checks the history with porcupine: leases are exclusive and each token
// is above every token of a lease that ended before it began.
func TestRedlock_Fence_Linearizable_ConcurrentSafe(t *testing.T) {
	g := newFenceRig(t, 3, redistest.Options{})
	rls := make([]*lock.Redlock, 2)
	rls[0], _ = g.redlock(t, sendOnce)
	rls[1], _ = g.redlock(t, goRedisDefaults)
	const clients, opsPerClient = 4, 60
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		granted int
		failed  atomic.Int64
	)
	stop := make(chan struct{})
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		for i := 0; ; i++ {
			m := i % 3
			// Replies lost, then the server stopped: a master cut off
			// would make go-redis refuse to dial it for a while after it
			// is back, and two masters would be out at once.
			pause := i%2 == 1
			if pause {
				_ = g.servers[m].Pause()
			} else {
				g.proxies[m].DropReplies(true)
			}
			select {
			case <-stop:
			case <-time.After(100 * time.Millisecond):
			}
			if pause {
				_ = g.servers[m].Resume()
			} else {
				g.proxies[m].DropReplies(false)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for c := range clients {
		m := rls[c%2].Mutex("linear", lock.WithTTL(time.Minute))
		wg.Go(func() {
			var ops []porcupine.Operation
			ok := 0
			for len(ops) < opsPerClient {
				call := now()
				l, err := m.TryAcquire(t.Context())
				ret := now()
				// An error (a master out and another's connection broken
				// by a lost reply) is an attempt that got no lease, as
				// ErrNotAcquired is.
				if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
					failed.Add(1)
				}
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{client: c, acquire: true},
					Call: call, Output: lockOutput{ok: l != nil, token: l.Fence().Token}, Return: ret})
				if l == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				ok++
				call = now()
				err = l.Release(t.Context())
				ret = now()
				if err != nil {
					t.Logf("client %d: release of token %d: %v", c, l.Fence().Token, err)
				}
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
	require.Positive(t, granted)
	t.Logf("%d operations, %d leases granted, %d acquires failed", len(history), granted, failed.Load())
	res := porcupine.CheckOperationsTimeout(redlockHoldModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history of %d operations is not linearizable (Unknown = timed out)", len(history))
}
