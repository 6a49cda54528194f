package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
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

// tracedLocks returns a Client, on a server of its own whose go-redis client
// is instrumented too, that records to rec; its connection is open, so
// the spans under test hold no handshake.
func tracedLocks(t *testing.T) (*lock.Client, *otelxtest.Recorder) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	require.NoError(t, rdb.Ping(t.Context()).Err())
	locks := mustNew(t, rdb, lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = locks.Close() })
	return locks, rec
}

// A contended Acquire is one lock.acquire span, a child of the caller's,
// however long it waits: its attempts and the wait for the holder's
// release are commands under it, not spans of their own, and none is an
// error.
func TestSpanTree_contendedAcquire(t *testing.T) {
	locks, rec := tracedLocks(t)
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
	locks, rec := tracedLocks(t)
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

// Every kind of lease the watchdog renews (Mutex, RWMutex write and read
// leases, Semaphore permits, Redlock) is renewed by background work whose
// lock.renew span is a root linked to that lease's lock.acquire, never a
// span without a parent nor a link. A Redlock lease, renewed on its own
// rather than in a batch, once made an orphan lock.renew.
func TestSpanTree_everyRenewalIsALinkedRoot(t *testing.T) {
	locks, rec := tracedLocks(t)
	_, masters := redlockMasters(t, 3)
	rl, err := lock.NewRedlock(masters, lock.WithTracerProvider(rec.TracerProvider),
		lock.WithMeterProvider(rec.MeterProvider))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	for _, m := range masters {
		require.NoError(t, m.Ping(t.Context()).Err())
	}
	ttl := lock.WithTTL(300 * time.Millisecond)
	kinds := map[string]interface {
		Acquire(context.Context) (*lock.Lease, error)
	}{
		"mutex":     locks.Mutex("walk-mutex", ttl),
		"rwmutex":   locks.RWMutex("walk-rw", ttl),
		"semaphore": locks.Semaphore("walk-sem", 2, ttl),
		// A Redlock master gets a twentieth of the TTL to answer.
		"redlock": rl.Mutex("walk-redlock", lock.WithTTL(6*time.Second)),
	}
	read := locks.RWMutex("walk-rw-read", ttl)
	tracer := rec.TracerProvider.Tracer("caller")
	acquire := map[string]func(context.Context) (*lock.Lease, error){"rwmutex read": read.AcquireRead}
	for name, k := range kinds {
		acquire[name] = k.Acquire
	}
	var leases []*lock.Lease
	for name, acq := range acquire {
		ctx, req := tracer.Start(t.Context(), "request "+name)
		l, err := acq(ctx)
		require.NoError(t, err, name)
		req.End()
		leases = append(leases, l)
	}
	// Wait until every lease's acquire is linked from some renewal.
	linked := func() (map[trace.SpanID]bool, []sdktrace.ReadOnlySpan) {
		got := map[trace.SpanID]bool{}
		var renewals []sdktrace.ReadOnlySpan
		for _, s := range rec.Spans.Ended() {
			if s.Name() != "lock.renew" {
				continue
			}
			renewals = append(renewals, s)
			for _, l := range s.Links() {
				got[l.SpanContext.SpanID()] = true
			}
		}
		return got, renewals
	}
	acquires := func() map[string]trace.SpanID {
		out := map[string]trace.SpanID{}
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Spans.Ended() {
			byID[s.SpanContext().SpanID()] = s
		}
		for _, s := range rec.Spans.Ended() {
			if p, ok := byID[s.Parent().SpanID()]; ok && s.Name() == "lock.acquire" {
				out[p.Name()] = s.SpanContext().SpanID()
			}
		}
		return out
	}
	eventually(t, func() bool {
		got, _ := linked()
		acq := acquires()
		for name := range acquire {
			if id, ok := acq["request "+name]; !ok || !got[id] {
				return false
			}
		}
		return true
	}, "a renewal of every kind of lease")
	for _, l := range leases {
		// A lease the watchdog could not renew in time (a loaded machine)
		// ends expired; the renewals it had are what this test is about.
		if err := l.Release(t.Context()); !errors.Is(err, lock.ErrLeaseExpired) {
			require.NoError(t, err)
		}
	}
	_, renewals := linked()
	for _, s := range renewals {
		require.False(t, s.Parent().IsValid(), "a renewal is a root:\n%s", rec.Trees())
		require.NotEmpty(t, s.Links(), "a renewal links to its cause:\n%s", rec.Trees())
	}
}

// outcomesOf returns the redkit.outcome of every ended span called name.
func outcomesOf(rec *otelxtest.Recorder, name string) []string {
	var got []string
	for _, s := range rec.Spans.Ended() {
		if s.Name() != name {
			continue
		}
		o := ""
		for _, a := range s.Attributes() {
			if string(a.Key) == otelx.AttrOutcome {
				o = a.Value.AsString()
			}
		}
		got = append(got, o)
	}
	return got
}

// dropKeys deletes every key under prefix but the fence counters, as an
// expiry (or a Redis that lost them) would.
func dropKeys(t *testing.T, rdb *redis.Client, prefix string) {
	for _, k := range rdb.Keys(t.Context(), prefix+":*").Val() {
		if !strings.HasSuffix(k, ":tokens") {
			require.NoError(t, rdb.Del(t.Context(), k).Err())
		}
	}
}

// An Extend that finds the lease lost records that as its lock.renew
// outcome, the word of the error it returns (expired or taken), for every
// kind of lease; an Extend that renews records ok.
func TestTelemetry_Extend_outcomeMatchesError(t *testing.T) {
	type kind struct {
		name    string
		acquire func(c *lock.Client) (*lock.Lease, error)
		taker   func(c *lock.Client) (*lock.Lease, error) // nil: nobody can take it
	}
	ttl := lock.WithTTL(time.Minute)
	off := lock.WithWatchdog(false)
	kinds := []kind{
		{"mutex", func(c *lock.Client) (*lock.Lease, error) { return c.Mutex("x", ttl, off).TryAcquire(t.Context()) },
			func(c *lock.Client) (*lock.Lease, error) { return c.Mutex("x", ttl, off).TryAcquire(t.Context()) }},
		{"rwmutex", func(c *lock.Client) (*lock.Lease, error) { return c.RWMutex("x", ttl, off).TryAcquire(t.Context()) },
			func(c *lock.Client) (*lock.Lease, error) { return c.RWMutex("x", ttl, off).TryAcquire(t.Context()) }},
		{"fair mutex", func(c *lock.Client) (*lock.Lease, error) {
			return c.Mutex("x", ttl, off, lock.WithFair(true)).TryAcquire(t.Context())
		}, func(c *lock.Client) (*lock.Lease, error) {
			return c.Mutex("x", ttl, off, lock.WithFair(true)).TryAcquire(t.Context())
		}},
		{"rwmutex read", func(c *lock.Client) (*lock.Lease, error) { return c.RWMutex("x", ttl, off).TryAcquireRead(t.Context()) }, nil},
		{"semaphore", func(c *lock.Client) (*lock.Lease, error) {
			return c.Semaphore("x", 1, ttl, off).TryAcquire(t.Context())
		}, nil},
	}
	for _, k := range kinds {
		for _, tc := range []struct {
			name  string
			lose  bool
			taken bool
			err   error
			want  string
		}{
			{"renewed", false, false, nil, otelx.OutcomeOK},
			{"expired", true, false, lock.ErrLeaseExpired, otelx.OutcomeExpired},
			{"taken", true, true, lock.ErrLeaseTaken, otelx.OutcomeTaken},
		} {
			if tc.taken && k.taker == nil {
				continue
			}
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				rec := otelxtest.New(t)
				rdb := sharedClient(t)
				prefix := testPrefix(t)
				locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix), lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
				l, err := k.acquire(locks)
				require.NoError(t, err)
				if tc.lose {
					dropKeys(t, rdb, prefix)
				}
				if tc.taken {
					_, err := k.taker(newLocks(t, rdb, lock.WithKeyPrefix(prefix)))
					require.NoError(t, err)
				}
				err = l.Extend(t.Context())
				if tc.err == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tc.err)
				}
				require.Equal(t, []string{tc.want}, outcomesOf(rec, "lock.renew"), "an Extend that returned %v", err)
			})
		}
	}
}

