package lock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientOf returns a go-redis client of addr, adjusted, closed at the end of t.
func clientOf(t *testing.T, addr string, adjust func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: addr}
	if adjust != nil {
		adjust(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redlockKey returns the key of Redlock name on a master, found by pattern
// ("" when the master holds none).
func redlockKey(t *testing.T, c redis.UniversalClient, prefix, name string) string {
	keys, err := c.Keys(context.Background(), prefix+":*redlock:"+name).Result()
	require.NoError(t, err)
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// TestRedlock_Acquire_staleGiveBackSparesLaterAttempt: an attempt of a
// waiting Acquire that failed gives back what it may have got; on a master
// whose replies are lost that give-back goes on in the background. A later
// attempt of the same Acquire that wins a majority, that master included,
// must keep its lock there when the earlier give-back finally runs, or a
// second owner takes a majority while the lease is live.
func TestRedlock_Acquire_staleGiveBackSparesLaterAttempt(t *testing.T) {
	ctx := t.Context()
	var (
		xpx        []*redistest.Proxy
		xs, ys, zs []redis.UniversalClient
		ypxB       *redistest.Proxy
	)
	adjust := func(o *redis.Options) { o.MaxRetries, o.DialerRetries, o.ReadTimeout = -1, 1, 200*time.Millisecond }
	for i := range 3 {
		s := redistest.New(t, redistest.Options{})
		px := redistest.NewProxy(t, s.Addr())
		xpx = append(xpx, px)
		xs = append(xs, clientOf(t, px.Addr(), adjust))
		if i == 1 {
			ypxB = redistest.NewProxy(t, s.Addr())
			ys = append(ys, clientOf(t, ypxB.Addr(), adjust))
		} else {
			ys = append(ys, clientOf(t, s.Addr(), adjust))
		}
		zs = append(zs, clientOf(t, s.Addr(), nil))
	}
	p := testPrefix(t)
	const name = "report"
	held := func(i int) bool { return redlockKey(t, zs[i], p, name) != "" }

	// Y holds the lock on master B only: it released while cut off from B,
	// where its lock lives until Y's TTL.
	y := mustRedlock(t, ys, lock.WithKeyPrefix(p), lock.WithTTL(4*time.Second), lock.WithWatchdog(false))
	defer y.Close()
	yl, err := y.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	eventually(t, func() bool { return held(0) && held(1) && held(2) }, "Y's lock on every master")
	require.NoError(t, ypxB.Cut(true))
	_ = yl.Release(ctx)
	eventually(t, func() bool { return !held(0) && !held(2) }, "Y's release on A and C")
	require.True(t, held(1), "setup: Y's lock on B")

	// X waits; its replies from master C are lost for a while, so its
	// failed attempts' give-backs on C go on in the background.
	x := mustRedlock(t, xs, lock.WithKeyPrefix(p), lock.WithTTL(10*time.Second), lock.WithWatchdog(false))
	defer x.Close()
	xpx[2].DropReplies(true)
	type result struct {
		l   *lock.Lease
		err error
	}
	xGot := make(chan result, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := x.Mutex(name).Acquire(actx)
		xGot <- result{l, err}
	}()
	time.Sleep(3 * time.Second) // attempts fail; their give-backs on C back off
	xpx[2].DropReplies(false)
	require.Positive(t, xpx[2].Dropped(), "setup: commands ran on C and their replies were lost")
	xr := <-xGot
	require.NoError(t, xr.err)
	xl := xr.l
	defer xl.Release(context.Background())

	// Z, another process, tries while X's lease is live, past the end of
	// Y's lock on B.
	z := mustRedlock(t, zs, lock.WithKeyPrefix(p), lock.WithTTL(6*time.Second), lock.WithWatchdog(false))
	defer z.Close()
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) && time.Now().Before(xl.Until()) {
		zl, err := z.Mutex(name).TryAcquire(ctx)
		if err == nil {
			xErr, left := xl.Err(), time.Until(xl.Until())
			_ = zl.Release(ctx)
			require.Falsef(t, xErr == nil && left > 0,
				"X's lease is live (%v before its Until) and Z acquired a majority too", left)
			return
		}
		require.ErrorIs(t, err, lock.ErrNotAcquired)
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, xl.Err())
}

// TestRedlock_Release_majorityUnreachable: the holder is cut off from two
// of three masters when it releases. Release reaches one master only, which
// is no majority: it returns an error, and the release is retried on the
// other two until they answer, so the lock is free as soon as the cut
// heals, not at its TTL.
func TestRedlock_Release_majorityUnreachable(t *testing.T) {
	ctx := t.Context()
	var (
		proxies        []*redistest.Proxy
		holder, direct []redis.UniversalClient
	)
	for range 3 {
		s := redistest.New(t, redistest.Options{})
		px := redistest.NewProxy(t, s.Addr())
		proxies = append(proxies, px)
		holder = append(holder, clientOf(t, px.Addr(), func(o *redis.Options) {
			o.MaxRetries, o.DialerRetries, o.ReadTimeout = -1, 1, 300*time.Millisecond
		}))
		direct = append(direct, clientOf(t, s.Addr(), nil))
	}
	p := testPrefix(t)
	const ttl = 10 * time.Second
	rl := mustRedlock(t, holder, lock.WithKeyPrefix(p), lock.WithTTL(ttl))
	defer rl.Close()
	other := mustRedlock(t, direct, lock.WithKeyPrefix(p), lock.WithTTL(ttl))
	defer other.Close()

	l, err := rl.Mutex("report").TryAcquire(ctx)
	require.NoError(t, err)
	eventually(t, func() bool {
		for _, c := range direct {
			if redlockKey(t, c, p, "report") == "" {
				return false
			}
		}
		return true
	}, "the lock on every master")
	for _, px := range proxies[1:] {
		require.NoError(t, px.Cut(true))
	}
	rerr := l.Release(ctx)
	require.Error(t, rerr, "released on one master of three: no majority")
	require.ErrorIs(t, l.Err(), lock.ErrReleased)
	for _, px := range proxies[1:] {
		require.NoError(t, px.Cut(false))
	}
	// The lock would end by itself at its TTL on the masters that did not
	// get the release; it must be free well before.
	k := redlockKey(t, direct[1], p, "report")
	require.NotEmpty(t, k)
	expiry := time.Now().Add(direct[1].PTTL(ctx, k).Val())
	for {
		got, err := other.Mutex("report").TryAcquire(ctx)
		if err == nil {
			require.NoError(t, got.Release(ctx))
			break
		}
		require.ErrorIs(t, err, lock.ErrNotAcquired)
		require.True(t, time.Now().Before(expiry), "the lock stayed held until its TTL: the release was not retried")
		time.Sleep(20 * time.Millisecond)
	}
}

// completions counts the commands a client finished (answered or failed)
// while counting is on.
// completions counts the calls of a client that were started after on was
// set and have returned (a call started before, such as the acquire's
// answer still being read, does not count).
type completions struct {
	on, n atomic.Int64
}

func (c *completions) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *completions) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		armed := c.on.Load() == 1
		err := next(ctx, cmd)
		if armed {
			c.n.Add(1)
		}
		return err
	}
}
func (c *completions) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedlock_Release_silentMinority_decidedByMajority: one master of three
// is silent (paused with SIGSTOP) when the lease is released. The two others
// answer "released" at once, which decides the release: Release returns
// while the silent master's call is still waiting for its reply, not when
// it ends (its read timeout) or at 5% of the TTL, and the lock is free for
// a new owner at once.
func TestRedlock_Release_silentMinority_decidedByMajority(t *testing.T) {
	ctx := t.Context()
	var (
		clients []redis.UniversalClient
		silent  *redistest.Server
		behind  redis.UniversalClient // the silent master, for the test's own reads
	)
	calls := &completions{}
	for i := range 3 {
		s := redistest.New(t, redistest.Options{})
		// The answering masters get a read timeout no loaded machine
		// reaches; the silent one's must stay below peerTimeout.
		timeout := 10 * time.Second
		if i == 2 {
			timeout = time.Second
		}
		c := clientOf(t, s.Addr(), func(o *redis.Options) { o.MaxRetries, o.ReadTimeout = -1, timeout })
		if i == 2 {
			silent, behind = s, clientOf(t, s.Addr(), nil)
			c.AddHook(calls)
		}
		clients = append(clients, c)
	}
	// 5% of the TTL (3s) is longer than the silent master's read timeout.
	p := testPrefix(t)
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(p), lock.WithTTL(time.Minute))
	defer rl.Close()
	m := rl.Mutex("report")
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	// The acquire returns on a majority; a master whose grant is still on
	// its way would take the lock after the release and give it back only
	// then. Wait for the grant on all three.
	for _, c := range []redis.UniversalClient{clients[0], clients[1], behind} {
		eventually(t, func() bool { return redlockKey(t, c, p, "report") != "" }, "the lock on every master")
	}

	require.NoError(t, silent.Pause())
	t.Cleanup(func() { _ = silent.Resume() })
	calls.on.Store(1)
	require.NoError(t, l.Release(ctx))
	require.Zero(t, calls.n.Load(), "Release waited for the silent master's call to end")
	l, err = m.TryAcquire(ctx)
	require.NoError(t, err, "free on a majority")
	require.NoError(t, silent.Resume())
	require.NoError(t, l.Release(ctx))
}

