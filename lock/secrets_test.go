package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
)

// Lock names, owner IDs and fencing tokens never reach telemetry: not the
// package's own spans and metrics, and not go-redis command traces switched
// on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	tel := otelxtest.New(t)
	tp, mp := tel.TracerProvider, tel.MeterProvider
	rdb := sharedClient(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
	locks := newLocks(t, rdb, lock.WithTracerProvider(tp), lock.WithMeterProvider(mp))
	ctx := t.Context()

	const name = "zq-tenant/zq-payout-lock"
	m := locks.Mutex(name, lock.WithTTL(time.Second))
	require.NoError(t, rdb.Set(ctx, m.CounterKey(), 4242424, 0).Err())
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, l.Fence().Token)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	waited := waitFor(locks.Mutex(name, lock.WithTTL(time.Second)))
	require.NoError(t, l.Extend(ctx))
	fenceKey := lock.FenceKey("", "zq-resource", name)
	require.NoError(t, lock.CheckFence(ctx, rdb, fenceKey, l.Fence()))
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-waited)
	require.ErrorIs(t, lock.CheckFence(ctx, rdb, fenceKey, lock.Fence{Name: name, Token: 4242424}), lock.ErrStaleFence)

	fair := locks.Mutex(name+"-fair", lock.WithFair(true))
	lf, err := fair.Acquire(ctx)
	require.NoError(t, err)
	fairWaited := waitFor(locks.Mutex(name+"-fair", lock.WithFair(true)))
	require.NoError(t, lf.Release(ctx))
	require.NoError(t, <-fairWaited)

	sem := locks.Semaphore(name+"-sem", 2)
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx))
	rw := locks.RWMutex(name + "-rw")
	r, err := rw.AcquireRead(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, locks.Do(ctx, name+"-do", func(context.Context, *lock.Lease) error { return nil }))
	require.NoError(t, rdb.Del(context.Background(), fenceKey).Err())

	tel.RequireRecorded(t, "lock.acquire", "lock.release", "evalsha", "redkit.lock.hold.duration", "db.client.connections.usage") // the scan sees what was recorded
	tel.RequireNoSecrets(t, "zq-", l.Owner(), lf.Owner(), p.Owner(), r.Owner(),
		strconv.FormatUint(l.Fence().Token, 10), "4242424")
}
