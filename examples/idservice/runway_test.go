package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/idgen"
)

// The names come from clients, so they are no attribute: every name's
// Segment reports into one redkit.idgen.runway series, whose value is the
// lowest runway of them all (the name running dry), not whichever Segment
// reported last.
func TestRunway_oneSeriesTheLowest(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		g, err := newGenerators(t.Context(), rdb, config{
			Service: fmt.Sprintf("test-%d", services.Add(1)), MaxNames: 4, LeaseTTL: idgen.DefaultLeaseTTL,
			Options: []idgen.Option{idgen.WithMeterProvider(mp)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		want := int64(-1)
		for i, name := range []string{"invoices", "shop-7/orders"} {
			s, err := g.segment(name)
			if err != nil {
				t.Fatal(err)
			}
			for range i + 1 {
				if _, err := s.Next(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if r := s.Runway(); want < 0 || r < want {
				want = r
			}
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(t.Context(), &rm); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "redkit.idgen.runway" {
					continue
				}
				for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					if name, ok := p.Attributes.Value(idgen.AttrSegment); ok {
						t.Errorf("a runway series names the segment %q", name.AsString())
					}
					got = append(got, fmt.Sprint(p.Value))
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint([]int64{want}) {
			t.Fatalf("runway series %v, want one: [%d]", got, want)
		}
	})
}