// TestRedlock_TryAcquire_lostReplies_unknownOutcome: the replies of two
// masters of three are lost; the acquire ran there and took the lock. The
// error follows the error contract: it wraps ErrUnknownOutcome (not a bare
// error, which says nothing was sent), and what the acquire got is given
// back once the masters answer again.
func TestRedlock_TryAcquire_lostReplies_unknownOutcome(t *testing.T) {
	ctx := t.Context()
	var (
		clients, direct []redis.UniversalClient
		proxies         []*redistest.Proxy
	)
	for range 3 {
		s := redistest.New(t, redistest.Options{})
		px := redistest.NewProxy(t, s.Addr())
		proxies = append(proxies, px)
		clients = append(clients, clientOf(t, px.Addr(), func(o *redis.Options) { o.MaxRetries = -1 }))
		direct = append(direct, clientOf(t, s.Addr(), nil))
	}
	p := testPrefix(t)
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(p), lock.WithTTL(10*time.Second))
	defer rl.Close()
	m := rl.Mutex("report")
	warm, err := m.TryAcquire(ctx) // connections open, scripts loaded
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	proxies[1].DropReplies(true)
	proxies[2].DropReplies(true)
	_, err = m.TryAcquire(ctx)
	ran := 0
	for _, d := range direct[1:] {
		if redlockKey(t, d, p, "report") != "" {
			ran++
		}
	}
	proxies[1].DropReplies(false)
	proxies[2].DropReplies(false)
	require.Positive(t, ran, "setup: the lost acquires ran")
	require.ErrorIs(t, err, lock.ErrUnknownOutcome, "an acquire that may have run: %v", err)
	require.NotErrorIs(t, err, lock.ErrNotAcquired)
	eventually(t, func() bool {
		for _, d := range direct {
			if redlockKey(t, d, p, "report") != "" {
				return false
			}
		}
		return true
	}, "what the acquire got is given back")
}

