package stock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

func TestInventory_telemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inv, _, _ := newInventory(t, stock.WithTracerProvider(tp), stock.WithMeterProvider(mp), stock.WithLabel("flash"))
	ctx := t.Context()

	require.NoError(t, inv.Create(ctx, "secret-sku", 1))
	o := order("secret-order", "secret-buyer", "secret-sku", 1)
	_, err := inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("secret-order-2", "secret-buyer", "secret-sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Reserve(ctx, order("secret-order-3", "secret-buyer", "secret-sku", 1), time.Minute)
	require.ErrorIs(t, err, stock.ErrSoldOut)

	type seen struct {
		outcome  string
		replayed bool
		failed   bool
	}
	var got []seen
	for _, s := range spans.Ended() {
		v := seen{failed: s.Status().Code == codes.Error}
		for _, a := range s.Attributes() {
			require.NotContains(t, a.Value.String(), "secret", "attribute %s leaks a name", a.Key)
			switch a.Key {
			case "redkit.outcome":
				v.outcome = a.Value.AsString()
			case "redkit.replayed":
				v.replayed = a.Value.AsBool()
			case "redkit.label":
				require.Equal(t, "flash", a.Value.AsString())
			}
		}
		require.True(t, strings.HasPrefix(s.Name(), "stock."), s.Name())
		got = append(got, v)
	}
	require.Equal(t, []seen{
		{outcome: "ok"},                       // create
		{outcome: "ok"},                       // deduct
		{outcome: "replayed", replayed: true}, // deduct again
		{outcome: "sold_out"},                 // a refusal is not a span error
		{outcome: "sold_out"},                 // reserve
	}, got)
	require.Equal(t, "stock.reserve", spans.Ended()[4].Name())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	total := int64(0)
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, stock.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			if m.Name != "redkit.stock.operations" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				total += dp.Value
			}
		}
	}
	require.Equal(t, int64(5), total)
}

// Every public operation records redkit.stock.operation.duration, in
// seconds with otelx.DurationBuckets, by operation and outcome: applied
// (ok), refused (sold_out, ...), replayed and error.
func TestInventory_operationDurations(t *testing.T) {
	rec := otelxtest.New(t)
	inv, _, _ := newInventory(t, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()

	require.NoError(t, inv.Create(ctx, "sku", 1))
	o := order("o1", "b1", "sku", 1)
	_, err := inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, o)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "b1", "sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Deduct(ctx, order("o3", "b1", "sku", 0))
	require.ErrorIs(t, err, stock.ErrInvalid)
	_, err = inv.Level(ctx, "sku")
	require.NoError(t, err)
	_, err = inv.Level(ctx, "no-such-sku")
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
	_, err = inv.Reclaim(ctx, "sku")
	require.NoError(t, err)
	_, err = inv.Audit(ctx, "sku")
	require.NoError(t, err)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{order("o4", "b1", "sku", 1)}) {
		require.ErrorIs(t, r.Err, stock.ErrSoldOut)
	}

	require.Equal(t, map[string]uint64{
		"create ok":           1,
		"deduct ok":           1,
		"deduct replayed":     1,
		"deduct sold_out":     1,
		"deduct invalid":      1,
		"level ok":            1,
		"level sku_not_found": 1,
		"reclaim ok":          1,
		"audit ok":            1,
		"deduct_batch ok":     1,
	}, rec.Durations(t, "redkit.stock.operation.duration"))
}

// redkit.stock.units.sold counts the units Deduct, DeductBatch and Confirm
// sold, once per order: replays and refusals add nothing.
func TestInventory_unitsSoldCounter(t *testing.T) {
	rec := otelxtest.New(t)
	inv, _, _ := newInventory(t, stock.WithMeterProvider(rec.MeterProvider))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10))
	o := order("o1", "b1", "sku", 2)
	for range 2 {
		_, err := inv.Deduct(ctx, o)
		require.NoError(t, err)
	}
	_, err := inv.Deduct(ctx, order("o2", "b1", "sku", 11))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{order("o3", "b1", "sku", 1), o}) {
		require.NoError(t, r.Err)
	}
	held := order("o4", "b1", "sku", 3)
	_, err = inv.Reserve(ctx, held, time.Minute)
	require.NoError(t, err)
	for range 2 {
		_, err = inv.ConfirmPartial(ctx, held, []stock.Item{{SKU: "sku", Qty: 2}})
		require.NoError(t, err)
	}

	got := map[string]int64{}
	for _, p := range rec.Metrics(t)["redkit.stock.units.sold"].(metricdata.Sum[int64]).DataPoints {
		op, _ := p.Attributes.Value("redkit.operation")
		got[op.AsString()] += p.Value
	}
	require.Equal(t, map[string]int64{"deduct": 3, "confirm": 2}, got)
	lv, err := inv.Level(ctx, "sku")
	require.NoError(t, err)
	require.EqualValues(t, 5, lv.Sold)
}

