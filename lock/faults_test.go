package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestLease_Context_redisPaused: Redis stops answering; the lease's Context
// is cancelled by the local deadline, without any reply from Redis.
func TestLease_Context_redisPaused(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	locks := newLocks(t, rdb)
	_, l := tryMutex(t, locks, "paused", lock.WithTTL(300*time.Millisecond))
	require.NoError(t, s.Pause())
	t.Cleanup(func() { _ = s.Resume() })
	select {
	case <-l.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease context not cancelled while Redis was paused")
	}
	require.ErrorIs(t, l.Err(), lock.ErrRenewFailed)
	require.NoError(t, s.Resume())
	if err := l.Release(t.Context()); err != nil {
		require.ErrorIs(t, err, lock.ErrLeaseExpired)
	}
}

// TestMutex_TryAcquire_replyHeldBack: the acquire ran but its reply came
// too late; the re-sent acquire recognises its own owner ID, so the caller
// holds the lock (no lock held by nobody) and only one token was used.
func TestMutex_TryAcquire_replyHeldBack(t *testing.T) {
	rdb, direct, px := proxied(t, &redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	locks := newLocks(t, rdb)
	m := locks.Mutex("held-back", lock.WithTTL(time.Minute))
	warmUp(t, locks) // load the scripts: a held-back NOSCRIPT would hide the acquire

	px.HoldReplies(2 * time.Second)
	ran := make(chan bool, 1)
	go func() {
		// Stop holding once the first acquire has run: the re-sent one
		// gets its reply.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if n, _ := direct.Exists(context.Background(), m.LockKey()).Result(); n == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		ran <- time.Now().Before(deadline)
		px.HoldReplies(0)
	}()
	l, err := m.TryAcquire(t.Context())
	require.NoError(t, err)
	require.True(t, <-ran, "the acquire whose reply was held ran")
	v, err := direct.Get(t.Context(), m.LockKey()).Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, l.Owner()+":"), "the lock is ours")
	require.EqualValues(t, 1, l.Fence().Token)
	n, err := direct.Get(t.Context(), m.CounterKey()).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "one acquisition, one token")
	require.NoError(t, l.Release(t.Context()))
}

// TestMutex_TryAcquire_unknownOutcomeCleansUp: the caller's context ends
// while the acquire's reply is held back, so the outcome is unknown; the
// lock the acquire created is deleted at once, not left to its TTL.
func TestMutex_TryAcquire_unknownOutcomeCleansUp(t *testing.T) {
	rdb, direct, px := proxied(t, &redis.Options{ReadTimeout: 5 * time.Second, ContextTimeoutEnabled: true})
	locks := newLocks(t, rdb)
	m := locks.Mutex("unknown", lock.WithTTL(time.Hour))
	warmUp(t, locks) // load the scripts: a held-back NOSCRIPT would hide the acquire

	px.HoldReplies(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	l, err := m.TryAcquire(ctx)
	require.Nil(t, l)
	require.Error(t, err)
	require.True(t, errors.Is(err, retry.ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Equal(t, "1", direct.Get(t.Context(), m.CounterKey()).Val(), "the acquire whose reply was held ran: it took a token")
	n, err := direct.Exists(t.Context(), m.LockKey()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no lock left held by nobody")
	px.HoldReplies(0)
	l, err = m.TryAcquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
}

// TestFence_Kleppmann: a holder pauses past its TTL, another owner takes the
// lock and writes; when the first resumes, its fenced write is refused while
// an unfenced write silently overwrites the newer data.
func TestFence_Kleppmann(t *testing.T) {
	rdb := sharedClient(t)
	locks := newLocks(t, rdb)
	ctx := t.Context()
	p := testPrefix(t)
	m := locks.Mutex("storage", lock.WithTTL(100*time.Millisecond), lock.WithWatchdog(false))
	fenceKey := lock.FenceKey(p, "file", m.Name())
	dataKey := p + ":{file}:data"
	fencedWrite := redis.NewScript(lock.FenceLua + `
if not redkit_fence(KEYS[1], ARGV[1]) then return redis.error_reply('STALE fence') end
redis.call('SET', KEYS[2], ARGV[2])
return 1`)

	a, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	paused := make(chan struct{})
	resume := make(chan struct{})
	go func() { // client A: stops (a GC pause) before its write
		close(paused)
		<-resume
	}()
	<-paused
	b, err := m.Acquire(ctx) // waits out A's TTL
	require.NoError(t, err)
	require.Greater(t, b.Fence().Token, a.Fence().Token)
	require.NoError(t, fencedWrite.Run(ctx, rdb, []string{fenceKey, dataKey}, b.Fence().Token, "B").Err())
	close(resume)

	err = fencedWrite.Run(ctx, rdb, []string{fenceKey, dataKey}, a.Fence().Token, "A").Err()
	require.ErrorContains(t, err, "STALE", "A's fenced write is refused")
	require.ErrorIs(t, lock.CheckFence(ctx, rdb, fenceKey, a.Fence()), lock.ErrStaleFence)
	v, err := rdb.Get(ctx, dataKey).Result()
	require.NoError(t, err)
	require.Equal(t, "B", v)

	require.NoError(t, rdb.Set(ctx, dataKey, "A", 0).Err()) // without the fence...
	v, err = rdb.Get(ctx, dataKey).Result()
	require.NoError(t, err)
	require.Equal(t, "A", v, "...the stale holder's write goes through")
	require.ErrorIs(t, a.Err(), lock.ErrLeaseExpired)
	require.NoError(t, b.Release(ctx))
}

// proxied starts a server with a fault proxy in front of it and returns a
// client through px with the options o (Addr filled in), closed at the end
// of t, and a client of the server directly.
func proxied(t *testing.T, o *redis.Options) (rdb, direct *redis.Client, px *redistest.Proxy) {
	s := redistest.New(t, redistest.Options{})
	px = redistest.NewProxy(t, s.Addr())
	o.Addr = px.Addr()
	rdb = redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, s.Client(), px
}

// warmUp loads the lock scripts into the server's script cache.
func warmUp(t testing.TB, locks *lock.Client) {
	l, err := locks.Mutex("warm-up").TryAcquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
}