// TestLease_Release_renewalInFlight_boundedByReleaseTimeout: Redis is
// frozen (SIGSTOP) while the watchdog's renewal is in flight. Release does
// not wait for that renewal (which ends only at the lease's Until): it
// sends the release at once, gives up after WithReleaseTimeout with an
// error that says the outcome is unknown, and the release is retried once
// Redis answers again. The client honours context deadlines
// (ContextTimeoutEnabled), so go-redis's ReadTimeout does not bound it
// instead.
func TestLease_Release_renewalInFlight_boundedByReleaseTimeout(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := clientOf(t, s.Addr(), func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	direct := clientOf(t, s.Addr(), nil)
	locks := mustNew(t, rdb, lock.WithKeyPrefix(testPrefix(t)), lock.WithReleaseTimeout(200*time.Millisecond))
	defer locks.Close()
	ctx := t.Context()
	m := locks.Mutex("g/res", lock.WithTTL(6*time.Second)) // the watchdog renews at 2s
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	acquired := time.Now()
	time.Sleep(time.Until(acquired.Add(1800 * time.Millisecond)))
	require.NoError(t, s.Pause())
	t.Cleanup(func() { _ = s.Resume() })
	time.Sleep(time.Until(acquired.Add(2300 * time.Millisecond))) // the renewal is in flight
	until := l.Until()
	rerr := l.Release(ctx)
	returned := time.Now()
	require.Truef(t, returned.Before(until), "Release returned %v after the lease's Until: it waited for the renewal in flight", returned.Sub(until))
	require.ErrorIs(t, rerr, lock.ErrUnknownOutcome)
	require.ErrorIs(t, l.Err(), lock.ErrReleased)
	require.NoError(t, s.Resume())
	eventually(t, keyGone(t, direct, m.LockKey()), "the release retried once Redis answers")
}

// TestFence_tokensPast2pow53_refused: the scripts hold a token as a Lua
// number (a double), exact only up to 2^53-1. With the fence counter there
// (set directly: a counter only ever grows, and a migrated one may start
// high), the last exact tokens are handed out in order, and then every
// kind of acquire that would draw a token refuses with an error, writing
// nothing, instead of handing out a token equal to an earlier one.
func TestFence_tokensPast2pow53_refused(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb, lock.WithWatchdog(false))
	ctx := t.Context()
	m := locks.Mutex("g/res")
	const maxExact = 1<<53 - 1
	require.NoError(t, rdb.Set(ctx, m.CounterKey(), maxExact-2, 0).Err())
	for _, want := range []uint64{maxExact - 1, maxExact} {
		l, err := m.TryAcquire(ctx)
		require.NoError(t, err)
		require.Equal(t, want, l.Fence().Token)
		require.NoError(t, l.Release(ctx))
	}
	for name, try := range map[string]func() (*lock.Lease, error){
		"mutex": func() (*lock.Lease, error) { return m.TryAcquire(ctx) },
		"fair":  func() (*lock.Lease, error) { return locks.Mutex("g/res", lock.WithFair(true)).TryAcquire(ctx) },
		"rw":    func() (*lock.Lease, error) { return locks.RWMutex("g/res").TryAcquire(ctx) },
	} {
		l, err := try()
		require.Error(t, err, "%s: acquired with token %d", name, l.Fence().Token)
		require.ErrorContains(t, err, "2^53-1", name)
		require.NotErrorIs(t, err, lock.ErrNotAcquired, name)
		require.NotErrorIs(t, err, lock.ErrUnknownOutcome, name)
	}
	n, err := rdb.Get(ctx, m.CounterKey()).Uint64()
	require.NoError(t, err)
	require.Equal(t, uint64(maxExact), n, "the counter is unchanged")
	prefix, _, _ := strings.Cut(m.LockKey(), ":lock:")
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{m.CounterKey()}, keys, "nothing but the counter")
}

