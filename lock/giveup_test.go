package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// slowClient returns a Client whose replies come through a proxy that will
// delay them, and a Client on the server directly, with one key prefix.
func slowClient(t *testing.T) (slow, direct *lock.Client, px *redistest.Proxy) {
	rdb, rdbDirect, px := proxied(t, &redis.Options{MaxRetries: -1})
	prefix := lock.WithKeyPrefix(testPrefix(t))
	return newLocks(t, rdb, prefix), newLocks(t, rdbDirect, prefix), px
}

// giveUpWhileSubscribing loads sm's scripts and opens its pooled
// connection, takes the lock with hold and returns hold's lease once an
// Acquire on sm gave up while it joined the release channel: with px
// delaying replies, the first attempt answers after one delay and the
// subscription is confirmed only after another, so the context ends in
// between.
func giveUpWhileSubscribing(t *testing.T, px *redistest.Proxy, sm acquirer, hold func(context.Context) (*lock.Lease, error)) *lock.Lease {
	const latency = 300 * time.Millisecond
	ctx := t.Context()
	l, err := sm.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	held, err := hold(ctx)
	require.NoError(t, err)
	px.SetLatency(latency)
	wctx, cancel := context.WithTimeout(ctx, latency*3/2)
	defer cancel()
	_, err = sm.Acquire(wctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	px.SetLatency(0)
	return held
}

// TestRWMutex_Acquire_giveUpWhileSubscribing: a waiting writer whose
// context ends while it joins the release channel (its replies are slow)
// withdraws its waiting mark before Acquire returns, so a new reader gets in
// at once instead of being refused for two TTLs by a writer nobody is.
func TestRWMutex_Acquire_giveUpWhileSubscribing(t *testing.T) {
	slow, direct, px := slowClient(t)
	ctx := t.Context()
	dm := direct.RWMutex("doc", lock.WithTTL(5*time.Second))
	reader := giveUpWhileSubscribing(t, px, slow.RWMutex("doc", lock.WithTTL(5*time.Second)), dm.TryAcquireRead)

	r2, err := dm.TryAcquireRead(ctx)
	require.NoError(t, err, "a new reader is refused: the writer that gave up left its mark")
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, reader.Release(ctx))
}

// TestMutex_Fair_giveUpWhileSubscribing: as above for a fair-mode waiter:
// its queue entry is withdrawn before Acquire returns, so the free lock is
// not blocked by a waiter nobody is until its eviction.
func TestMutex_Fair_giveUpWhileSubscribing(t *testing.T) {
	slow, direct, px := slowClient(t)
	ctx := t.Context()
	dm := direct.Mutex("line", lock.WithFair(true), lock.WithTTL(5*time.Second))
	holder := giveUpWhileSubscribing(t, px, slow.Mutex("line", lock.WithFair(true), lock.WithTTL(5*time.Second)), dm.TryAcquire)

	require.NoError(t, holder.Release(ctx))
	l, err := dm.TryAcquire(ctx)
	require.NoError(t, err, "the free lock is refused: the waiter that gave up is still queued")
	require.NoError(t, l.Release(ctx))
}

// TestRWMutex_writerPreference_longerReaderTTL: readers on a long TTL
// (renewed by the watchdog) and a writer on a short one; while the writer
// waits, no new reader is admitted, however long the first reader holds.
func TestRWMutex_writerPreference_longerReaderTTL(t *testing.T) {
	prefix := testPrefix(t)
	cs := twoClients(t, prefix)
	ctx := t.Context()
	readers := cs[0].RWMutex("pref", lock.WithTTL(3*time.Second))
	writers := cs[1].RWMutex("pref", lock.WithTTL(200*time.Millisecond))
	r1, err := readers.AcquireRead(ctx)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := writers.Acquire(wctx)
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	eventually(t, func() bool {
		l, err := readers.TryAcquireRead(ctx)
		if err == nil {
			_ = l.Release(ctx)
		}
		return err != nil
	}, "the waiting writer stops new readers")
	// Many writer TTLs, and past the first reader's original expiry.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		l, err := readers.TryAcquireRead(ctx)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatal("a new reader was admitted while a writer waited")
		}
		require.ErrorIs(t, err, lock.ErrNotAcquired)
	}
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, <-got)
}

// TestFence_mutexAndRWMutexOneSequence: a Mutex and an RWMutex of one name
// give fences of the same Fence.Name, so their tokens come from one
// sequence: each acquisition's token is above every earlier one of either
// kind.
func TestFence_mutexAndRWMutexOneSequence(t *testing.T) {
	locks := newLocks(t, sharedClient(t))
	ctx := t.Context()
	m := locks.Mutex("acct")
	rw := locks.RWMutex("acct")
	var last uint64
	for i := range 6 {
		var (
			l   *lock.Lease
			err error
		)
		if i%2 == 0 {
			l, err = m.TryAcquire(ctx)
		} else {
			l, err = rw.TryAcquire(ctx)
		}
		require.NoError(t, err)
		f := l.Fence()
		require.Equal(t, "acct", f.Name)
		require.Greater(t, f.Token, last, "acquisition %d", i)
		last = f.Token
		require.NoError(t, l.Release(ctx))
	}
}

