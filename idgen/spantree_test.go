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

// A leased Snowflake's renewals are background work: one
// idgen.lease.renew root span per renewal, linked to the
// idgen.lease.acquire span that leased the node.
func TestSpanTree_leaseRenewalLinksToAcquire(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rec := otelxtest.New(t)
	ctx, start := rec.TracerProvider.Tracer("caller").Start(t.Context(), "start-up")
	sf, err := idgen.NewLeasedSnowflake(ctx, srv.Client(), "tree", idgen.WithLeaseTTL(time.Second),
		idgen.WithTracerProvider(rec.TracerProvider), idgen.WithMeterProvider(rec.MeterProvider))
	require.NoError(t, err)
	start.End()
	require.Eventually(t, func() bool { return strings.Contains(rec.Trees(), "idgen.lease.renew") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, sf.Close())

	require.Equal(t, "start-up\n  idgen.lease.acquire outcome=ok\n", rec.Tree(t, "start-up"))
	for _, line := range strings.Split(rec.Trees(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "idgen.lease.renew") {
			require.Equal(t, "idgen.lease.renew outcome=ok link=idgen.lease.acquire", line, rec.Trees())
		}
	}
}