// A watchdog round that finds a lease lost records that as the round's
// lock.renew outcome, not ok.
func TestTelemetry_watchdogRound_outcomeOfLostLease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool
		want  string
	}{{"expired", false, otelx.OutcomeExpired}, {"taken", true, otelx.OutcomeTaken}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := otelxtest.New(t)
			rdb := sharedClient(t)
			prefix := testPrefix(t)
			locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix), lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
			m := locks.Mutex("x", lock.WithTTL(3*time.Second))
			l, err := m.TryAcquire(t.Context())
			require.NoError(t, err)
			require.NoError(t, rdb.Del(t.Context(), m.LockKey()).Err())
			if tc.taken {
				_, err := newLocks(t, rdb, lock.WithKeyPrefix(prefix)).Mutex("x", lock.WithTTL(time.Minute), lock.WithWatchdog(false)).TryAcquire(t.Context())
				require.NoError(t, err)
			}
			<-l.Done()
			require.Equal(t, []string{tc.want}, outcomesOf(rec, "lock.renew"), "the lease ended with %v", l.Err())
		})
	}
}

// A Release whose replies were lost is retried in the background after it
// returned: each retry is a lock.release root linked to the Release's span,
// so nothing it sends starts under a span of the request that has ended.
func TestSpanTree_releaseRetriedInBackgroundIsALinkedRoot(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	locks := newLocks(t, rdb, lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	m := locks.Mutex("x", lock.WithTTL(10*time.Second))
	ctx, root := rec.TracerProvider.Tracer("test").Start(t.Context(), "request")
	l, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, px.Cut(true))
	require.Error(t, l.Release(ctx))
	root.End()
	require.NoError(t, px.Cut(false))
	eventually(t, keyGone(t, s.Client(), m.LockKey()), "the release retried in the background")
	eventually(t, func() bool {
		for _, sp := range rec.Spans.Ended() {
			if sp.Name() == "lock.release" && !sp.Parent().IsValid() && sp.Status().Code != codes.Error {
				return true
			}
		}
		return false
	}, "the retry that answered has ended")

	var release trace.SpanID
	ended := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Spans.Ended() {
		ended[sp.SpanContext().SpanID()] = sp
		if sp.Name() == "lock.release" && sp.Parent().IsValid() {
			release = sp.SpanContext().SpanID()
		}
	}
	require.True(t, release.IsValid(), rec.Trees())
	retries := 0
	for _, sp := range rec.Spans.Ended() {
		if p, ok := ended[sp.Parent().SpanID()]; ok && sp.Parent().IsValid() {
			require.False(t, sp.StartTime().After(p.EndTime()), "%s started after its parent %s ended:\n%s", sp.Name(), p.Name(), rec.Trees())
		}
		if sp.Name() == "lock.release" && !sp.Parent().IsValid() {
			retries++
			require.Len(t, sp.Links(), 1, rec.Trees())
			require.Equal(t, release, sp.Links()[0].SpanContext.SpanID(), "a retry links to the Release that gave it up:\n%s", rec.Trees())
		}
	}
	require.Positive(t, retries, rec.Trees())
}

