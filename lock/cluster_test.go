package lock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// TestMutex_Cluster: on a Cluster, locks of different shards work side by
// side and waiters are woken by sharded pub/sub (the holders' TTLs are longer
// than the waiters' contexts); a shard failover keeps both the held lease
// and the waiter's subscription working.
func TestMutex_Cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	cc := c.Client()
	locks := mustNew(t, cc)
	defer locks.Close()
	ctx := t.Context()

	// Names chosen to land on different shards.
	var mutexes []*lock.Mutex
	shards := map[string]bool{}
	for i := 0; len(mutexes) < 3 && i < 100; i++ {
		m := locks.Mutex(fmt.Sprintf("shard-%d", i), lock.WithTTL(time.Minute))
		master, err := cc.MasterForKey(ctx, m.LockKey())
		require.NoError(t, err)
		if addr := master.Options().Addr; !shards[addr] {
			shards[addr] = true
			mutexes = append(mutexes, m)
		}
	}
	require.Len(t, mutexes, 3)

	var (
		held    []*lock.Lease
		waiters []<-chan error
	)
	for _, m := range mutexes {
		l, err := m.TryAcquire(ctx)
		require.NoError(t, err)
		held = append(held, l)
		waiters = append(waiters, waitFor(m))
	}
	for _, m := range mutexes {
		eventually(t, func() bool {
			n, err := cc.PubSubShardNumSub(ctx, m.Channel()).Result()
			require.NoError(t, err)
			return n[m.Channel()] == 1
		}, "waiter subscribed on its shard")
	}

	// Fail over the first name's shard while its waiter waits.
	require.NoError(t, c.FailoverShard(ctx, mutexes[0].LockKey()))
	eventually(t, func() bool {
		n, err := cc.PubSubShardNumSub(ctx, mutexes[0].Channel()).Result()
		return err == nil && n[mutexes[0].Channel()] == 1
	}, "waiter subscribed on the new primary")
	require.NoError(t, held[0].Extend(ctx), "the lease survived a coordinated failover")

	var wg sync.WaitGroup
	for i := range mutexes {
		wg.Go(func() {
			assertNoError(t, held[i].Release(ctx))
			assertNoError(t, <-waiters[i])
		})
	}
	wg.Wait()
}

// TestHashSlot: the slot of a hash tag is Redis Cluster's (CRC16/XMODEM mod
// 16384), checked against CLUSTER KEYSLOT of a real cluster node.
func TestHashSlot(t *testing.T) {
	require.Equal(t, 0x31C3, lock.HashSlot("123456789"), "the CRC16/XMODEM check value")
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 1})
	rdb := c.Client()
	for _, tag := range []string{"foo", "bar", "shop-7", "nightly", "a", "order-12345", "0", "17"} {
		want, err := rdb.ClusterKeySlot(t.Context(), tag).Result()
		require.NoError(t, err)
		require.EqualValues(t, want, lock.HashSlot(tag), tag)
	}
}

