package stock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

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
	for _, sku := range []string{"a", "b"} {
		require.NoError(t, inv.Create(t.Context(), sku, 5))
		_, err := inv.Reserve(t.Context(), order("r-"+sku, "b1", sku, 1), time.Second)
		require.NoError(t, err)
	}
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
	require.Contains(t, tree, "stock.reclaim_batch\n  stock.reclaim outcome=ok\n    evalsha", tree)
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

	require.Equal(t, "stock.consume_batch outcome=ok link=journal consumer\n  db write\n  xack\n",
		rec.Tree(t, "stock.consume_batch"), rec.Trees())
}