// TestMutex_TryAcquire_replyHeldBack_largeToken: a re-sent acquire of a
// lock whose token has 15 digits answers with exactly that token (a number
// passed through Lua's default formatting keeps only 14 digits).
func TestMutex_TryAcquire_replyHeldBack_largeToken(t *testing.T) {
	rdb, direct, px := proxied(t, &redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	for _, kind := range []string{"mutex", "fair", "rw"} {
		t.Run(kind, func(t *testing.T) {
			prefix := testPrefix(t)
			locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
			warmUp(t, locks)
			var (
				acq     func(context.Context) (*lock.Lease, error)
				lockKey string
			)
			switch kind {
			case "rw":
				m := locks.RWMutex("big")
				l, err := m.TryAcquire(t.Context()) // loads the script
				require.NoError(t, err)
				require.NoError(t, l.Release(t.Context()))
				acq, lockKey = m.TryAcquire, ""
			default:
				m := locks.Mutex("big", lock.WithFair(kind == "fair"))
				l, err := m.TryAcquire(t.Context())
				require.NoError(t, err)
				require.NoError(t, l.Release(t.Context()))
				acq, lockKey = m.TryAcquire, m.LockKey()
			}
			// A Mutex and an RWMutex writer of one name share its slot's counter.
			counters := []string{locks.Mutex("big").CounterKey()}
			n, err := direct.Exists(t.Context(), counters[0]).Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			const before = 123456789012344
			for _, k := range counters {
				require.NoError(t, direct.Set(t.Context(), k, before, 0).Err())
			}
			px.HoldReplies(2 * time.Second)
			ran := make(chan bool, 1)
			go func() {
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					if n, _ := direct.Get(context.Background(), counters[0]).Int64(); n > before {
						break
					}
					time.Sleep(time.Millisecond)
				}
				ran <- time.Now().Before(deadline)
				px.HoldReplies(0)
			}()
			l, err := acq(t.Context())
			require.NoError(t, err)
			require.True(t, <-ran, "the acquire whose reply was held ran")
			require.EqualValues(t, before+1, l.Fence().Token)
			if lockKey != "" {
				v, err := direct.Get(t.Context(), lockKey).Result()
				require.NoError(t, err)
				require.True(t, strings.HasSuffix(v, ":"+strconv.FormatInt(before+1, 10)), v)
			}
			require.NoError(t, l.Release(t.Context()))
		})
	}
}

// TestMutex_TryAcquire_lostRepliesCleanedUpOnceBack: the acquire's reply is
// lost (it ran and took the lock), and from then on no reply comes in time,
// not even to a new connection's handshake, so the acquire's outcome is
// unknown and the withdrawal that follows cannot be sent; once replies come
// again the withdrawal goes through, long before the lock's TTL, so no lock
// stays held by nobody.
func TestMutex_TryAcquire_lostRepliesCleanedUpOnceBack(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			rdb, rdbDirect, px := proxied(t, &redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
			prefix := testPrefix(t)
			lost := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
			direct := newLocks(t, rdbDirect, lock.WithKeyPrefix(prefix))
			opts := []lock.Option{lock.WithTTL(10 * time.Minute), lock.WithFair(fair)}
			warmUp(t, lost)
			l, err := lost.Mutex("gone", opts...).TryAcquire(t.Context())
			require.NoError(t, err)
			require.NoError(t, l.Release(t.Context()))

			m := lost.Mutex("gone", opts...)
			held := func() bool { return rdbDirect.Exists(t.Context(), m.LockKey()).Val() == 1 }
			err = redistest.LostReply(t, px, func() error {
				_, err := m.TryAcquire(t.Context())
				return err
			}, func() {
				require.True(t, held(), "the reply lost is the acquire's, which took the lock")
				px.SetLatency(time.Minute)
			})
			require.ErrorIs(t, err, retry.ErrUnknownOutcome)
			require.True(t, held(), "not given back while no reply comes")
			px.SetLatency(0)
			eventually(t, free(t, direct.Mutex("gone", opts...)), "the lock taken by the lost acquire is given back once replies come again")
		})
	}
}

// TestLease_Release_lostRepliesRetriedOnceBack: a Release whose every send
// fails without an answer (the pooled connection broke and each new one
// gets its handshake's reply too late) may not have run; it is retried once
// replies come again, so the lock is not left held by nobody until its TTL.
func TestLease_Release_lostRepliesRetriedOnceBack(t *testing.T) {
	rdb, rdbDirect, px := proxied(t, &redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1, PoolSize: 1})
	prefix := testPrefix(t)
	lost := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
	direct := newLocks(t, rdbDirect, lock.WithKeyPrefix(prefix))
	opts := []lock.Option{lock.WithTTL(10 * time.Minute)}
	l, err := lost.Mutex("kept", opts...).TryAcquire(t.Context())
	require.NoError(t, err)

	px.SetLatency(time.Minute)
	require.Error(t, rdb.Ping(t.Context()).Err()) // the pooled connection is gone
	require.Error(t, l.Release(t.Context()))
	require.EqualValues(t, 1, rdbDirect.Exists(t.Context(), lost.Mutex("kept", opts...).LockKey()).Val(), "the release was never sent")
	px.SetLatency(0)
	eventually(t, free(t, direct.Mutex("kept", opts...)), "the lock whose release got no answer is released once replies come again")
}
