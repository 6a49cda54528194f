package stock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redkit-go/redkit/stock"
)

// Consumer names used once do not stay in the journal's group: a running
// Consume removes the other consumers idle past ForgetIdle with nothing
// pending, and keeps one whose entries are still pending.
func TestRegress_journalIdleConsumersRemoved(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 100))
	journal := prefix + ":stock:v1:{sku}:journal:sku"
	deduct := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := inv.Deduct(ctx, order("o"+strconv.Itoa(i), "u", "sku", 1))
			require.NoError(t, err)
		}
	}
	// A consumer that handles what it reads, then stops.
	runOnce := func(name string) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err := inv.Consume(cctx, stock.Consumer{Group: "g", Name: name, SKUs: []string{"sku"}, Poll: 5 * time.Millisecond},
			func(context.Context, []stock.Entry) error { cancel(); return nil })
		require.ErrorIs(t, err, context.Canceled)
	}
	deduct(0, 3)
	runOnce("pod-1")
	deduct(3, 6)
	runOnce("pod-2")
	deduct(6, 9)
	// A consumer that crashed with its entries pending.
	err := inv.Consume(ctx, stock.Consumer{Group: "g", Name: "pod-crashed", SKUs: []string{"sku"}},
		func(context.Context, []stock.Entry) error { return errors.New("crash") })
	require.ErrorContains(t, err, "crash")
	names := func() []string {
		cs, err := rdb.XInfoConsumers(ctx, journal, "g").Result()
		require.NoError(t, err)
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"pod-1", "pod-2", "pod-crashed"}, names())

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- inv.Consume(cctx, stock.Consumer{Group: "g", Name: "pod-live", SKUs: []string{"sku"},
			Poll: 5 * time.Millisecond, MinIdle: time.Hour, ForgetIdle: 200 * time.Millisecond},
			func(context.Context, []stock.Entry) error { return nil })
	}()
	// pod-live waits behind pod-crashed's entries (taken over after an
	// hour), so it has read nothing and is not in the group yet itself.
	require.Eventually(t, func() bool { return slices.Equal(names(), []string{"pod-crashed"}) },
		10*time.Second, 20*time.Millisecond, "idle consumers stay in the group")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	p, err := rdb.XPending(ctx, journal, "g").Result()
	require.NoError(t, err)
	require.Equal(t, int64(3), p.Count, "the crashed consumer's entries are still pending")
}

// An abandoned consumer group holds back Trim for the holdback at most:
// past it, the entries behind the last checkpoint are trimmed, the group
// is counted in redkit.stock.journal.overrun, and the group's consumer,
// back, skips the trimmed entries it had pending.
func TestRegress_abandonedGroupHoldsTrimBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inv, rdb, prefix := newInventory(t, stock.WithMeterProvider(mp))
	inv.SetJournalHoldbackForTest(300 * time.Millisecond)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 100))
	journal := prefix + ":stock:v1:{sku}:journal:sku"
	for i := range 5 {
		_, err := inv.Deduct(ctx, order("o"+strconv.Itoa(i), "u", "sku", 1))
		require.NoError(t, err)
	}
	// The group reads the first entries and is abandoned with them pending.
	err := inv.Consume(ctx, stock.Consumer{Group: "abandoned", Name: "c", SKUs: []string{"sku"}, Batch: 3},
		func(context.Context, []stock.Entry) error { return errors.New("gone") })
	require.ErrorContains(t, err, "gone")
	overrun := func() int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		var n int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "redkit.stock.journal.overrun" {
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						n += dp.Value
					}
				}
			}
		}
		return n
	}

	ckpt, err := inv.Checkpoint(ctx, "sku")
	require.NoError(t, err)
	n, err := inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Zero(t, n, "entries younger than the holdback are kept for the group")
	require.Zero(t, overrun())

	time.Sleep(400 * time.Millisecond) // the entries pass the holdback
	n, err = inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, int64(6), n, "creation and 5 deductions, behind the checkpoint")
	first, _, err := inv.Entries(ctx, "sku", "", 1)
	require.NoError(t, err)
	require.Equal(t, ckpt, first[0].ID)
	require.Equal(t, int64(1), overrun())
	audited(t, inv, "sku")

	// The abandoned consumer comes back: its trimmed pending entries are
	// acknowledged without being handed over, then it reads on.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got []stock.Entry
	err = inv.Consume(cctx, stock.Consumer{Group: "abandoned", Name: "c", SKUs: []string{"sku"}, Poll: 5 * time.Millisecond},
		func(_ context.Context, es []stock.Entry) error {
			got = append(got, es...)
			if len(got) > 0 && got[len(got)-1].ID == ckpt {
				cancel()
			}
			return nil
		})
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, got)
	for _, e := range got {
		require.NotEmpty(t, e.Kind, "a trimmed entry was handed over: %+v", e)
	}
	p, err := rdb.XPending(ctx, journal, "abandoned").Result()
	require.NoError(t, err)
	require.Zero(t, p.Count)
}