// A Redlock master whose grant drew less than the lease's token is raised
// to it in the background after the acquire returned: each raise is a
// lock.raise root linked to the acquire's span, so its commands never
// start under the acquire's span after it ended.
func TestSpanTree_redlockRaiseInBackgroundIsALinkedRoot(t *testing.T) {
	servers, masters := redlockMasters(t, 3)
	// The third master answers after the other two decided the acquire.
	px := redistest.NewProxy(t, servers[2].Addr())
	px.SetLatency(100 * time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = slow.Close() })
	masters[2] = slow
	rec := otelxtest.New(t)
	for _, m := range masters {
		require.NoError(t, otelx.InstrumentRedis(m, rec.Providers()))
		require.NoError(t, m.Ping(t.Context()).Err())
	}
	p := testPrefix(t)
	rl, err := lock.NewRedlock(masters, lock.WithKeyPrefix(p), lock.WithTracerProvider(rec.TracerProvider),
		lock.WithMeterProvider(rec.MeterProvider), lock.WithTTL(6*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	warm, err := rl.Mutex("warm-up").TryAcquire(t.Context()) // scripts loaded on every master
	require.NoError(t, err)
	require.NoError(t, warm.Release(t.Context()))
	// Two masters' counters ahead: they draw the token at once, a majority,
	// and the third master, answering late, is raised to it in the
	// background.
	counter := mustNew(t, masters[0], lock.WithKeyPrefix(p)).Mutex("raise").CounterKey()
	for _, s := range servers[:2] {
		require.NoError(t, s.Client().IncrBy(t.Context(), counter, 100).Err())
	}
	rec.Spans.Reset()
	ctx, req := rec.TracerProvider.Tracer("caller").Start(t.Context(), "request")
	l, err := rl.Mutex("raise").TryAcquire(ctx)
	require.NoError(t, err)
	req.End()
	eventually(t, func() bool {
		v, err := servers[2].Client().Get(t.Context(), counter).Int64()
		return err == nil && uint64(v) == l.Fence().Token
	}, "the third master raised to the token")
	require.NoError(t, l.Release(t.Context()))
	eventually(t, func() bool {
		n := len(rec.Spans.Ended())
		time.Sleep(200 * time.Millisecond)
		return len(rec.Spans.Ended()) == n
	}, "every span ended")

	ended := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var acquire trace.SpanID
	for _, sp := range rec.Spans.Ended() {
		ended[sp.SpanContext().SpanID()] = sp
		if sp.Name() == "lock.acquire" {
			acquire = sp.SpanContext().SpanID()
		}
	}
	raises := 0
	for _, sp := range rec.Spans.Ended() {
		if p, ok := ended[sp.Parent().SpanID()]; ok && sp.Parent().IsValid() {
			require.False(t, sp.StartTime().After(p.EndTime()), "%s started after its parent %s ended:\n%s", sp.Name(), p.Name(), rec.Trees())
		}
		if sp.Name() == "lock.raise" {
			raises++
			require.False(t, sp.Parent().IsValid(), rec.Trees())
			require.Len(t, sp.Links(), 1, rec.Trees())
			require.Equal(t, acquire, sp.Links()[0].SpanContext.SpanID(), "a raise links to the acquire that left it:\n%s", rec.Trees())
		}
	}
	require.Positive(t, raises, rec.Trees())
}

// A Redlock Extend whose answers from two masters of three were lost
// returns an error wrapping ErrUnknownOutcome; its lock.renew span says
// unknown_outcome, the word for that error, not error.
func TestTelemetry_redlockExtend_lostReplies_unknownOutcome(t *testing.T) {
	var masters []redis.UniversalClient
	var pxs []*redistest.Proxy
	for range 3 {
		rdb, _, px := proxied(t, &redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
		masters = append(masters, rdb)
		pxs = append(pxs, px)
	}
	rec := otelxtest.New(t)
	rl := mustRedlock(t, masters, lock.WithKeyPrefix(testPrefix(t)), lock.WithTTL(10*time.Second), lock.WithWatchdog(false),
		lock.WithTracerProvider(rec.TracerProvider), lock.WithMeterProvider(rec.MeterProvider))
	defer rl.Close()
	l, err := rl.Mutex("renew").TryAcquire(t.Context())
	require.NoError(t, err)
	pxs[0].DropReplies(true)
	pxs[1].DropReplies(true)
	err = l.Extend(t.Context())
	pxs[0].DropReplies(false)
	pxs[1].DropReplies(false)
	require.ErrorIs(t, err, lock.ErrUnknownOutcome)
	require.Equal(t, []string{otelx.OutcomeUnknownOutcome}, outcomesOf(rec, "lock.renew"), "an Extend that returned %v", err)
}
