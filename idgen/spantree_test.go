package idgen_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
)

// A Segment's range fetch runs in the background and outlives the Next
// that caused it: it is one idgen.fetch span per range, a root of its own
// linked to the span of the caller whose Next asked for it, with its
// go-redis command under it; never a child of an unrelated request, never
// an unlinked orphan when a caller's span is known.
func TestSpanTree_SegmentRefill(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	rec := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, rec.Providers()))
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's handshake, outside the traces
	seg, err := idgen.NewSegment(rdb, "tree", idgen.WithMinStep(10), idgen.WithMaxStep(10),
		idgen.WithTracerProvider(rec.TracerProvider), idgen.WithMeterProvider(rec.MeterProvider))
	require.NoError(t, err)
	defer seg.Close()
	tracer := rec.TracerProvider.Tracer("caller")

	// The first Next finds no range and waits for a fetch.
	ctx, first := tracer.Start(t.Context(), "first request")
	_, err = seg.Next(ctx)
	require.NoError(t, err)
	first.End()
	// Values 2..10 come from memory; one of them passes the prefetch
	// trigger, and the next range is fetched in the background.
	ctx, refill := tracer.Start(t.Context(), "refill request")
	for range 9 {
		_, err = seg.Next(ctx)
		require.NoError(t, err)
	}
	refill.End()
	require.Eventually(t, func() bool { return seg.Runway() > 0 && len(rec.Roots()) >= 4 }, 10*time.Second, time.Millisecond)

	trees := rec.Trees()
	_, got, _ := strings.Cut(trees, "first request\n")
	require.Equal(t, `idgen.fetch outcome=ok link=first request
  info
  evalsha cache_miss
  eval
refill request
idgen.fetch outcome=ok link=refill request
  evalsha
`, got, "all traces:\n%s", trees)
}
