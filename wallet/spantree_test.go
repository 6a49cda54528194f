package wallet_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// A Transfer across slot groups is one wallet.transfer span, a child of
// the caller's, with every step's go-redis command under it; scripts the
// server had not cached yet are recovered from without an error span.
func TestSpanTree_TransferAcrossGroups(t *testing.T) {
	srv := redistest.New(t, redistest.Options{}) // an empty script cache
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	led := mustNew(t, rdb, wallet.WithTracerProvider(rec.TracerProvider), wallet.WithMeterProvider(rec.MeterProvider))
	t.Cleanup(func() { _ = led.Close() })
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's handshake, outside the trace
	openFunded(t, led, map[string]int64{"a/src": 100, "b/dst": 0})

	ctx, parent := rec.TracerProvider.Tracer("caller").Start(t.Context(), "POST /transfers")
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30})
	require.NoError(t, err)
	parent.End()

	// The steps (reads, each group's script, the hold's expiry) are the
	// Ledger's to change; the shape is not: the caller's span, one
	// wallet.transfer under it, every command under that, none an error,
	// and every script-cache miss followed by the EVAL that recovers it.
	tree := rec.Tree(t, "POST /transfers")
	lines := strings.Split(strings.TrimSuffix(tree, "\n"), "\n")
	require.Equal(t, []string{"POST /transfers", "  wallet.transfer outcome=ok"}, lines[:2], tree)
	misses := 0
	for i, l := range lines[2:] {
		require.True(t, strings.HasPrefix(l, "    "), "not under wallet.transfer: %q\n%s", l, tree)
		require.False(t, strings.HasPrefix(strings.TrimSpace(l), "wallet."), "a second wallet span: %q\n%s", l, tree)
		require.NotContains(t, l, "ERROR", tree)
		if strings.HasSuffix(l, "cache_miss") {
			misses++
			require.Equal(t, "    eval", lines[2+i+1], tree)
		}
	}
	require.GreaterOrEqual(t, misses, 2, "both groups' scripts were new to the server\n%s", tree)
}
