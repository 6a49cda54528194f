package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

func redlockMasters(t *testing.T, n int) ([]*redistest.Server, []redis.UniversalClient) {
	var (
		servers []*redistest.Server
		clients []redis.UniversalClient
	)
	for range n {
		s := redistest.New(t, redistest.Options{})
		servers = append(servers, s)
		clients = append(clients, s.Client(func(o *redis.Options) { o.MaxRetries = -1 }))
	}
	return servers, clients
}

func TestRedlock_quorum(t *testing.T) {
	servers, clients := redlockMasters(t, 3)
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(testPrefix(t)), lock.WithTTL(5*time.Second))
	defer rl.Close()
	ctx := t.Context()
	m := rl.Mutex("report")

	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.Positive(t, l.Fence().Token, "a Redlock lease has a fencing token")
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))
	// Release returns once a majority released; the third master's
	// release may still be on its way, and with another master down next
	// a new owner needs that one too.
	for _, c := range clients {
		eventually(t, func() bool { return len(c.Keys(ctx, "*redlock:report").Val()) == 0 }, "released on every master")
	}

	// One master down: a majority is still reachable.
	require.NoError(t, servers[2].Kill())
	l, err = m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))
	for _, c := range clients[:2] {
		eventually(t, func() bool { return len(c.Keys(ctx, "*redlock:report").Val()) == 0 }, "released on every live master")
	}

	// Two down: no majority; the error says why and nothing stays held.
	require.NoError(t, servers[1].Kill())
	_, err = m.TryAcquire(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, lock.ErrNotAcquired)
	n, err := clients[0].DBSize(ctx).Result()
	require.NoError(t, err)
	lockKeys, err := clients[0].Keys(ctx, "*redlock:report").Result()
	require.NoError(t, err)
	require.Empty(t, lockKeys, "the minority lock was given back (%d keys)", n)
}

// TestRedlock_leaseLostWithMajority: when a majority of masters lose the
// lock, the next renewal ends the lease.
func TestRedlock_leaseLostWithMajority(t *testing.T) {
	_, clients := redlockMasters(t, 3)
	// 5% of the TTL (100ms) gives a first call, which dials and loads the
	// script, time to answer on a loaded machine.
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(testPrefix(t)), lock.WithTTL(2*time.Second))
	defer rl.Close()
	ctx := t.Context()
	l, err := rl.Mutex("fragile").TryAcquire(ctx)
	require.NoError(t, err)
	// The acquire returns once two masters granted it; the third's grant,
	// if it lands after the flush, would keep a majority.
	eventually(t, func() bool {
		for _, c := range clients {
			if keys, _ := c.Keys(ctx, "*redlock:fragile").Result(); len(keys) == 0 {
				return false
			}
		}
		return true
	}, "the lock on every master")
	require.NoError(t, clients[0].FlushAll(ctx).Err())
	require.NoError(t, clients[1].FlushAll(ctx).Err())
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease survived losing its majority")
	}
	require.ErrorIs(t, l.Err(), lock.ErrLeaseExpired)
}

// TestRedlock_ConcurrentSafe: goroutines on two Redlocks over the same
// masters never hold the lock together.
func TestRedlock_ConcurrentSafe(t *testing.T) {
	_, clients := redlockMasters(t, 3)
	prefix := testPrefix(t)
	a := mustRedlock(t, clients, lock.WithKeyPrefix(prefix))
	b := mustRedlock(t, clients, lock.WithKeyPrefix(prefix))
	defer a.Close()
	defer b.Close()
	var (
		inside int32
		bad    atomic.Int32
	)
	done := make(chan struct{})
	for i := range 4 {
		rl := a
		if i%2 == 1 {
			rl = b
		}
		m := rl.Mutex("shared")
		go func() {
			defer func() { done <- struct{}{} }()
			for range 10 {
				l, err := m.Acquire(context.Background())
				if !assertNoError(t, err) {
					return
				}
				if !casInside(&inside) {
					bad.Add(1)
				}
				time.Sleep(time.Millisecond)
				leaveInside(&inside)
				assertNoError(t, l.Release(context.Background()))
			}
		}()
	}
	for range 4 {
		<-done
	}
	require.Zero(t, bad.Load())
}

