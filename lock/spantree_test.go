package lock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
)

// A contended Acquire is one lock.acquire span, a child of the caller's,
// however long it waits: its attempts and the wait for the holder's
// release are commands under it, not spans of their own, and none is an
// error.
func TestSpanTree_contendedAcquire(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	require.NoError(t, rdb.Ping(t.Context()).Err())
	locks := mustNew(t, rdb, lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = locks.Close() })
	m := locks.Mutex("hot", lock.WithTTL(time.Minute))
	tracer := rec.TracerProvider.Tracer("caller")

	ctx, holder := tracer.Start(t.Context(), "holder")
	held, err := m.Acquire(ctx)
	require.NoError(t, err)
	holder.End()

	ctx, waiter := tracer.Start(t.Context(), "waiter")
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Release once the waiter has found the lock held.
	eventually(t, func() bool {
		for _, s := range rec.Spans.Ended() {
			if s.Name() == "evalsha" || s.Name() == "eval" {
				if s.Parent().TraceID() == waiter.SpanContext().TraceID() {
					return true
				}
			}
		}
		return false
	}, "the waiter's first attempt")
	require.NoError(t, held.Release(t.Context()))
	require.NoError(t, <-got)
	waiter.End()

	// How the waiter learns of the release (a subscription's connection,
	// its handshake) is the Client's to change; the shape is not: one
	// lock.acquire holding every attempt, then the release, nothing red.
	tree := rec.Tree(t, "waiter")
	require.NotContains(t, rec.Trees(), "ERROR")
	lines := strings.Split(strings.TrimSuffix(tree, "\n"), "\n")
	n := len(lines)
	require.GreaterOrEqual(t, n, 6, tree)
	require.Equal(t, []string{"waiter", "  lock.acquire outcome=ok"}, lines[:2], tree)
	require.Equal(t, []string{"  lock.release outcome=ok", "    evalsha"}, lines[n-2:], tree)
	attempts := 0
	for _, l := range lines[2 : n-2] {
		require.True(t, strings.HasPrefix(l, "    "), "not under lock.acquire: %q\n%s", l, tree)
		require.False(t, strings.HasPrefix(strings.TrimSpace(l), "lock."), "a second lock span: %q\n%s", l, tree)
		if l == "    evalsha" {
			attempts++
		}
	}
	require.GreaterOrEqual(t, attempts, 2, "an attempt that found it held and the one that took it\n%s", tree)
}

// The watchdog's renewals are background work: one lock.renew root span
// per round, linked to the lock.acquire span of the lease it renews, not
// a child of a request that has long ended nor an unlinked orphan.
func TestSpanTree_watchdogRenewalLinksToAcquire(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	require.NoError(t, rdb.Ping(t.Context()).Err())
	locks := mustNew(t, rdb, lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = locks.Close() })
	m := locks.Mutex("renewed", lock.WithTTL(60*time.Millisecond))

	ctx, req := rec.TracerProvider.Tracer("caller").Start(t.Context(), "request")
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	req.End()
	eventually(t, func() bool { return strings.Contains(rec.Trees(), "lock.renew outcome=ok link=lock.acquire") }, "a renewal")
	require.NoError(t, l.Release(t.Context()))

	for _, line := range strings.Split(rec.Trees(), "\n") {
		if strings.Contains(line, "lock.renew") {
			require.Equal(t, "lock.renew outcome=ok link=lock.acquire", line, "a renewal is a root linked to the acquire:\n%s", rec.Trees())
		}
	}
	require.Equal(t, "request\n  lock.acquire outcome=ok\n    evalsha cache_miss\n    eval\n", rec.Tree(t, "request"))
}
