package idgen_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
)

// Range fetches and node lease operations record their durations in
// seconds with otelx.DurationBuckets, by outcome (and operation).
func TestTelemetry_durations(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rec := otelxtest.New(t)
	opts := []idgen.Option{idgen.WithMeterProvider(rec.MeterProvider), idgen.WithTracerProvider(rec.TracerProvider)}
	seg, err := idgen.NewSegment(s.Client(), "d", append(opts, idgen.WithMinStep(10), idgen.WithMaxStep(10))...)
	require.NoError(t, err)
	_, err = seg.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	require.NotZero(t, rec.Durations(t, "redkit.idgen.range.fetch.duration")[" ok"])

	sf, err := idgen.NewLeasedSnowflake(t.Context(), s.Client(), "d", opts...)
	require.NoError(t, err)
	require.NoError(t, sf.Close())
	require.Equal(t, map[string]uint64{"acquire ok": 1, "release ok": 1},
		rec.Durations(t, "redkit.idgen.lease.operation.duration"))
}