func TestRedlock_badInput(t *testing.T) {
	rl, err := lock.NewRedlock(nil)
	require.ErrorIs(t, err, lock.ErrInvalid, "no masters")
	require.Nil(t, rl)
	rl, err = lock.NewRedlock([]redis.UniversalClient{sharedClient(t), nil})
	require.ErrorIs(t, err, lock.ErrInvalid, "a nil master")
	require.Nil(t, rl)
	rl, err = lock.NewRedlock([]redis.UniversalClient{sharedClient(t)}, lock.WithTTL(0))
	require.ErrorIs(t, err, lock.ErrInvalid, "an invalid option")
	require.Nil(t, rl)
}

func casInside(p *int32) bool { return atomic.CompareAndSwapInt32(p, 0, 1) }
func leaveInside(p *int32)    { atomic.StoreInt32(p, 0) }

// silentThird returns three Redlock masters with go-redis's default
// options, the third behind a proxy, and the proxy.
func silentThird(t *testing.T) ([]redis.UniversalClient, *redistest.Proxy) {
	var clients []redis.UniversalClient
	var px *redistest.Proxy
	for i := range 3 {
		s := redistest.New(t, redistest.Options{})
		addr := s.Addr()
		if i == 2 {
			px = redistest.NewProxy(t, addr)
			addr = px.Addr()
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	return clients, px
}

// TestRedlock_silentMinority: one master of three answers nothing (its
// replies are dropped, as in a partition or a paused host). With the
// defaults (TTL 10s, go-redis's timeouts and retries), an acquire and a
// renewal are decided by the two that answer: the lease keeps at least 90%
// of its TTL, the lock stays exclusive, and the release works.
func TestRedlock_silentMinority(t *testing.T) {
	clients, px := silentThird(t)
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(testPrefix(t)))
	defer rl.Close()
	ctx := t.Context()
	m := rl.Mutex("silent")
	l, err := m.TryAcquire(ctx) // loads the scripts on every master
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	px.DropReplies(true)
	defer px.DropReplies(false)
	start := time.Now()
	l, err = m.TryAcquire(ctx)
	require.NoError(t, err)
	took, validity := time.Since(start), time.Until(l.Until())
	t.Logf("acquire with a silent master: took %v, validity %v of %v (%.1f%%)",
		took, validity, lock.DefaultTTL, 100*validity.Seconds()/lock.DefaultTTL.Seconds())
	require.GreaterOrEqual(t, validity, lock.DefaultTTL*9/10, "the lease keeps at least 90%% of its TTL")

	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "still exclusive")

	start = time.Now()
	require.NoError(t, l.Extend(ctx))
	took, validity = time.Since(start), time.Until(l.Until())
	t.Logf("renewal with a silent master: took %v, validity %v", took, validity)
	require.GreaterOrEqual(t, validity, lock.DefaultTTL*9/10)
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(ctx))

	px.DropReplies(false)
	l, err = m.TryAcquire(ctx)
	require.NoError(t, err, "released on every master that answered")
	require.NoError(t, l.Release(ctx))
}

// TestRedlock_silentMinority_noQuorum: one master holds the lock for
// another owner, one is silent: no majority is possible, and the acquire
// says so after the per-master deadline, giving back what it got.
func TestRedlock_silentMinority_noQuorum(t *testing.T) {
	clients, px := silentThird(t)
	prefix := testPrefix(t)
	rl := mustRedlock(t, clients, lock.WithKeyPrefix(prefix), lock.WithTTL(4*time.Second))
	defer rl.Close()
	other := mustRedlock(t, clients[1:2], lock.WithKeyPrefix(prefix), lock.WithTTL(time.Minute))
	defer other.Close()
	ctx := t.Context()
	// Held by another owner on the second master only.
	held, err := other.Mutex("contended").TryAcquire(ctx)
	require.NoError(t, err)

	px.DropReplies(true)
	_, err = rl.Mutex("contended").TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	px.DropReplies(false)
	// Given back at once when the first master answered in time, else when
	// its call ends.
	eventually(t, func() bool {
		keys, err := clients[0].Keys(ctx, prefix+":*redlock:contended").Result()
		require.NoError(t, err)
		return len(keys) == 0
	}, "the minority grant is given back")
	require.NoError(t, held.Release(ctx))
}
