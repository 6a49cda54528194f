package lock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())

	rdb := sharedClient(t)
	locks := newLocks(t, rdb, lock.WithTracerProvider(tp), lock.WithMeterProvider(mp), lock.WithLabel("payout"))
	ctx := t.Context()
	m := locks.Mutex("secret-name", lock.WithTTL(60*time.Millisecond))
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	eventually(t, func() bool { return renewed(rec) }, "a renewal span")
	require.NoError(t, l.Release(ctx))

	lost := locks.Mutex("lost-name", lock.WithTTL(20*time.Millisecond), lock.WithWatchdog(false))
	l2, err := lost.Acquire(ctx)
	require.NoError(t, err)
	<-l2.Done()
	eventually(t, keyGone(t, rdb, lost.LockKey()), "expired in Redis")
	require.ErrorIs(t, l2.Release(ctx), lock.ErrLeaseExpired)

	outcomes := map[string][]string{}
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "redkit.outcome" {
				outcomes[s.Name()] = append(outcomes[s.Name()], a.Value.AsString())
			}
			requireNoSecret(t, a, l.Owner(), fmt.Sprint(l.Fence().Token))
		}
		require.Contains(t, s.Attributes(), attribute.String("redkit.label", "payout"))
	}
	require.Contains(t, outcomes["lock.acquire"], "ok")
	require.Contains(t, outcomes["lock.acquire"], "not_acquired")
	require.Contains(t, outcomes["lock.release"], "ok")
	require.Contains(t, outcomes["lock.release"], "expired")
	require.Contains(t, outcomes["lock.renew"], "ok")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, lock.ScopeName, sm.Scope.Name)
		for _, mt := range sm.Metrics {
			names[mt.Name] = true
			if mt.Name == "redkit.lock.lost" {
				sum := mt.Data.(metricdata.Sum[int64])
				require.Len(t, sum.DataPoints, 1)
				require.EqualValues(t, 1, sum.DataPoints[0].Value)
				v, _ := sum.DataPoints[0].Attributes.Value("redkit.outcome")
				require.Equal(t, "expired", v.AsString())
			}
		}
	}
	for _, n := range []string{"redkit.lock.wait.duration", "redkit.lock.hold.duration", "redkit.lock.lost", "redkit.lock.contention"} {
		require.True(t, names[n], n)
	}
}

func renewed(rec *tracetest.SpanRecorder) bool {
	for _, s := range rec.Ended() {
		if s.Name() == "lock.renew" {
			return true
		}
	}
	return false
}

func requireNoSecret(t *testing.T, a attribute.KeyValue, secrets ...string) {
	v := a.Value.String()
	for _, s := range append(secrets, "secret-name", "lost-name") {
		require.False(t, strings.Contains(v, s), "attribute %s carries %q", a.Key, s)
	}
}
