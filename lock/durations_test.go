package lock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx/otelxtest"
)

// Acquire and Release record redkit.lock.operation.duration, and the wait
// and hold histograms carry otelx.DurationBuckets too.
func TestTelemetry_operationDurations(t *testing.T) {
	rec := otelxtest.New(t)
	locks := newLocks(t, sharedClient(t), lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()
	m := locks.Mutex("d", lock.WithTTL(time.Minute))
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.NoError(t, l.Release(ctx))

	require.Equal(t, map[string]uint64{
		"acquire ok":           1,
		"acquire not_acquired": 1,
		"release ok":           1,
	}, rec.Durations(t, "redkit.lock.operation.duration"))
	require.Equal(t, map[string]uint64{" ok": 1, " not_acquired": 1}, rec.Durations(t, "redkit.lock.wait.duration"))
	require.Equal(t, map[string]uint64{" ": 1}, rec.Durations(t, "redkit.lock.hold.duration"))
}
