package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// masterFault is what a step does to one Redlock master before an
// acquire: nothing, cut it off (connections closed, new ones refused),
// stop it (SIGSTOP: nothing answered), lose its replies (commands run,
// replies dropped), or kill it with SIGKILL and restart it from its AOF
// (appendfsync always) just before.
type masterFault string

const (
	faultNone    masterFault = "up"
	faultCut     masterFault = "cut"
	faultPause   masterFault = "paused"
	faultLost    masterFault = "lost replies"
	faultRestart masterFault = "restarted"
)

// TestRedlock_Fence_model draws sequences of acquisitions by two Redlocks
// (one sending each command once, one on go-redis's re-sends) over three
// masters, each step with a fault drawn for every master. After each
// step:
//
//   - a lease's token is above every earlier lease's;
//   - a majority of the masters that can be read (not stopped) has its
//     fence counter at the token or above: the property doc.go's argument
//     rests on (any later majority meets one of them);
//   - while the lease is held, the other Redlock is refused, faults on;
//   - once the faults are healed and the lease released, every master lets
//     the lock go (what a failed or late grant took is given back).
func TestRedlock_Fence_model(t *testing.T) {
	runFenceModel(t, 20, 8)
}

// TestChaos_Redlock_Fence_model is TestRedlock_Fence_model at a size for
// RUN_CHAOS=1 (200×CHAOS_SCALE sequences of up to 20 steps).
func TestChaos_Redlock_Fence_model(t *testing.T) {
	runFenceModel(t, 200*redistest.Chaos(t), 20)
}

func runFenceModel(t *testing.T, checks, maxSteps int) {
	g := newFenceRig(t, 3, redistest.Options{AOF: true, AppendFsync: "always"})
	redistest.SetRapidChecks(t, checks)
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		prefix := fmt.Sprintf("%s-%d", g.prefix, seq)
		var rls [2]*lock.Redlock
		var clients [2][]*redis.Client
		for k, adjust := range []func(*redis.Options){sendOnce, goRedisDefaults} {
			var masters []redis.UniversalClient
			for _, px := range g.proxies {
				o := &redis.Options{Addr: px.Addr()}
				adjust(o)
				c := redis.NewClient(o)
				clients[k] = append(clients[k], c)
				masters = append(masters, c)
			}
			rl, err := lock.NewRedlock(masters, lock.WithKeyPrefix(prefix), lock.WithTTL(4*time.Second), lock.WithWatchdog(false))
			require.NoError(rt, err)
			rls[k] = rl
		}
		defer func() {
			for k := range rls {
				_ = rls[k].Close()
				for _, c := range clients[k] {
					_ = c.Close()
				}
			}
		}()
		var maxTok uint64
		steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
		for s := range steps {
			faults := make([]masterFault, 3)
			for i := range faults {
				faults[i] = rapid.SampledFrom([]masterFault{faultNone, faultNone, faultCut, faultPause, faultLost, faultRestart}).
					Draw(rt, fmt.Sprintf("step %d master %d", s, i))
			}
			k := rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("step %d client", s))
			what := fmt.Sprintf("step %d %v by client %d", s, faults, k)
			fenceModelStep(rt, g, prefix, rls, clients, faults, k, &maxTok, what)
		}
	})
}

func fenceModelStep(rt *rapid.T, g *fenceRig, prefix string, rls [2]*lock.Redlock, clients [2][]*redis.Client,
	faults []masterFault, k int, maxTok *uint64, what string) {
	ctx := context.Background()
	q := len(g.servers)/2 + 1
	for i, f := range faults {
		switch f {
		case faultRestart:
			require.NoError(rt, g.servers[i].Kill())
			require.NoError(rt, g.servers[i].Restart(ctx))
			waitAnswers(rt, g.direct[i])
		case faultCut:
			require.NoError(rt, g.proxies[i].Cut(true))
		case faultPause:
			require.NoError(rt, g.servers[i].Pause())
		case faultLost:
			g.proxies[i].DropReplies(true)
		}
	}
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		for i, f := range faults {
			switch f {
			case faultCut:
				require.NoError(rt, g.proxies[i].Cut(false))
			case faultPause:
				require.NoError(rt, g.servers[i].Resume())
			case faultLost:
				g.proxies[i].DropReplies(false)
			}
		}
	}
	defer heal()
	l, err := rls[k].Mutex("res").TryAcquire(ctx)
	if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
		// Masters cut off, stopped or restarting: no lease, an error.
		require.Nil(rt, l, what)
	}
	if l != nil {
		tok := l.Fence().Token
		if tok <= *maxTok {
			rt.Fatalf("%s: token %d after %d", what, tok, *maxTok)
		}
		*maxTok = tok
		at := 0
		for i, d := range g.direct {
			if faults[i] == faultPause {
				continue
			}
			if fenceCounter(rt, d, prefix) >= int64(tok) {
				at++
			}
		}
		if at < q {
			rt.Fatalf("%s: token %d, but only %d masters have their counter at it or above", what, tok, at)
		}
		other, err := rls[1-k].Mutex("res").TryAcquire(ctx)
		if other != nil {
			rt.Fatalf("%s: the other Redlock got the lock (token %d) while token %d is held", what, other.Fence().Token, tok)
		}
		_ = err
	}
	heal()
	for i, c := range append(clients[0], clients[1]...) {
		if faults[i%len(faults)] != faultNone {
			waitAnswers(rt, c)
		}
	}
	if l != nil {
		require.NoError(rt, l.Release(ctx), what)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i, d := range g.direct {
		for {
			n, err := d.Exists(ctx, redlockKeyOf(rt, d, prefix)).Result()
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				rt.Fatalf("%s: master %d still holds the lock after the release", what, i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitAnswers waits until c answers a PING (a master restarted or
// reconnected: go-redis drops its dead connections on first use).
func waitAnswers(rt *rapid.T, c *redis.Client) {
	deadline := time.Now().Add(20 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			rt.Fatalf("a master does not answer")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fenceCounter is the fence counter on a master under prefix (0 when it
// has none; a sequence uses one name, so there is at most one).
func fenceCounter(rt *rapid.T, d *redis.Client, prefix string) int64 {
	ks, err := d.Keys(context.Background(), prefix+":lock:v2:*:tokens").Result()
	require.NoError(rt, err)
	if len(ks) == 0 {
		return 0
	}
	n, err := d.Get(context.Background(), ks[0]).Int64()
	require.NoError(rt, err)
	return n
}

// redlockKeyOf is the key of the Redlock "res" under prefix on a master,
// or a key that does not exist when the master holds none.
func redlockKeyOf(rt *rapid.T, d *redis.Client, prefix string) string {
	ks, err := d.Keys(context.Background(), prefix+":*redlock:res").Result()
	if err != nil || len(ks) == 0 {
		return prefix + ":none"
	}
	return ks[0]
}
