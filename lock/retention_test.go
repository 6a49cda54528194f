package lock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// lossyClient is a client through px for redistest.LostReply: the command
// whose reply is lost runs, the client times out and sends it again
// (itself with go-redis's retries, or through the lock's own retry loop
// with MaxRetries -1), and the second send gets its reply.
func lossyClient(t *testing.T, px *redistest.Proxy, sendsOnce bool) *redis.Client {
	o := &redis.Options{Addr: px.Addr(), ReadTimeout: 300 * time.Millisecond}
	if sendsOnce {
		o.MaxRetries = -1
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestLease_Release_resentAfterLostReply: a release whose first send ran
// but whose reply was lost is sent again, and the second send finds the
// lock no longer this lease's. Nothing is written per release; the answer
// is still the truth in each case: released (the first send deleted it),
// expired with nobody after, and expired and taken by another owner (whose
// lock stays intact). With go-redis's own re-sends and with the lock's.
func TestLease_Release_resentAfterLostReply(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	direct := s.Client()
	px := redistest.NewProxy(t, s.Addr())
	for _, sendsOnce := range []bool{false, true} {
		rdb := lossyClient(t, px, sendsOnce)
		for _, tc := range []struct {
			name    string
			ttl     time.Duration
			taken   bool
			want    error
			expired bool
		}{
			{name: "released", ttl: time.Minute},
			{name: "expiredNobodyAfter", ttl: 50 * time.Millisecond, want: lock.ErrLeaseExpired, expired: true},
			{name: "expiredTakenByAnother", ttl: 50 * time.Millisecond, taken: true, want: lock.ErrLeaseTaken, expired: true},
		} {
			t.Run(fmt.Sprintf("%s/sendsOnce=%v", tc.name, sendsOnce), func(t *testing.T) {
				prefix := testPrefix(t)
				locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
				other := newLocks(t, direct, lock.WithKeyPrefix(prefix))
				warmUp(t, locks)
				m := locks.Mutex("resent", lock.WithTTL(tc.ttl), lock.WithWatchdog(false))
				l, err := m.TryAcquire(t.Context())
				require.NoError(t, err)
				var next *lock.Lease
				if tc.expired {
					eventually(t, keyGone(t, direct, m.LockKey()), "lock expired")
					<-l.Done()
				}
				if tc.taken {
					next, err = other.Mutex("resent", lock.WithTTL(time.Minute)).TryAcquire(t.Context())
					require.NoError(t, err)
				}
				err = redistest.LostReply(t, px, func() error { return l.Release(t.Context()) }, func() {
					if !tc.expired {
						require.True(t, keyGone(t, direct, m.LockKey())(), "the reply lost is the release's, which deleted the lock")
					}
				})
				if tc.want == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tc.want)
				}
				require.GreaterOrEqual(t, px.Dropped(), int64(1), "a reply was lost")
				if next != nil {
					v, err := direct.Get(t.Context(), m.LockKey()).Result()
					require.NoError(t, err)
					require.True(t, strings.HasPrefix(v, next.Owner()), "the new owner's lock is intact")
					require.NoError(t, next.Release(t.Context()))
				} else {
					require.True(t, keyGone(t, direct, m.LockKey())())
				}
				requireOnlyCounters(t, direct, prefix)
			})
		}
	}
}

// TestLease_Release_afterRedisLostIt: a lease still valid locally whose
// lock and counter Redis lost (a restart without persistence) is not
// reported released, even by a client that re-sends: the fence counter,
// below the lease's token, shows that no earlier send can have released it.
func TestLease_Release_afterRedisLostIt(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	locks := newLocks(t, s.Client())
	ctx := t.Context()
	m := locks.Mutex("forgotten", lock.WithTTL(10*time.Minute), lock.WithWatchdog(false))
	warmUp(t, locks)
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart(ctx))
	require.NoError(t, l.Err(), "still valid here")
	require.ErrorIs(t, l.Release(ctx), lock.ErrLeaseExpired)
}

