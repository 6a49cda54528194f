package otelx_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redkit-go/redkit/otelx"
)

// A timed span that no SDK records (a no-op tracer beside a real meter)
// still records its duration under the outcome End names, and under the
// same attribute set as a recording span would.
func TestStartTimed_nonRecordingSpanKeepsOutcome(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("scope-t")
	h, err := otelx.DurationHistogram(m, "redkit.test.duration", "test")
	require.NoError(t, err)
	tr := noop.NewTracerProvider().Tracer("t")

	_, span := otelx.StartTimed(t.Context(), tr, "stock.deduct", "checkout", h, "deduct")
	require.False(t, span.IsRecording())
	otelx.End(span, otelx.OutcomeSoldOut, nil)
	_, span = otelx.StartTimed(t.Context(), tr, "stock.deduct", "", h, "deduct")
	otelx.End(span, "", nil)

	got := collect(t, reader)["scope-t/redkit.test.duration"].Data.(metricdata.Histogram[float64])
	var sets []map[string]string
	for _, p := range got.DataPoints {
		sets = append(sets, attrs(p.Attributes.ToSlice()))
	}
	require.ElementsMatch(t, []map[string]string{
		{otelx.AttrOperation: "deduct", otelx.AttrOutcome: otelx.OutcomeSoldOut, otelx.AttrLabel: "checkout"},
		{otelx.AttrOperation: "deduct"},
	}, sets)
}

// OpAttrs hands out one set per operation, outcome and label, built once.
func TestOpAttrs(t *testing.T) {
	a := otelx.OpAttrs("deduct", otelx.OutcomeOK, "checkout")
	require.Same(t, a, otelx.OpAttrs("deduct", otelx.OutcomeOK, "checkout"))
	require.NotSame(t, a, otelx.OpAttrs("deduct", otelx.OutcomeOK, ""))
	require.Len(t, a.Add, 1)
	require.Len(t, a.Record, 1)

	reader := sdkmetric.NewManualReader()
	c, err := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("scope-a").Int64Counter("redkit.test.ops")
	require.NoError(t, err)
	c.Add(t.Context(), 2, a.Add...)
	c.Add(t.Context(), 1, otelx.OpAttrs("deduct", "", "").Add...)
	sum := collect(t, reader)["scope-a/redkit.test.ops"].Data.(metricdata.Sum[int64])
	got := map[int64]map[string]string{}
	for _, p := range sum.DataPoints {
		got[p.Value] = attrs(p.Attributes.ToSlice())
	}
	require.Equal(t, map[int64]map[string]string{
		2: {otelx.AttrOperation: "deduct", otelx.AttrOutcome: otelx.OutcomeOK, otelx.AttrLabel: "checkout"},
		1: {otelx.AttrOperation: "deduct"},
	}, got)
}
