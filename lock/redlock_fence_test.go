package lock_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// fenceRig is a set of independent Redlock masters, each behind a fault
// proxy, with a direct client of each for reading its state.
type fenceRig struct {
	servers []*redistest.Server
	proxies []*redistest.Proxy
	direct  []*redis.Client
	prefix  string
}

// newFenceRig starts n masters with opts (AOF "always" in the tests that
// restart them).
func newFenceRig(t *testing.T, n int, opts redistest.Options) *fenceRig {
	g := &fenceRig{prefix: testPrefix(t)}
	for range n {
		s := redistest.New(t, opts)
		g.servers = append(g.servers, s)
		g.proxies = append(g.proxies, redistest.NewProxy(t, s.Addr()))
		d := clientOf(t, s.Addr(), nil)
		g.direct = append(g.direct, d)
		// Loaded beforehand, so that a first call's NOSCRIPT and EVAL do
		// not count as a round trip of the protocol.
		for _, src := range lock.Scripts() {
			require.NoError(t, d.ScriptLoad(t.Context(), src).Err())
		}
	}
	return g
}

// sendOnce and goRedisDefaults are the two ways a master's client may
// send: once, or with go-redis's re-sends after a timeout (MaxRetries 3).
// Both read for at most 300ms, so a lost reply costs the test little.
var (
	sendOnce = func(o *redis.Options) {
		o.MaxRetries, o.DialerRetries, o.ReadTimeout = -1, 1, 300*time.Millisecond
	}
	goRedisDefaults = func(o *redis.Options) { o.DialerRetries, o.ReadTimeout = 1, 300*time.Millisecond }
)

// scriptCounter is a go-redis hook counting the lock scripts sent, by file
// name: an acquire's round trips on a master are its acquire.lua and
// redlock_raise.lua calls there (a release retried in the background runs
// release.lua, and is not one of them).
type scriptCounter struct {
	mu    sync.Mutex
	n     map[string]int64
	names map[string]string // SHA1 -> file name
}

func newScriptCounter() *scriptCounter {
	c := &scriptCounter{n: map[string]int64{}, names: map[string]string{}}
	for name, src := range lock.Scripts() {
		c.names[fmt.Sprintf("%x", sha1.Sum([]byte(src)))] = name
	}
	return c
}

func (c *scriptCounter) count(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	var sha string
	switch cmd.Name() {
	case "evalsha":
		sha, _ = args[1].(string)
	case "eval":
		src, _ := args[1].(string)
		sha = fmt.Sprintf("%x", sha1.Sum([]byte(src)))
	default:
		return
	}
	c.mu.Lock()
	c.n[c.names[sha]]++
	c.mu.Unlock()
}

// acquires is the number of acquire and raise calls so far.
func (c *scriptCounter) acquires() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n["acquire.lua"] + c.n["redlock_raise.lua"]
}

func (c *scriptCounter) raises() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n["redlock_raise.lua"]
}

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// redlock returns a Redlock over the rig's proxies, each master's client
// adjusted, with a script counter per master.
func (g *fenceRig) redlock(t *testing.T, adjust func(*redis.Options), opts ...lock.Option) (*lock.Redlock, []*scriptCounter) {
	var (
		masters []redis.UniversalClient
		rts     []*scriptCounter
	)
	for _, px := range g.proxies {
		c := clientOf(t, px.Addr(), adjust)
		rt := newScriptCounter()
		c.AddHook(rt)
		masters = append(masters, c)
		rts = append(rts, rt)
	}
	rl := mustRedlock(t, masters, append([]lock.Option{lock.WithKeyPrefix(g.prefix)}, opts...)...)
	t.Cleanup(func() { _ = rl.Close() })
	return rl, rts
}

// counters returns the fence counter of every master (0 where it has none):
// the tests use one name, so each master has at most one.
func (g *fenceRig) counters(t *testing.T) []int64 {
	var out []int64
	for _, d := range g.direct {
		keys, err := d.Keys(context.Background(), g.prefix+":lock:v2:*:tokens").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, len(keys), 1)
		var n int64
		if len(keys) == 1 {
			n, err = d.Get(context.Background(), keys[0]).Int64()
			require.NoError(t, err)
		}
		out = append(out, n)
	}
	return out
}

// cut cuts master i off (connections closed, new ones refused) or
// reconnects it.
func (g *fenceRig) cut(t *testing.T, i int, on bool) { require.NoError(t, g.proxies[i].Cut(on)) }

// held reports on how many masters name is locked.
func (g *fenceRig) held(t *testing.T, name string) int {
	n := 0
	for _, d := range g.direct {
		if redlockKey(t, d, g.prefix, name) != "" {
			n++
		}
	}
	return n
}

// rtSnapshot returns the acquire round trips counted so far per master.
func rtSnapshot(rts []*scriptCounter) []int64 {
	var out []int64
	for _, rt := range rts {
		out = append(out, rt.acquires())
	}
	return out
}