// TestMutex_Cluster_notifyAfterFaults: on an ordinary ClusterClient that
// nothing refreshes, waiters on two names in different slots of one primary
// keep their release notifications after each fault: the subscriber
// connections dropped by the server (CLIENT KILL TYPE pubsub), one name's
// slot migrated to another primary (the server drops its channel), and a
// CLUSTER FAILOVER of the other name's shard. After each, PUBSUB
// SHARDNUMSUB on the owning primary counts one subscriber per channel, and
// a release hands the lock over through its notification: the waiter's
// context is far shorter than the holder's TTL, so a waiter that is not
// notified fails.
func TestMutex_Cluster_notifyAfterFaults(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	holders, waiters := mustNew(t, rdb), mustNew(t, rdb)
	defer holders.Close()
	defer waiters.Close()

	// Two names of one primary, in different slots.
	const ttl = time.Minute
	var names []*lock.Mutex
	var primary string
	for i := 0; len(names) < 2 && i < 1000; i++ {
		m := holders.Mutex(fmt.Sprintf("n-%d", i), lock.WithTTL(ttl))
		master, err := rdb.MasterForKey(ctx, m.LockKey())
		require.NoError(t, err)
		addr := master.Options().Addr
		if primary == "" {
			primary = addr
		}
		if addr == primary && (len(names) == 0 || redistest.KeySlot(names[0].LockKey()) != redistest.KeySlot(m.LockKey())) {
			names = append(names, m)
		}
	}
	require.Len(t, names, 2)
	server := func(addr string) *redistest.Server {
		for _, n := range c.Nodes() {
			if n.Addr() == addr {
				return n
			}
		}
		t.Fatalf("no node %s", addr)
		return nil
	}
	// subscribers counts the channel's subscribers on the primary that
	// serves it now, asked directly (not through rdb's map).
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer probe.Close()
	subscribers := func(channel string) int64 {
		probe.ReloadState(ctx)
		n, err := probe.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			return -1
		}
		return n[channel]
	}

	var handoffs []time.Duration
	round := func(fault string, do func()) {
		t.Helper()
		held := make([]*lock.Lease, len(names))
		got := make([]chan time.Time, len(names))
		for i, m := range names {
			l, err := m.TryAcquire(ctx)
			require.NoError(t, err, fault)
			held[i] = l
			got[i] = make(chan time.Time, 1)
			w := waiters.Mutex(m.Name(), lock.WithTTL(ttl))
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := w.Acquire(wctx)
				at := time.Now()
				if !assertNoError(t, err) {
					close(got[i])
					return
				}
				assertNoError(t, l.Release(ctx))
				got[i] <- at
			}()
			eventually(t, func() bool { return subscribers(m.Channel()) == 1 }, "waiter subscribed before "+fault)
		}
		do()
		for _, m := range names {
			eventually(t, func() bool { return subscribers(m.Channel()) == 1 }, "one subscriber after "+fault+" on "+m.Channel())
		}
		for i := range names {
			released := time.Now()
			require.NoError(t, held[i].Release(ctx), fault)
			at, ok := <-got[i]
			require.True(t, ok, "the waiter on %s was not handed the lock after %s", names[i].Name(), fault)
			handoffs = append(handoffs, at.Sub(released))
		}
	}
	round("CLIENT KILL TYPE pubsub", func() {
		require.NoError(t, server(primary).KillPubSubClients(ctx))
	})
	round("slot migrated", func() {
		_, err := c.MoveSlot(ctx, names[0].LockKey())
		require.NoError(t, err)
	})
	round("CLUSTER FAILOVER", func() {
		require.NoError(t, c.Failover(ctx, names[1].LockKey(), redistest.FailoverPlain))
	})
	round("CLIENT KILL TYPE pubsub after the failover", func() {
		m, err := probe.MasterForKey(ctx, names[1].LockKey())
		require.NoError(t, err)
		require.NoError(t, server(m.Options().Addr).KillPubSubClients(ctx))
	})
	slices.Sort(handoffs)
	t.Logf("hand-off after release (%d): median %v, max %v", len(handoffs), handoffs[len(handoffs)/2], handoffs[len(handoffs)-1])
}

// reshardingLocks starts a three-master Cluster for a resharding test and
// returns it with a Client on an ordinary ClusterClient that nothing
// refreshes. It writes fill other keys in each tag's slot (an
// application's, say) so that each move of the slot lasts: one key per
// MIGRATE, a pause apart, the lock's keys split for a while.
func reshardingLocks(t *testing.T, tags []string, fill int) (*redistest.Cluster, *lock.Client) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	locks := mustNew(t, rdb)
	t.Cleanup(func() { _ = locks.Close() })
	c.Fill(t, t.Context(), tags, fill)
	return c, locks
}

// TestMutex_Cluster_underResharding: acquire and release with their fence
// on an ordinary ClusterClient while the names' slots are moved again and
// again (key by key with a pause: a split slot answers TRYAGAIN, a stale
// map meets MOVED and ASK). No error reaches the caller, at most one
// holder per name at a time, and each name's fence tokens strictly increase.
func TestMutex_Cluster_underResharding(t *testing.T) {
	c, locks := reshardingLocks(t, []string{"{ls1}", "{ls2}"}, 20)
	ctx := t.Context()
	names := []string{"ls1/a", "ls2/b"}
	var (
		mu      sync.Mutex
		holding = map[string]int{}
		last    = map[string]uint64{}
	)
	c.WhileResharding(t, ctx, []string{"{ls1}", "{ls2}"}, redistest.MoveOptions{Batch: 1, Pause: 20 * time.Millisecond}, 4,
		func(w int, fail func(string, ...any)) {
			for i := range 12 {
				name := names[(w+i)%len(names)]
				m := locks.Mutex(name, lock.WithTTL(10*time.Second))
				l, err := m.Acquire(ctx)
				if err != nil {
					fail("acquire %s: %w", name, err)
					continue
				}
				mu.Lock()
				holding[name]++
				if holding[name] > 1 {
					fail("%s held twice", name)
				}
				if tok := l.Fence().Token; tok <= last[name] {
					fail("%s: token %d after %d", name, tok, last[name])
				} else {
					last[name] = tok
				}
				holding[name]--
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					fail("release %s: %w", name, err)
				}
			}
		})
}