// A Deduct is one stock.deduct span, a child of the caller's, with the
// go-redis commands under it. On a server that has never seen the script
// the EVALSHA is answered NOSCRIPT and recovered from: no span is an error.
func TestSpanTree_Deduct(t *testing.T) {
	srv := redistest.New(t, redistest.Options{}) // an empty script cache
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	inv := mustNew(t, rdb, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = inv.Close() })
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's handshake, outside the trace
	require.NoError(t, inv.Create(t.Context(), "sku", 5))

	ctx, parent := rec.TracerProvider.Tracer("caller").Start(t.Context(), "POST /orders")
	_, err := inv.Deduct(ctx, order("o1", "b1", "sku", 1))
	require.NoError(t, err)
	parent.End()

	require.Equal(t, `POST /orders
  stock.deduct outcome=ok
    evalsha cache_miss
    eval
`, rec.Tree(t, "POST /orders"))

	// Once the script is cached: one command.
	ctx, parent = rec.TracerProvider.Tracer("caller").Start(t.Context(), "POST /orders again")
	_, err = inv.Deduct(ctx, order("o2", "b1", "sku", 1))
	require.NoError(t, err)
	parent.End()
	require.Equal(t, `POST /orders again
  stock.deduct outcome=ok
    evalsha
`, rec.Tree(t, "POST /orders again"))
}

// The background reclaimer is one stock.reclaim_batch root span per round,
// with a stock.reclaim span per call under it, not a root per SKU and
// call.
func TestSpanTree_reclaimRound(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	inv := mustNew(t, rdb, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider),
		stock.WithReclaimInterval(20*time.Millisecond))
	t.Cleanup(func() { _ = inv.Close() })
	require.NoError(t, rdb.Ping(t.Context()).Err())
	ctx, req := rec.TracerProvider.Tracer("caller").Start(t.Context(), "request")
	for _, sku := range []string{"a", "b"} {
		require.NoError(t, inv.Create(ctx, sku, 5))
		_, err := inv.Reserve(ctx, order("r-"+sku, "b1", sku, 1), time.Second)
		require.NoError(t, err)
	}
	req.End()
	require.Eventually(t, func() bool {
		lv, err := inv.Level(t.Context(), "b")
		return err == nil && lv.Reserved == 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, inv.Close())

	for _, s := range rec.Spans.Ended() {
		if s.Name() == "stock.reclaim" {
			require.True(t, s.Parent().IsValid(), "a stock.reclaim root span:\n%s", rec.Trees())
		}
	}
	tree := rec.Tree(t, "stock.reclaim_batch")
	require.Contains(t, tree, "stock.reclaim_batch link=request\n  stock.reclaim outcome=ok\n    evalsha", tree)
	// Every round is a root linked to the call that started the reclaimer.
	for _, s := range rec.Spans.Ended() {
		if s.Name() == "stock.reclaim_batch" {
			require.False(t, s.Parent().IsValid(), rec.Trees())
			require.Len(t, s.Links(), 1, rec.Trees())
			require.Equal(t, req.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID(), rec.Trees())
		}
	}
}

// Consume hands each batch to its handler under one stock.consume_batch
// root span, linked to the span of Consume's caller: the handler's own
// spans and the acknowledgement are its children.
func TestSpanTree_consumeBatch(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	inv := mustNew(t, rdb, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = inv.Close() })
	require.NoError(t, inv.Create(t.Context(), "sku", 5))
	tracer := rec.TracerProvider.Tracer("caller")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx, consumer := tracer.Start(ctx, "journal consumer")
	err := inv.Consume(ctx, stock.Consumer{Group: "db", Name: "c1", SKUs: []string{"sku"}, Poll: 10 * time.Millisecond},
		func(ctx context.Context, es []stock.Entry) error {
			_, span := tracer.Start(ctx, "db write")
			span.End()
			cancel()
			return nil
		})
	require.ErrorIs(t, err, context.Canceled)
	consumer.End()

	// The acknowledgement is consumed.lua, run for the first time on this
	// server: EVALSHA misses the script cache and EVAL follows.
	require.Equal(t, "stock.consume_batch outcome=ok link=journal consumer\n  db write\n  evalsha cache_miss\n  eval\n",
		rec.Tree(t, "stock.consume_batch"), rec.Trees())
}
