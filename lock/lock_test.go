package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

// newLocks returns a Client on the shared server with a key prefix of its
// own, closed at the end of the test.
func newLocks(t testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	opts = append([]lock.Option{lock.WithKeyPrefix(testPrefix(t))}, opts...)
	c := mustNew(t, rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls cond until it holds or 20s pass.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, "timed out waiting: %s", msg)
}

// mustTake returns the lease take (a TryAcquire) gets; an error fails the
// test.
func mustTake(t testing.TB, take func(context.Context) (*lock.Lease, error)) *lock.Lease {
	t.Helper()
	l, err := take(t.Context())
	require.NoError(t, err)
	return l
}

// tryMutex returns the Mutex name of locks and a lease on it taken with
// TryAcquire.
func tryMutex(t testing.TB, locks *lock.Client, name string, opts ...lock.Option) (*lock.Mutex, *lock.Lease) {
	t.Helper()
	m := locks.Mutex(name, opts...)
	return m, mustTake(t, m.TryAcquire)
}

// expiredMutex is tryMutex with the TTL ttl and no watchdog, returned once
// the lock key has expired in Redis.
func expiredMutex(t testing.TB, rdb redis.UniversalClient, locks *lock.Client, name string, ttl time.Duration) (*lock.Mutex, *lock.Lease) {
	t.Helper()
	m, l := tryMutex(t, locks, name, lock.WithTTL(ttl), lock.WithWatchdog(false))
	eventually(t, keyGone(t, rdb, m.LockKey()), "lock expired")
	return m, l
}

// requireGiveUp requires that an Acquire of m whose context ends after
// 100ms gives up with ErrNotAcquired.
func requireGiveUp(t testing.TB, m acquirer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := m.Acquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
}

// free reports whether m can be taken now; a lease it takes is released at
// once.
func free(t testing.TB, m acquirer) func() bool {
	return func() bool {
		l, err := m.TryAcquire(t.Context())
		if err != nil {
			return false
		}
		require.NoError(t, l.Release(t.Context()))
		return true
	}
}

func keyGone(t testing.TB, rdb redis.UniversalClient, key string) func() bool {
	return func() bool {
		n, err := rdb.Exists(context.Background(), key).Result()
		require.NoError(t, err)
		return n == 0
	}
}

func TestMutex_TryAcquire_heldByOther(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m := locks.Mutex("orders/nightly")

	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Err())
	require.Equal(t, "orders/nightly", l.Fence().Name)
	require.NotZero(t, l.Fence().Token)

	l2, err := m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.Nil(t, l2)

	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, l.Err(), lock.ErrReleased)
	require.ErrorIs(t, context.Cause(l.Context()), lock.ErrReleased)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	require.True(t, keyGone(t, rdb, m.LockKey())())

	l3, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, l3.Fence().Token, l.Fence().Token)
	require.NoError(t, l3.Release(ctx))
}

func TestMutex_keySchema(t *testing.T) {
	locks := mustNew(t, sharedClient(t), lock.WithKeyPrefix("app"))
	defer locks.Close()
	m := locks.Mutex("shop-7/payout")
	require.Equal(t, "app:lock:v2:{shop-7}:mutex:shop-7/payout", m.LockKey())
	// The fence counter is the one of the name's hash slot.
	tag, ok := strings.CutPrefix(m.CounterKey(), "app:lock:v2:{")
	require.True(t, ok, m.CounterKey())
	tag, ok = strings.CutSuffix(tag, "}:tokens")
	require.True(t, ok, m.CounterKey())
	require.Equal(t, lock.HashSlot("shop-7"), lock.HashSlot(tag), "the counter shares the lock's slot")
	require.Equal(t, "app:lock:v2:{shop-7}:wake:mutex:shop-7/payout", m.Channel())
	require.Equal(t, "redkit:lock:v2:{nightly}:mutex:nightly", mustNew(t, sharedClient(t)).Mutex("nightly").LockKey())
}

func TestMutex_Acquire_ctxEnds(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	m, l := tryMutex(t, locks, "busy", lock.WithTTL(time.Minute))
	defer l.Release(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	l2, err := m.Acquire(ctx)
	require.Nil(t, l2)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	_, err = m.Acquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled)
}