// publishes returns how many PUBLISH commands the server ran since the
// last CONFIG RESETSTAT.
func publishes(t *testing.T, rdb *redis.Client) int64 {
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// TestMutex_Release_publishesOnlyWhenWaited: releases nobody waited for
// publish nothing (each kind); a release a waiter marked publishes and
// wakes it.
func TestMutex_Release_publishesOnlyWhenWaited(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m := locks.Mutex("quiet", lock.WithTTL(time.Minute))
	rw := locks.RWMutex("quiet-rw", lock.WithTTL(time.Minute))
	sem := locks.Semaphore("quiet-sem", 2, lock.WithTTL(time.Minute))
	fair := locks.Mutex("quiet-fair", lock.WithTTL(time.Minute), lock.WithFair(true))
	warmUp(t, locks)
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for range 5 {
		for _, acquire := range []func(context.Context) (*lock.Lease, error){
			m.TryAcquire, m.Acquire, rw.Acquire, rw.AcquireRead, sem.Acquire, fair.Acquire,
		} {
			l, err := acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
		}
	}
	require.Zero(t, publishes(t, rdb), "no waiter, no wake-up")

	held, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	got := waitFor(m)
	eventually(t, func() bool {
		v, err := rdb.Get(ctx, m.LockKey()).Result()
		require.NoError(t, err)
		return v[32] == '!' && numSubOn(t, rdb, m.Channel()) == 1
	}, "the waiter marked the lock and subscribed")
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-got, "woken by the release (the holder's TTL is a minute)")
	// The holder's release, and the former waiter's own: a lock taken
	// after waiting starts marked, since others may wait behind it.
	require.EqualValues(t, 2, publishes(t, rdb), "wake-ups")
}

func numSubOn(t *testing.T, rdb *redis.Client, channel string) int64 {
	n, err := rdb.PubSubNumSub(t.Context(), channel).Result()
	require.NoError(t, err)
	return n[channel]
}

// TestMutex_Acquire_waiterJoinsBeforeRelease: a second waiter is refused
// after the first one marked the lock (its refusal changes nothing) and
// before the release. Both get the lock in turn by notification, far
// before the holder's TTL would have let them in: from another Client (the
// release reaches both processes) and from the same one (the release wakes
// one waiter; the lock it takes starts marked, so its release wakes the
// next).
func TestMutex_Acquire_waiterJoinsBeforeRelease(t *testing.T) {
	for _, sameClient := range []bool{false, true} {
		t.Run(fmt.Sprintf("sameClient=%v", sameClient), func(t *testing.T) {
			clients := twoClients(t, testPrefix(t))
			if sameClient {
				clients[1] = clients[0]
			}
			ctx := t.Context()
			opts := []lock.Option{lock.WithTTL(10 * time.Minute)}
			m := clients[0].Mutex("joined", opts...)
			held, err := m.TryAcquire(ctx)
			require.NoError(t, err)
			first := waitFor(m)
			eventually(t, func() bool { return clients[0].Waiters(m) == 1 }, "first waiter")
			second := waitFor(clients[1].Mutex("joined", opts...))
			eventually(t, func() bool {
				return clients[0].Waiters(m)+clients[1].Waiters(m) == 2 || sameClient && clients[0].Waiters(m) == 2
			},
				"second waiter")
			require.NoError(t, held.Release(ctx))
			require.NoError(t, <-first)
			require.NoError(t, <-second)
		})
	}
}

// requireOnlyCounters fails unless every key under prefix is a fence
// counter: nothing else is left behind once no lease is held.
func requireOnlyCounters(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	ks, err := rdb.Keys(t.Context(), prefix+":*").Result()
	require.NoError(t, err)
	for _, k := range ks {
		require.True(t, strings.HasSuffix(k, ":tokens"), "left behind: %s", k)
	}
}

// noExpiry returns the keys under prefix that have no TTL.
func noExpiry(t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	ks, err := rdb.Keys(t.Context(), prefix+":*").Result()
	require.NoError(t, err)
	var out []string
	for _, k := range ks {
		if rdb.PTTL(t.Context(), k).Val() == -1 {
			out = append(out, k)
		}
	}
	return out
}

// retentionNames returns n lock names as a service that locks per order
// uses them: half in one slot group, half each its own group.
func retentionNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		if i%2 == 0 {
			names[i] = "batch-7/order-" + strconv.Itoa(i)
		} else {
			names[i] = "order-" + strconv.Itoa(i)
		}
	}
	return names
}

// distinctSlots is how many hash slots the names' keys occupy.
func distinctSlots(names []string) int {
	slots := map[int]bool{}
	for _, n := range names {
		slots[redistest.KeySlot("{"+redistest.Tag(n)+"}")] = true
	}
	return len(slots)
}

