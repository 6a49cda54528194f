package idgen_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
)

// Generator names, service names and issued IDs never reach telemetry: not
// the package's own spans and metrics, and not go-redis command traces
// switched on with otelx.InstrumentRedis.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	tel := otelxtest.New(t)
	tp, mp := tel.TracerProvider, tel.MeterProvider
	rdb := redistest.New(t, redistest.Options{}).Client()
	require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
	ctx := t.Context()
	opts := []idgen.Option{idgen.WithTracerProvider(tp), idgen.WithMeterProvider(mp)}

	const name = "zq-tenant/zq-orders"
	require.NoError(t, rdb.Set(ctx, "redkit:idgen:v1:{zq-tenant}:seq:"+name, 4242424, 0).Err())
	seq, err := idgen.NewSequence(rdb, name, opts...)
	require.NoError(t, err)
	id, err := seq.Next(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, id)
	seg, err := idgen.NewSegment(rdb, name+"-seg", append(opts, idgen.WithMinStep(1000))...)
	require.NoError(t, err)
	segID, err := seg.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "zq-service", opts...)
	require.NoError(t, err)
	sfID, err := sf.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, sf.Close())

	tel.RequireRecorded(t, "idgen.fetch", "evalsha", "redkit.idgen") // the scan sees what was recorded
	tel.RequireNoSecrets(t, "zq-", id.String(), sfID.String(), sfID.Base32())
	_ = segID // a segment's first ID is 1: too short to search for
}