// TestMutex_Acquire_wokenByRelease: the holder's TTL is longer than the
// waiter's context, so the waiter can only get the lock through the release
// notification.
func TestMutex_Acquire_wokenByRelease(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	m, held := tryMutex(t, locks, "handoff", lock.WithTTL(time.Minute))

	got := waitFor(m)
	eventually(t, func() bool { return subscribers(t, locks, m) == 1 }, "waiter subscribed")
	require.NoError(t, held.Release(t.Context()))
	require.NoError(t, <-got)
}

func subscribers(t testing.TB, _ *lock.Client, m *lock.Mutex) int64 {
	return numSub(t, m.Channel())
}

func numSub(t testing.TB, channel string) int64 {
	n, err := sharedClient(t).PubSubNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return n[channel]
}

// TestMutex_Acquire_releaseBeforeSubscribe: the release is published after
// the waiter's first attempt failed but before it subscribed; the attempt it
// makes right after subscribing takes the lock (the TTL is far longer than
// the waiter's context).
func TestMutex_Acquire_releaseBeforeSubscribe(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	m, held := tryMutex(t, locks, "early-release", lock.WithTTL(time.Minute))
	released := false
	locks.SetBeforeSubscribe(func() {
		if !released {
			released = true
			require.NoError(t, held.Release(context.Background()))
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, released)
	require.Greater(t, l.Fence().Token, held.Fence().Token)
	require.NoError(t, l.Release(ctx))
}

// TestMutex_Acquire_lostNotification: the holder dies without releasing (no
// message at all) and the subscriber connection is killed meanwhile; the
// waiter still gets the lock when the holder's TTL runs out.
func TestMutex_Acquire_lostNotification(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m, held := tryMutex(t, locks, "crashed-holder", lock.WithTTL(time.Second), lock.WithWatchdog(false))
	got := waitFor(m)
	eventually(t, func() bool { return subscribers(t, locks, m) == 1 }, "waiter subscribed")
	require.NoError(t, shared.KillPubSubClients(t.Context()))
	require.NoError(t, <-got)
	require.ErrorIs(t, held.Release(t.Context()), lock.ErrLeaseExpired)
}

// TestMutex_Acquire_afterSubscriberKilled: the pub/sub connection is killed
// while a waiter waits; the subscriber reconnects and the release still
// wakes the waiter (the holder's TTL is longer than the waiter's context).
func TestMutex_Acquire_afterSubscriberKilled(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m, held := tryMutex(t, locks, "killed-sub", lock.WithTTL(time.Minute))
	got := waitFor(m)
	eventually(t, func() bool { return subscribers(t, locks, m) == 1 }, "waiter subscribed")
	require.NoError(t, shared.KillPubSubClients(t.Context()))
	eventually(t, func() bool { return subscribers(t, locks, m) == 1 }, "subscriber back")
	require.NoError(t, held.Release(t.Context()))
	require.NoError(t, <-got)
}

func TestMutex_Acquire_polling(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb, lock.WithPolling(time.Millisecond, 20*time.Millisecond))
	m, held := tryMutex(t, locks, "polled", lock.WithTTL(time.Minute))
	got := waitFor(m)
	time.Sleep(50 * time.Millisecond)
	require.Zero(t, subscribers(t, locks, m), "polling mode does not subscribe")
	require.NoError(t, held.Release(t.Context()))
	require.NoError(t, <-got)
}

func TestMutex_Release_byNonOwner(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m, l := tryMutex(t, locks, "guarded", lock.WithTTL(time.Minute))

	status, err := m.ReleaseAs(ctx, lock.NewOwner())
	require.NoError(t, err)
	require.EqualValues(t, 2, status, "held by another")
	status, err = m.ExtendAs(ctx, lock.NewOwner(), time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 2, status, "held by another")
	v, err := rdb.Get(ctx, m.LockKey()).Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, l.Owner()+":"), "the lock still belongs to its owner")
	pttl, err := rdb.PTTL(ctx, m.LockKey()).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, pttl, time.Minute, "a foreign extend changed nothing")
	require.NoError(t, l.Release(ctx))
}

