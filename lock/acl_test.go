package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// The user in lock/redis.acl can run everything the package does and
// nothing else.
func TestACL_redisACL_leastPrivilege(t *testing.T) {
	s, password := redistest.NewWithACL(t, "redis.acl")
	rdb := s.Client(func(o *redis.Options) { o.Username, o.Password = "redkit-lock", password })
	admin := s.Client()
	ctx := t.Context()
	locks := mustNew(t, rdb)
	t.Cleanup(func() { _ = locks.Close() })

	m := locks.Mutex("shop-7/payout", lock.WithTTL(time.Second))
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	waited := waitFor(locks.Mutex("shop-7/payout", lock.WithTTL(time.Second))) // subscribes
	require.NoError(t, l.Extend(ctx))
	key := lock.FenceKey("", "acct-1", "shop-7/payout")
	require.NoError(t, lock.CheckFence(ctx, rdb, key, l.Fence()))
	require.NoError(t, l.Release(ctx)) // publishes
	require.NoError(t, <-waited)

	fair := locks.Mutex("fair", lock.WithFair(true), lock.WithTTL(time.Second))
	lf, err := fair.Acquire(ctx)
	require.NoError(t, err)
	fairWaited := waitFor(locks.Mutex("fair", lock.WithFair(true), lock.WithTTL(time.Second)))
	require.NoError(t, lf.Release(ctx))
	require.NoError(t, <-fairWaited)

	sem := locks.Semaphore("sem", 1, lock.WithTTL(time.Second))
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Extend(ctx))
	require.NoError(t, p.Release(ctx))
	rw := locks.RWMutex("rw", lock.WithTTL(time.Second))
	r, err := rw.AcquireRead(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	w, err := rw.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
	acked, err := locks.Mutex("acked", lock.WithReplicaAck(1, 10*time.Millisecond)).Acquire(ctx) // WAIT
	require.NoError(t, err)
	require.NoError(t, acked.Release(ctx))
	require.NoError(t, locks.Do(ctx, "do", func(context.Context, *lock.Lease) error { return nil }))
	rl := mustRedlock(t, []redis.UniversalClient{rdb}).Mutex("redlock", lock.WithTTL(time.Second))
	lr, err := rl.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, lr.Release(ctx))
	// A script not cached yet is loaded (SCRIPT LOAD / EVAL fallback).
	require.NoError(t, admin.ScriptFlush(ctx).Err())
	l, err = m.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	if testing.Verbose() {
		t.Log(admin.Info(ctx, "commandstats").Val())
	}
	redistest.RequireLeastPrivilege(t, rdb, "redkit:stock:v1:{shop-7}:sku:shop-7/sku-1", map[string]error{
		"a channel outside the patterns": rdb.Publish(ctx, "other-channel", "x").Err(),
	})
}