// TestKinds_Cluster_underResharding: the lock kinds beside the plain
// Mutex (TestMutex_Cluster_underResharding) on an ordinary ClusterClient
// while their slots are moved again and again, key by key with a pause:
// an RWMutex's writers (with Extend) and readers, a Semaphore of 2
// permits, and a fair Mutex whose waiters queue. No error reaches the
// caller; no reader holds beside a writer, no two writers, never more
// than 2 permits, at most one fair holder; and the fence tokens of each
// name strictly increase. The TTL is short: under this load on a Cluster a
// waiter now and then sleeps until its TTL cap instead of being woken (a
// notification not delivered), which costs time, never safety.
func TestKinds_Cluster_underResharding(t *testing.T) {
	tags := []string{"{kr1}", "{kr2}", "{kr3}"}
	c, locks := reshardingLocks(t, tags, 10)
	ctx := t.Context()
	rw := locks.RWMutex("kr1/doc", lock.WithTTL(2*time.Second))
	sem := locks.Semaphore("kr2/pool", 2, lock.WithTTL(2*time.Second))
	fair := locks.Mutex("kr3/queue", lock.WithTTL(2*time.Second), lock.WithFair(true))
	var (
		mu                     sync.Mutex
		writers, readers, sems int
		fairs                  int
		last                   = map[string]uint64{}
	)
	// hold runs acquire, checks and counts the holder with enter, waits a
	// little, and releases.
	hold := func(fail func(string, ...any), what string, acquire func(context.Context) (*lock.Lease, error), enter func(int) string, extend bool) {
		l, err := acquire(ctx)
		if err != nil {
			fail("acquire %s: %w", what, err)
			return
		}
		mu.Lock()
		if bad := enter(1); bad != "" {
			fail("%s: %s", what, bad)
		}
		if f := l.Fence(); f.Token != 0 {
			if f.Token <= last[what] {
				fail("%s: token %d after %d", what, f.Token, last[what])
			}
			last[what] = f.Token
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		if extend {
			if err := l.Extend(ctx); err != nil {
				fail("extend %s: %w", what, err)
			}
		}
		mu.Lock()
		enter(-1)
		mu.Unlock()
		if err := l.Release(ctx); err != nil {
			fail("release %s: %w", what, err)
		}
	}
	c.WhileResharding(t, ctx, tags, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond}, 4,
		func(w int, fail func(string, ...any)) {
			for i := range 8 {
				switch (w + i) % 4 {
				case 0:
					hold(fail, "writer", rw.Acquire, func(d int) string {
						writers += d
						if d > 0 && (writers > 1 || readers > 0) {
							return fmt.Sprintf("%d writers, %d readers", writers, readers)
						}
						return ""
					}, true)
				case 1:
					hold(fail, "reader", rw.AcquireRead, func(d int) string {
						readers += d
						if d > 0 && writers > 0 {
							return "a reader beside a writer"
						}
						return ""
					}, false)
				case 2:
					hold(fail, "semaphore", sem.Acquire, func(d int) string {
						sems += d
						if sems > 2 {
							return fmt.Sprintf("%d permits held", sems)
						}
						return ""
					}, false)
				case 3:
					hold(fail, "fair", fair.Acquire, func(d int) string {
						fairs += d
						if fairs > 1 {
							return "two fair holders"
						}
						return ""
					}, false)
				}
			}
		})
}

// TestChaos_Cluster_failover: Acquire, Extend and Release with
// WithRequiredReplicaAck on an ordinary ClusterClient while the names'
// shards are failed over again and again (CLUSTER FAILOVER plain, FORCE
// and TAKEOVER, a master killed with SIGKILL and its replica promoted, the
// slot migrated). A caller that gets an error calls again (a new Acquire;
// a failed one withdrew what it announced): every round ends with a lease.
// No two holders of a name at once and each name's fence tokens strictly
// increase: an acknowledged acquire survives the failover, so the package
// documentation's guarantee with required acknowledgement holds.
func TestChaos_Cluster_failover(t *testing.T) {
	scale := redistest.Chaos(t)
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	locks := mustNew(t, rdb, lock.WithRequiredReplicaAck(1, time.Second), lock.WithTTL(3*time.Second))
	defer locks.Close()
	names := []string{"fl1/a", "fl2/b"}
	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": lock.ErrUnknownOutcome, "replica ack not reached": lock.ErrReplicaAck}}
	var (
		mu       sync.Mutex
		overlaps int
		holding  = map[string]int{}
		last     = map[string]uint64{}
	)
	faults := c.WhileFailingOver(t, ctx, scale, 300*time.Millisecond, []string{"{fl1}", "{fl2}"}, 4, func(w, i int) bool {
		name := names[(w+i)%len(names)]
		m := locks.Mutex(name)
		var l *lock.Lease
		if ok, err := answers.Call(ctx, func(ctx context.Context) (err error) {
			l, err = m.Acquire(ctx)
			return err
		}); !ok {
			t.Errorf("%s never acquired: %v", name, err)
			return false
		}
		mu.Lock()
		holding[name]++
		if holding[name] > 1 {
			overlaps++
		}
		if tok := l.Fence().Token; tok <= last[name] {
			overlaps++
		} else {
			last[name] = tok
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		_ = l.Extend(ctx) // may fail while the shard fails over: the lease stays ours until its TTL
		mu.Lock()
		holding[name]--
		mu.Unlock()
		_ = l.Release(ctx) // a lost release leaves the lock to its TTL
		return true
	})
	t.Logf("%d faults: %d leases, %d acquires failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | lock Acquire/Extend/Release | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), overlaps)
	require.Zero(t, overlaps, "two holders at once or a token not above the last")
}