// TestMutex_Release_afterTakeover: a lease that expired while another owner
// took the lock cannot release the new owner's lock.
func TestMutex_Release_afterTakeover(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m, old := expiredMutex(t, rdb, locks, "takeover", 50*time.Millisecond)
	cur, err := m.Acquire(ctx)
	require.NoError(t, err)
	<-old.Done()
	require.ErrorIs(t, old.Err(), lock.ErrLeaseExpired, "the local deadline ended the old lease")
	require.ErrorIs(t, old.Release(ctx), lock.ErrLeaseTaken)
	require.ErrorIs(t, old.Release(ctx), lock.ErrLeaseTaken, "same result again")
	v, err := rdb.Get(ctx, m.LockKey()).Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, cur.Owner()+":"))
	require.NoError(t, cur.Extend(ctx), "the new lease is intact")
	require.NoError(t, cur.Release(ctx))
}

func TestMutex_Release_afterExpiry(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	_, l := expiredMutex(t, rdb, locks, "expiring", 30*time.Millisecond)
	require.ErrorIs(t, l.Release(t.Context()), lock.ErrLeaseExpired)
	require.ErrorIs(t, l.Err(), lock.ErrLeaseExpired)
}

func TestLease_Extend_neverRecreates(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m, l := expiredMutex(t, rdb, locks, "lapsed", 30*time.Millisecond)

	status, err := m.ExtendAs(ctx, l.Owner(), time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 0, status, "expired")
	require.True(t, keyGone(t, rdb, m.LockKey())(), "extend did not re-create the key")
	<-l.Done()
	require.ErrorIs(t, l.Extend(ctx), lock.ErrLeaseExpired)
	require.True(t, keyGone(t, rdb, m.LockKey())(), "extend did not re-create the key")
}

func TestLease_Extend(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	_, l := tryMutex(t, locks, "manual", lock.WithTTL(2*time.Second), lock.WithWatchdog(false))
	before := l.Until()
	require.True(t, before.Before(time.Now().Add(2*time.Second)))
	require.NoError(t, l.Extend(ctx))
	require.True(t, l.Until().After(before), "Until moves forward")
	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, l.Extend(ctx), lock.ErrReleased)
}

// TestMutex_Acquire_resent: an acquire re-sent with the same owner ID (its
// first reply lost) succeeds with the same token instead of waiting for
// itself.
func TestMutex_Acquire_resent(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m := locks.Mutex("resent", lock.WithWatchdog(false))
	owner := lock.NewOwner()
	first, _, err := m.AttemptAs(ctx, owner)
	require.NoError(t, err)
	require.NotNil(t, first)
	again, _, err := m.AttemptAs(ctx, owner)
	require.NoError(t, err)
	require.NotNil(t, again, "the re-sent acquire recognises its owner ID")
	require.Equal(t, first.Fence(), again.Fence())
	other, pttl, err := m.AttemptAs(ctx, lock.NewOwner())
	require.NoError(t, err)
	require.Nil(t, other)
	require.Greater(t, pttl, time.Duration(0))
	require.NoError(t, again.Release(ctx))
}

// TestLease_Release_resent: a release re-sent after it took effect reports
// "released", not "expired".
func TestLease_Release_resent(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	m, l := tryMutex(t, locks, "rel-resent")
	require.NoError(t, l.Release(ctx))
	status, err := m.ResendRelease(ctx, l)
	require.NoError(t, err)
	require.EqualValues(t, 1, status, "released")
	status, err = m.ReleaseAs(ctx, lock.NewOwner())
	require.NoError(t, err)
	require.EqualValues(t, 0, status, "another owner's release finds nothing")
}

func TestLease_Release_cancelledContext(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m, l := tryMutex(t, locks, "deferred")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, l.Release(ctx))
	require.True(t, keyGone(t, rdb, m.LockKey())())
}