// TestRWMutex_secondWaitingWriter_readerStaysOut: writer A holds; writers B
// and C wait. A releases, B takes the lock and releases it at once while C
// is still waiting (its link is slow: replies and notifications arrive 1s
// late). Writer preference holds for every waiting writer, not only the
// first: no new reader gets in while C waits.
func TestRWMutex_secondWaitingWriter_readerStaysOut(t *testing.T) {
	px := redistest.NewProxy(t, shared.Addr())
	p := testPrefix(t)
	ctx := t.Context()
	fast := newLocks(t, sharedClient(t), lock.WithKeyPrefix(p))
	fastB := newLocks(t, sharedClient(t), lock.WithKeyPrefix(p))
	slow := newLocks(t, clientOf(t, px.Addr(), nil), lock.WithKeyPrefix(p))
	rdb := sharedClient(t)
	const name = "doc"
	channel := fast.RWMutex(name).Channel()
	marked := func() bool {
		keys, err := rdb.Keys(ctx, p+":*rww:"+name).Result()
		require.NoError(t, err)
		return len(keys) > 0
	}

	a, err := fast.RWMutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	bGot := make(chan *lock.Lease, 1)
	go func() {
		l, err := fastB.RWMutex(name).Acquire(ctx)
		assert.NoError(t, err)
		bGot <- l
	}()
	eventually(t, marked, "B waits")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cDone := make(chan error, 1)
	go func() {
		l, err := slow.RWMutex(name).Acquire(cctx)
		if err == nil {
			err = l.Release(context.Background())
		}
		cDone <- err
	}()
	eventually(t, func() bool { return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 2 }, "C subscribed")
	time.Sleep(200 * time.Millisecond) // C's attempt after subscribing is answered: C waits
	px.SetLatency(time.Second)         // C's link becomes slow

	require.NoError(t, a.Release(ctx))
	b := <-bGot
	require.NotNil(t, b)
	require.NoError(t, b.Release(ctx))
	r, err := fast.RWMutex(name).TryAcquireRead(ctx)
	select {
	case cerr := <-cDone:
		t.Fatalf("setup: C's Acquire returned before the reader tried (%v)", cerr)
	default:
	}
	if err == nil {
		_ = r.Release(ctx)
	}
	px.SetLatency(0)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "a reader got in while writer C waited")
	require.NoError(t, <-cDone)
}
