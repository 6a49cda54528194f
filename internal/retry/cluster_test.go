package retry_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/redistest"
)

// A script whose two keys are split by a slot migration in progress gets
// TRYAGAIN on every send until the last key has moved: key by key with a
// pause, that outlasts go-redis's own retries and Attempts, and Do goes on
// within ClusterBudget. The script runs once: both counters are 1.
func TestDo_cluster_absorbsSplitSlot(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	const a, b = "{mig}a", "{mig}b"
	require.NoError(t, rdb.Set(ctx, a, 0, 0).Err())
	require.NoError(t, rdb.Set(ctx, b, 0, 0).Err())
	src, err := rdb.MasterForKey(ctx, a)
	require.NoError(t, err)

	moved := make(chan error, 1)
	go func() {
		_, _, err := c.MoveSlotWith(context.WithoutCancel(ctx), a, redistest.MoveOptions{Batch: 1, Pause: 2 * time.Second})
		moved <- err
	}()
	slot := int(redistest.KeySlot(a))
	require.Eventually(t, func() bool {
		return src.ClusterCountKeysInSlot(ctx, slot).Val() == 1
	}, 10*time.Second, 5*time.Millisecond, "one of the two keys migrated")

	p := retry.DefaultPolicy().For(rdb)
	tries := 0
	err = retry.Do(ctx, p, func(ctx context.Context, _ int) error {
		tries++
		return rdb.Eval(ctx, "redis.call('INCR', KEYS[1]) return redis.call('INCR', KEYS[2])", []string{a, b}).Err()
	})
	require.NoError(t, err, "after %d calls", tries)
	require.Greater(t, tries, p.Attempts, "the split outlasted Attempts")
	require.NoError(t, <-moved)
	require.Equal(t, "1", rdb.Get(ctx, a).Val())
	require.Equal(t, "1", rdb.Get(ctx, b).Val())

}

// clientShapes are the two ways an application makes its ClusterClient:
// go-redis's defaults (it re-sends and follows redirections itself), and
// send-once, which leaves every retry to redkit.
var clientShapes = []struct {
	name string
	opt  func(*redis.ClusterOptions)
}{
	{"defaults", func(*redis.ClusterOptions) {}},
	{"send-once", func(o *redis.ClusterOptions) { o.MaxRetries, o.MaxRedirects = -1, -1 }},
}

// A master killed for good (SIGKILL, left down, its replica promoted)
// stays in an ordinary ClusterClient's slot map: go-redis reloads it on
// MOVED and ASK, and otherwise once a minute, and the dead address only
// refuses connections. The first Do after every live node agreed on the
// new master succeeds: the refused dial makes the next attempt run on a
// reloaded map. Before, every call failed with "connection refused" until
// go-redis's periodic reload.
func TestDo_cluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	const key = "{dead}:n"
	for _, shape := range clientShapes {
		t.Run(shape.name, func(t *testing.T) {
			rdb := c.Client(shape.opt)
			p := retry.DefaultPolicy().For(rdb)
			incr := func(ctx context.Context, _ int) error { return rdb.Incr(ctx, key).Err() }
			require.NoError(t, retry.Do(ctx, p, incr), "before the kill")
			killed, err := c.KillMaster(ctx, key)
			require.NoError(t, err)
			agreed := time.Now()
			tries := 0
			err = retry.Do(ctx, p, func(ctx context.Context, attempt int) error {
				tries = attempt
				return incr(ctx, attempt)
			})
			took := time.Since(agreed)
			require.NoError(t, err, "the first call after the cluster agreed on the new master")
			t.Logf("first call succeeded %v after the cluster agreed, attempt %d", took, tries)
			_, err = c.Replace(ctx, killed)
			require.NoError(t, err)
		})
	}
}

