package reliability_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// After a run of every module's public operations, with go-redis
// instrumented by otelx.InstrumentRedis, every histogram of every
// instrumentation scope (redkit's and redisotel's) measures durations in
// seconds with otelx.DurationBuckets as its boundaries: none in
// milliseconds, none on the SDK's default boundaries.
func TestTelemetry_everyHistogramInSecondsWithBucketAdvice(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	seen := map[string]bool{}
	for _, m := range modules {
		t.Run(m.name, func(t *testing.T) {
			tel := otelxtest.New(t)
			rdb := s.Client()
			require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
			m.exercise(t, env{rdb: rdb, admin: rdb, tel: tel})

			var rm metricdata.ResourceMetrics
			require.NoError(t, tel.Reader.Collect(t.Context(), &rm))
			for _, sm := range rm.ScopeMetrics {
				for _, mt := range sm.Metrics {
					var bounds [][]float64
					switch h := mt.Data.(type) {
					case metricdata.Histogram[float64]:
						for _, p := range h.DataPoints {
							bounds = append(bounds, p.Bounds)
						}
					case metricdata.Histogram[int64]:
						for _, p := range h.DataPoints {
							bounds = append(bounds, p.Bounds)
						}
					default:
						continue
					}
					name := sm.Scope.Name + " " + mt.Name
					seen[name] = true
					require.Equal(t, "s", mt.Unit, "%s: unit", name)
					for _, b := range bounds {
						require.Equal(t, otelx.DurationBuckets, b, "%s: bucket boundaries", name)
					}
				}
			}
		})
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("histograms checked:\n%s", strings.Join(names, "\n"))
	for _, want := range []string{
		"github.com/redis/go-redis/extra/redisotel db.client.connections.use_time",
		"github.com/redis/go-redis/extra/redisotel db.client.connections.create_time",
		"github.com/redkit-go/redkit/lock redkit.lock.operation.duration",
		"github.com/redkit-go/redkit/idgen redkit.idgen.range.fetch.duration",
		"github.com/redkit-go/redkit/stock redkit.stock.operation.duration",
		"github.com/redkit-go/redkit/wallet redkit.wallet.operation.duration",
	} {
		require.True(t, seen[want], "%s was not recorded", want)
	}
}

// Every kind of background work of every module (the renewals of Mutex,
// RWMutex, Semaphore and Redlock leases, a Segment's range fetch, a
// Snowflake's node lease renewals, stock's reclaimer and journal consumer,
// wallet's hold reclaimer and recovery) is made of root spans, each linked
// to the span of the call that caused it: no background span is a child of
// a request that has ended, and none is a root without a link.
func TestTelemetry_backgroundWorkIsALinkedRootOfEveryKind(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	tel := otelxtest.New(t)
	require.NoError(t, rdb.Ping(t.Context()).Err())
	caller := tel.TracerProvider.Tracer("caller")
	// request runs fn under a span of its own and returns that span.
	request := func(name string, fn func(ctx context.Context)) trace.SpanContext {
		ctx, span := caller.Start(t.Context(), name)
		fn(ctx)
		span.End()
		return span.SpanContext()
	}
	causes := map[string]trace.SpanContext{} // kind -> the request that caused it

	// lock: every kind of lease, renewed by the watchdog.
	locks, err := lock.New(rdb, lock.WithTracerProvider(tel.TracerProvider), lock.WithMeterProvider(tel.MeterProvider))
	require.NoError(t, err)
	t.Cleanup(func() { _ = locks.Close() })
	rl, err := lock.NewRedlock([]redis.UniversalClient{rdb}, lock.WithTracerProvider(tel.TracerProvider),
		lock.WithMeterProvider(tel.MeterProvider))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	ttl := lock.WithTTL(150 * time.Millisecond)
	var leases []*lock.Lease
	for kind, acquire := range map[string]func(context.Context) (*lock.Lease, error){
		"mutex":     locks.Mutex("bg-mutex", ttl).Acquire,
		"rwmutex":   locks.RWMutex("bg-rw", ttl).Acquire,
		"read":      locks.RWMutex("bg-rw-read", ttl).AcquireRead,
		"semaphore": locks.Semaphore("bg-sem", 2, ttl).Acquire,
		"redlock":   rl.Mutex("bg-redlock", lock.WithTTL(6*time.Second)).Acquire,
	} {
		causes["lock.renew "+kind] = request(kind, func(ctx context.Context) {
			l, err := acquire(ctx)
			require.NoError(t, err, kind)
			leases = append(leases, l)
		})
	}

	// idgen: a Segment's prefetch and a Snowflake's node lease.
	seg, err := idgen.NewSegment(rdb, "bg-seg", idgen.WithMinStep(10), idgen.WithMaxStep(10),
		idgen.WithTracerProvider(tel.TracerProvider), idgen.WithMeterProvider(tel.MeterProvider))
	require.NoError(t, err)
	t.Cleanup(func() { _ = seg.Close() })
	causes["idgen.fetch"] = request("next", func(ctx context.Context) {
		for range 3 { // the third value starts the prefetch
			_, err := seg.Next(ctx)
			require.NoError(t, err)
		}
	})
	var sf *idgen.Snowflake
	causes["idgen.lease.renew"] = request("lease", func(ctx context.Context) {
		sf, err = idgen.NewLeasedSnowflake(ctx, rdb, "bg-service", idgen.WithLeaseTTL(time.Second),
			idgen.WithTracerProvider(tel.TracerProvider), idgen.WithMeterProvider(tel.MeterProvider))
		require.NoError(t, err)
	})
	t.Cleanup(func() { _ = sf.Close() })

	// stock: the reclaimer and the journal consumer.
	inv, err := stock.New(rdb, stock.WithTracerProvider(tel.TracerProvider), stock.WithMeterProvider(tel.MeterProvider),
		stock.WithReclaimInterval(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	causes["stock.reclaim_batch"] = request("reserve", func(ctx context.Context) {
		require.NoError(t, inv.Create(ctx, "bg-sku", 5))
		_, err := inv.Reserve(ctx, stock.Order{ID: "bg-o", Buyer: "bg-b", Items: []stock.Item{{SKU: "bg-sku", Qty: 1}}}, time.Second)
		require.NoError(t, err)
	})
	var stopConsumer context.CancelFunc
	consumed := make(chan error, 1)
	causes["stock.consume_batch"] = request("consume", func(ctx context.Context) {
		ctx, stopConsumer = context.WithCancel(ctx)
		go func() {
			consumed <- inv.Consume(ctx, stock.Consumer{Group: "bg-g", Name: "bg-c", SKUs: []string{"bg-sku"}, Poll: 10 * time.Millisecond},
				func(context.Context, []stock.Entry) error { return nil })
		}()
	})

	// wallet: the hold reclaimer and the recovery of a transfer left in
	// flight (its replies lost through a proxy).
	px := redistest.NewProxy(t, srv.Addr())
	wrdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = wrdb.Close() })
	led, err := wallet.New(wrdb, wallet.WithTracerProvider(tel.TracerProvider), wallet.WithMeterProvider(tel.MeterProvider),
		wallet.WithRecovery(time.Second), wallet.WithKeyPrefix("bgw"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	ctx := t.Context()
	for _, a := range []string{"a/src", "b/dst", "a/holder"} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("CNY")))
		_, err := led.Credit(ctx, wallet.Tx{ID: "fund-" + a, Account: a, Amount: 100})
		require.NoError(t, err)
	}
	causes["wallet.reclaim"] = request("hold", func(ctx context.Context) {
		_, err := led.Hold(ctx, wallet.HoldReq{ID: "bg-h", Account: "a/holder", Amount: 5, TTL: time.Second})
		require.NoError(t, err)
	})
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "bg-x0", From: "a/src", To: "b/dst", Amount: 1}) // loads the scripts
	require.NoError(t, err)
	causes["wallet.recover"] = request("transfer", func(ctx context.Context) {
		px.DropRepliesAfter(1) // the read of the destination passes; the first step's reply is lost
		_, err := led.Transfer(ctx, wallet.Transfer{ID: "bg-x1", From: "a/src", To: "b/dst", Amount: 5})
		px.DropReplies(false)
		require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	})

	// The span each cause's call made (the module's span under the
	// request), which background work links to.
	linkedTo := func(kind string, spans []sdktrace.ReadOnlySpan) bool {
		name := strings.Fields(kind)[0]
		req := causes[kind]
		want := map[trace.SpanID]bool{req.SpanID(): true}
		for _, s := range spans {
			if s.Parent().SpanID() == req.SpanID() {
				want[s.SpanContext().SpanID()] = true
			}
		}
		for _, s := range spans {
			if s.Name() != name || s.Parent().IsValid() {
				continue
			}
			for _, l := range s.Links() {
				if want[l.SpanContext.SpanID()] {
					return true
				}
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		spans := tel.Spans.Ended()
		for kind := range causes {
			if !linkedTo(kind, spans) {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "background work of every kind, linked to its cause:\n%s", tel.Trees())

	stopConsumer()
	<-consumed
	for _, l := range leases {
		_ = l.Release(ctx)
	}
	require.NoError(t, led.Close())
	require.NoError(t, inv.Close())
	require.NoError(t, seg.Close())
	require.NoError(t, sf.Close())
	require.NoError(t, locks.Close())
	require.NoError(t, rl.Close())

	background := map[string]bool{"lock.renew": true, "idgen.fetch": true, "idgen.lease.renew": true,
		"stock.reclaim_batch": true, "stock.consume_batch": true, "wallet.reclaim": true}
	for _, s := range tel.Spans.Ended() {
		if background[s.Name()] {
			require.False(t, s.Parent().IsValid(), "%s is a child span:\n%s", s.Name(), tel.Trees())
			require.NotEmpty(t, s.Links(), "%s has no link to its cause:\n%s", s.Name(), tel.Trees())
		}
	}
}

// The outcome vocabulary is written down where users look for it: the
// Telemetry sections of ARCHITECTURE.md and README.md list exactly
// otelx.Outcomes, each word once.
func TestTelemetry_outcomeVocabularyDocumented(t *testing.T) {
	re := regexp.MustCompile("`([a-z_]+)`")
	for _, file := range []string{"../ARCHITECTURE.md", "../README.md"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		text := string(b)
		start := strings.Index(text, "<!-- outcomes -->")
		end := strings.Index(text, "<!-- /outcomes -->")
		require.True(t, start >= 0 && end > start, "%s has no outcomes list between <!-- outcomes --> markers", file)
		var words []string
		for _, m := range re.FindAllStringSubmatch(text[start:end], -1) {
			words = append(words, m[1])
		}
		want := slices.Clone(otelx.Outcomes())
		slices.Sort(want)
		got := slices.Clone(words)
		slices.Sort(got)
		require.Equal(t, want, got, "%s: the outcome list differs from otelx.Outcomes", file)
	}
}
