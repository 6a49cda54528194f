package stock_test

import (
	"testing"

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
	inv := stock.New(rdb, stock.WithTracerProvider(rec.TracerProvider), stock.WithMeterProvider(rec.MeterProvider))
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