func TestFence_tokensStrictlyIncrease_ConcurrentSafe(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m := locks.Mutex("tokens")
	var (
		mu     sync.Mutex
		tokens []uint64
	)
	contend(t, 4, 25, func(int) func(context.Context) (*lock.Lease, error) { return m.Acquire }, func(_ int, l *lock.Lease) {
		mu.Lock()
		tokens = append(tokens, l.Fence().Token)
		mu.Unlock()
	})
	require.Len(t, tokens, 100)
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "tokens in acquisition order strictly increase")
	}
	// The counter outlives the lock key.
	require.True(t, keyGone(t, rdb, m.LockKey())())
	n, err := rdb.Get(t.Context(), m.CounterKey()).Uint64()
	require.NoError(t, err)
	require.Equal(t, tokens[len(tokens)-1], n)
}

// contend runs workers goroutines that each, rounds times, take a lease
// with the acquire function acquire(w) returns for worker w, run hold on
// it and release it; an error is reported and ends the worker.
func contend(t testing.TB, workers, rounds int, acquire func(w int) func(context.Context) (*lock.Lease, error), hold func(w int, l *lock.Lease)) {
	var wg sync.WaitGroup
	for w := range workers {
		acq := acquire(w)
		wg.Go(func() {
			for range rounds {
				l, err := acq(t.Context())
				if !assertNoError(t, err) {
					return
				}
				hold(w, l)
				assertNoError(t, l.Release(t.Context()))
			}
		})
	}
	wg.Wait()
}

func assertNoError(t testing.TB, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// TestMutex_MutualExclusion_ConcurrentSafe: goroutines on two Clients (as
// two processes would) increment a counter with GET then SET under the lock;
// no update is lost.
func TestMutex_MutualExclusion_ConcurrentSafe(t *testing.T) {
	rdb := sharedClient(t)
	prefix := testPrefix(t)
	clients := twoClients(t, prefix)
	counter := prefix + ":counter"
	const workers, rounds = 8, 40
	contend(t, workers, rounds, func(w int) func(context.Context) (*lock.Lease, error) {
		return clients[w%2].Mutex("counter").Acquire
	}, func(w int, _ *lock.Lease) {
		n, err := rdb.Get(t.Context(), counter).Int()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		assertNoError(t, err)
		time.Sleep(time.Duration(w%3) * 100 * time.Microsecond)
		assertNoError(t, rdb.Set(t.Context(), counter, n+1, 0).Err())
	})
	n, err := rdb.Get(t.Context(), counter).Int()
	require.NoError(t, err)
	require.Equal(t, workers*rounds, n, "no lost updates")
}

func TestLease_watchdogKeepsLease(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m, l := tryMutex(t, locks, "renewed", lock.WithTTL(time.Second))
	first := l.Until()
	time.Sleep(2500 * time.Millisecond)
	require.NoError(t, l.Err())
	require.True(t, l.Until().After(first.Add(time.Second)), "renewed")
	v, err := rdb.Get(t.Context(), m.LockKey()).Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, l.Owner()+":"))
	require.NoError(t, l.Release(t.Context()))
}

func TestLease_maxHold(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	m, l := tryMutex(t, locks, "bounded", lock.WithTTL(200*time.Millisecond), lock.WithMaxHold(time.Second))
	first := l.Until()
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease outlived its max hold")
	}
	require.ErrorIs(t, l.Err(), lock.ErrLeaseExpired)
	require.True(t, l.Until().After(first), "it was renewed before the bound")
	eventually(t, keyGone(t, rdb, m.LockKey()), "the lock expires in Redis too")
	require.ErrorIs(t, l.Release(t.Context()), lock.ErrLeaseExpired)
}

func TestClient_Do(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	var key string
	err := locks.Do(t.Context(), "job", func(ctx context.Context, l *lock.Lease) error {
		require.NoError(t, ctx.Err())
		require.NotZero(t, l.Fence().Token)
		key = locks.Mutex("job").LockKey()
		n, err := rdb.Exists(ctx, key).Result()
		require.EqualValues(t, 1, n)
		return err
	})
	require.NoError(t, err)
	require.True(t, keyGone(t, rdb, key)())

	boom := errors.New("boom")
	require.ErrorIs(t, locks.Do(t.Context(), "job", func(context.Context, *lock.Lease) error { return boom }), boom)

	// fn's context ends when the lease is lost.
	err = locks.Do(t.Context(), "job", func(ctx context.Context, l *lock.Lease) error {
		<-ctx.Done()
		return nil
	}, lock.WithTTL(30*time.Millisecond), lock.WithWatchdog(false))
	require.ErrorIs(t, err, lock.ErrLeaseExpired)
}