// Callers with short deadlines (300 ms per call) on an application's own
// ClusterClient after a master was killed for good: go-redis dials the dead
// address 5 times 100 ms apart before it reports the refused dial, so each
// call's deadline passes before any error says the node is gone. A call
// that ends that way on a Cluster client marks the map stale, and the next
// call reloads it before its first attempt: at most a few calls fail after
// every live node agreed on the new master. Before, every call failed until
// go-redis stopped dialling (after a pool's worth of failed dials: 11 calls
// here), or until its periodic reload.
func TestDo_cluster_masterKilledForGood_shortDeadlines(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range clientShapes {
		t.Run(shape.name, func(t *testing.T) {
			key := []string{"{k0}:n", "{k1}:n"}[i] // shards of their own
			rdb := c.AppClient(shape.opt)
			p := retry.DefaultPolicy().For(rdb)
			incr := func(ctx context.Context, _ int) error { return rdb.Incr(ctx, key).Err() }
			require.NoError(t, retry.Do(ctx, p, incr), "before the kill")
			_, err := c.KillMaster(ctx, key)
			require.NoError(t, err)
			agreed := time.Now()
			const deadline, most = 300 * time.Millisecond, 5
			for failed := 0; ; failed++ {
				cctx, cancel := context.WithTimeout(ctx, deadline)
				err := retry.Do(cctx, p, incr)
				cancel()
				if err == nil {
					t.Logf("%d calls of %v failed; the next succeeded %v after the cluster agreed", failed, deadline, time.Since(agreed))
					break
				}
				if failed == most {
					t.Fatalf("%d calls of %v in a row failed after the cluster agreed on the new master: %v", most+1, deadline, err)
				}
			}
		})
	}
}

// Reload returns with the map loaded: right after it, MasterForKey names
// the master promoted in place of a dead one. ReloadState alone only
// schedules a reload in the background.
func TestReload_freshMapAtOnce(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := c.Client()
	const key = "{fresh}:n"
	before, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	killed, err := c.KillMaster(ctx, key)
	require.NoError(t, err)
	require.Equal(t, killed.Addr(), before.Options().Addr)
	retry.Reload(ctx, rdb)
	after, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	require.NotEqual(t, killed.Addr(), after.Options().Addr, "the map names the promoted master")
	require.NoError(t, after.Incr(ctx, key).Err())
	// Node finds a node's client by address from the reload, and no dead
	// or unknown one.
	n := retry.Node(ctx, rdb, after.Options().Addr)
	require.NotNil(t, n)
	require.Equal(t, after.Options().Addr, n.Options().Addr)
	require.Nil(t, retry.Node(ctx, rdb, killed.Addr()), "the dead master is not in the map")
	require.Nil(t, retry.Node(ctx, rdb, "127.0.0.1:1"))
}

// Reload asks the cluster for its slot map at most once per
// ReloadInterval per client, however many callers ask (every caller of a
// dead master's slots at once): counted by the CLUSTER SLOTS calls the
// nodes served.
func TestReload_oncePerInterval(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	rdb := c.Client()
	require.NoError(t, rdb.Ping(ctx).Err()) // the first map
	slotsCalls := func() int {
		n := 0
		for _, s := range c.Nodes() {
			info, err := s.Client().Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			for line := range strings.Lines(info) {
				if v, ok := strings.CutPrefix(line, "cmdstat_cluster|slots:calls="); ok {
					calls, _ := strconv.Atoi(v[:strings.IndexByte(v, ',')])
					n += calls
				}
			}
		}
		return n
	}
	before := slotsCalls()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				retry.Reload(ctx, rdb)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	reloads := slotsCalls() - before
	require.Positive(t, reloads, "Reload asked the cluster")
	require.LessOrEqual(t, reloads, int(elapsed/retry.ReloadInterval)+1,
		"200 Reloads within %v: at most one per %v", elapsed, retry.ReloadInterval)
	t.Logf("200 Reloads in %v: %d CLUSTER SLOTS", elapsed, reloads)
}