// TestMutex_namesUsedOnce_boundedKeys: 500 names, each locked and released
// once (Mutex, fair Mutex, RWMutex writer): what stays without an expiry is
// one fence counter per hash slot the names use, never one per name, and
// at most MaxFenceCounters.
func TestMutex_namesUsedOnce_boundedKeys(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	prefix := testPrefix(t)
	locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
	ctx := t.Context()
	names := retentionNames(500)
	for i, n := range names {
		acquire := locks.Mutex(n).TryAcquire
		switch i % 3 {
		case 1:
			acquire = locks.Mutex(n, lock.WithFair(true)).Acquire
		case 2:
			acquire = locks.RWMutex(n).Acquire
		}
		l, err := acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	permanent := noExpiry(t, rdb, prefix)
	require.LessOrEqual(t, len(permanent), distinctSlots(names), "one counter per slot: %d keys without expiry", len(permanent))
	require.LessOrEqual(t, len(permanent), lock.MaxFenceCounters)
	requireOnlyCounters(t, rdb, prefix)
}

// TestMutex_manyPairs_onlyCountersRemain: after many acquire+release pairs
// on distinct names, DBSIZE counts nothing but the fence counters (no
// tombstone, no mark, no lock).
func TestMutex_manyPairs_onlyCountersRemain(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	locks := newLocks(t, rdb)
	ctx := t.Context()
	names := retentionNames(4000)
	counters := map[string]bool{}
	for _, n := range names {
		counters[locks.Mutex(n).CounterKey()] = true
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(names); i += 8 {
				l, err := locks.Mutex(names[i], lock.WithWatchdog(false)).Acquire(ctx)
				if !assertNoError(t, err) {
					return
				}
				assertNoError(t, l.Release(ctx))
			}
		})
	}
	wg.Wait()
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, len(counters), n, "only the fence counters remain")
	require.LessOrEqual(t, len(counters), distinctSlots(names))
	ks, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range ks {
		require.True(t, counters[k], "left behind: %s", k)
	}
}

// runFairWaiters is the child process of TestMutex_Fair_killedWaiter: it
// waits in fair mode on every name in LOCK_TEST_NAMES, until it is killed.
func runFairWaiters(ctx context.Context, locks *lock.Client) int {
	var wg sync.WaitGroup
	for n := range strings.SplitSeq(os.Getenv("LOCK_TEST_NAMES"), ",") {
		wg.Go(func() {
			l, err := locks.Mutex(n, lock.WithFair(true)).Acquire(ctx)
			fmt.Println("acquired", n, err)
			_ = l.Release(ctx)
		})
	}
	wg.Wait()
	return 0
}

// TestMutex_Fair_killedWaiter: waiters queued in fair mode by a process
// that is then killed (SIGKILL) leave nothing behind once the holders
// release and nobody locks those names again: the queue and heartbeat sets
// expire by themselves one eviction timeout after the last heartbeat.
func TestMutex_Fair_killedWaiter(t *testing.T) {
	rdb := sharedClient(t)
	prefix := testPrefix(t)
	locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
	ctx := t.Context()
	names := []string{"fk-1", "fk-2", "shop-3/fk-3"}
	var held []*lock.Lease
	var ms []*lock.Mutex
	for _, n := range names {
		m := locks.Mutex(n, lock.WithFair(true), lock.WithTTL(time.Minute))
		l, err := m.TryAcquire(ctx)
		require.NoError(t, err)
		held, ms = append(held, l), append(ms, m)
	}
	child := startChild(t, "fairwaiters", prefix)
	child.Env = append(child.Env, "LOCK_TEST_NAMES="+strings.Join(names, ","))
	require.NoError(t, child.Start())
	eventually(t, func() bool {
		for _, m := range ms {
			if queueLen(t, m) != 1 {
				return false
			}
		}
		return true
	}, "the child queued on every name")
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
	for _, k := range noExpiry(t, rdb, prefix) {
		require.True(t, strings.HasSuffix(k, ":tokens"), "kept forever: %s", k)
	}
	eventually(t, func() bool {
		ks, err := rdb.Keys(ctx, prefix+":*").Result()
		require.NoError(t, err)
		for _, k := range ks {
			if !strings.HasSuffix(k, ":tokens") {
				return false
			}
		}
		return true
	}, "the dead waiters' queue entries are gone")
}