func TestClient_Close(t *testing.T) {
	rdb := sharedClient(t)
	locks := mustNew(t, rdb, lock.WithKeyPrefix(testPrefix(t)))
	m, l := tryMutex(t, locks, "closing", lock.WithTTL(time.Minute))
	waiting := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background())
		waiting <- err
	}()
	eventually(t, func() bool { return subscribers(t, locks, m) == 1 }, "waiter subscribed")
	require.NoError(t, locks.Close())
	require.ErrorIs(t, <-waiting, lock.ErrClosed)
	require.ErrorIs(t, l.Err(), lock.ErrClosed)
	_, err := m.TryAcquire(t.Context())
	require.ErrorIs(t, err, lock.ErrClosed)
	require.NoError(t, locks.Close())
	require.NoError(t, l.Release(t.Context()), "the lock itself is still released")
}

func TestLease_nil(t *testing.T) {
	var l *lock.Lease
	require.ErrorIs(t, l.Release(t.Context()), lock.ErrNotAcquired)
	require.ErrorIs(t, l.Extend(t.Context()), lock.ErrNotAcquired)
	require.ErrorIs(t, l.Err(), lock.ErrNotAcquired)
	require.Zero(t, l.Fence())
	require.Zero(t, l.Until())
	<-l.Done()
	<-l.Context().Done()
}

func TestMutex_badInput(t *testing.T) {
	rdb := sharedClient(t)
	prefix := testPrefix(t)
	locks := mustNew(t, rdb, lock.WithKeyPrefix(prefix))
	defer locks.Close()
	ctx := t.Context()
	for _, name := range []string{"", "a b", "{tag}", "a/b/c", "/a", "a/", "x*", strings.Repeat("n", 129), "é"} {
		_, err := locks.Mutex(name).TryAcquire(ctx)
		require.ErrorIs(t, err, lock.ErrInvalid, "name %q", name)
		_, err = locks.Mutex(name).Acquire(ctx)
		require.ErrorIs(t, err, lock.ErrInvalid, "name %q", name)
	}
	for _, opt := range []lock.Option{
		lock.WithTTL(0), lock.WithTTL(-time.Second), lock.WithTTL(5 * time.Millisecond), lock.WithTTL(25 * time.Hour),
		lock.WithMaxHold(-1), lock.WithPolling(0, time.Second), lock.WithPolling(time.Second, time.Millisecond),
		lock.WithReleaseTimeout(0), lock.WithKeyPrefix("a:b"), lock.WithKeyPrefix(""),
		lock.WithReplicaAck(0, time.Second), lock.WithRequiredReplicaAck(1, 0),
	} {
		_, err := locks.Mutex("ok", opt).TryAcquire(ctx)
		require.ErrorIs(t, err, lock.ErrInvalid)
		err = locks.Do(ctx, "ok", func(context.Context, *lock.Lease) error { return nil }, opt)
		require.ErrorIs(t, err, lock.ErrInvalid)
	}
	for _, opt := range []lock.Option{lock.WithKeyPrefix("{x}"), lock.WithTTL(0), lock.WithRetry(0, 0, 0)} {
		c, err := lock.New(rdb, opt)
		require.ErrorIs(t, err, lock.ErrInvalid, "New refuses a bad option at start")
		require.Nil(t, c)
	}
	c, err := lock.New(nil)
	require.ErrorIs(t, err, lock.ErrInvalid, "New refuses a nil client")
	require.Nil(t, c)
	_, err = locks.Mutex(strings.Repeat("n", 128), nil).TryAcquire(ctx)
	require.NoError(t, err, "128 bytes is allowed; nil options are ignored")
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 2, "only the valid mutex wrote (its lock and counter): %v", keys)
}