func rtSince(rts []*scriptCounter, before []int64) []int64 {
	out := rtSnapshot(rts)
	for i := range out {
		out[i] -= before[i]
	}
	return out
}

// tokenLog checks that the tokens it is given strictly increase.
type tokenLog struct{ tokens []uint64 }

func (g *tokenLog) add(t *testing.T, l *lock.Lease, what string) {
	t.Helper()
	tok := l.Fence().Token
	require.Positive(t, tok, "%s: a Redlock lease has a token", what)
	if n := len(g.tokens); n > 0 {
		require.Greater(t, tok, g.tokens[n-1], "%s: token after %v", what, g.tokens)
	}
	g.tokens = append(g.tokens, tok)
}

// takeAndRelease acquires name on rl (waiting), logs its token and
// releases it, waiting until every reachable master has let it go.
func (g *fenceRig) takeAndRelease(t *testing.T, rl *lock.Redlock, name string, log *tokenLog, what string) *lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := rl.Mutex(name).Acquire(ctx)
	require.NoError(t, err, what)
	log.add(t, l, what)
	require.NoError(t, l.Release(ctx), what)
	return l
}

// TestRedlock_Fence_twoClients: two Redlocks over the same masters (one
// sending each command once, one on go-redis's re-sends) take turns; every
// lease has a token, strictly above every earlier one.
func TestRedlock_Fence_twoClients(t *testing.T) {
	g := newFenceRig(t, 3, redistest.Options{})
	a, _ := g.redlock(t, sendOnce)
	b, _ := g.redlock(t, goRedisDefaults)
	var log tokenLog
	for i := range 20 {
		rl := a
		if i%2 == 1 {
			rl = b
		}
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("round %d", i))
	}
}

// TestRedlock_Fence_masterFallsBehind: a master cut off for some
// acquisitions misses their increments, so the masters' counters differ.
// The largest counter of a majority is not enough then: the next majority
// may lack the master that had it. Here master C misses three acquisitions,
// then B one (A and C grant it: A's counter is the token, C's is behind),
// then A one (B and C grant it). Without raising C to the token in the
// second, the third's token (the larger of B's and C's) would equal the
// second's. The raise is a second round trip on the masters behind only;
// a master behind that granted late is brought up in the background, and
// once the counters agree an acquire is one round trip again.
func TestRedlock_Fence_masterFallsBehind(t *testing.T) {
	g := newFenceRig(t, 3, redistest.Options{})
	rl, rts := g.redlock(t, sendOnce)
	const A, B, C = 0, 1, 2
	var log tokenLog

	g.cut(t, C, true)
	for i := range 3 {
		g.takeAndRelease(t, rl, "report", &log, fmt.Sprintf("C cut, round %d", i))
	}
	require.Equal(t, []int64{3, 3, 0}, g.counters(t))

	g.cut(t, C, false)
	g.cut(t, B, true)
	before := rtSnapshot(rts)
	l := g.takeAndRelease(t, rl, "report", &log, "B cut")
	require.EqualValues(t, 4, l.Fence().Token, "A's counter")
	require.Equal(t, []int64{4, 3, 4}, g.counters(t), "C raised to the token")
	got := rtSince(rts, before)
	require.EqualValues(t, 1, got[A], "A: the grant")
	require.EqualValues(t, 2, got[C], "C: the grant and the raise")

	g.cut(t, B, false)
	g.cut(t, A, true)
	l = g.takeAndRelease(t, rl, "report", &log, "A cut")
	require.EqualValues(t, 5, l.Fence().Token, "above the last token")
	require.Equal(t, []int64{4, 5, 5}, g.counters(t), "B raised to the token")

	// A is behind now (4; B and C at 5). Slowed, its grant comes after B's
	// and C's have decided the acquire: it is raised in the background.
	g.cut(t, A, false)
	g.proxies[A].SetLatency(30 * time.Millisecond)
	before = rtSnapshot(rts)
	l = g.takeAndRelease(t, rl, "report", &log, "A slow")
	require.EqualValues(t, 6, l.Fence().Token)
	got = rtSince(rts, before)
	require.EqualValues(t, 1, got[B], "B: one round trip")
	require.EqualValues(t, 1, got[C], "C: one round trip")
	g.proxies[A].SetLatency(0)
	eventually(t, func() bool {
		c := g.counters(t)
		return c[A] == 6 && c[B] == 6 && c[C] == 6
	}, "A brought up to the token in the background")

	g.cut(t, B, true)
	before = rtSnapshot(rts)
	l = g.takeAndRelease(t, rl, "report", &log, "B cut again")
	require.EqualValues(t, 7, l.Fence().Token)
	got = rtSince(rts, before)
	require.EqualValues(t, 1, got[A], "A: one round trip")
	require.EqualValues(t, 1, got[C], "C: one round trip")
}
