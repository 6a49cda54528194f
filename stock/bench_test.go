package stock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// benchServer returns the shared server, or a fresh one with AOF on and the
// given appendfsync policy.
func benchServer(b *testing.B, fsync string) *redistest.Server {
	if fsync == "" {
		return shared
	}
	s, err := redistest.Start(context.Background(), redistest.Options{AOF: true, AppendFsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// hotSKU creates a SKU "hot" that never sells out under a fresh prefix on
// srv and sets the benchmark up for callers concurrent goroutines. The
// returned counter counts round trips from the start of the measurement.
func hotSKU(b *testing.B, srv *redistest.Server, callers int) (*stock.Inventory, *roundTrips) {
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize = callers })
	rt := &roundTrips{}
	rdb.AddHook(rt)
	inv := mustNew(b, rdb, stock.WithKeyPrefix(fmt.Sprintf("bench%d", time.Now().UnixNano())))
	b.Cleanup(func() { _ = inv.Close() })
	if err := inv.Create(context.Background(), "hot", 1<<53-1); err != nil {
		b.Fatal(err)
	}
	// Load the deduct script before measuring.
	if _, err := inv.Deduct(context.Background(), stock.Order{ID: "warm-up", Buyer: "b", Items: []stock.Item{{SKU: "hot", Qty: 1}}}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	rt.n.Store(0)
	return inv, rt
}

// BenchmarkInventory_Deduct_hotSKU: 64 buyers deduct one unit each from one
// SKU whose stock never runs out. Reports deductions/s and round trips per
// deduction, without AOF and with AOF everysec and always.
func BenchmarkInventory_Deduct_hotSKU(b *testing.B) {
	for _, fsync := range []string{"", "everysec", "always"} {
		name := "aof=off"
		if fsync != "" {
			name = "aof=" + fsync
		}
		b.Run(name, func(b *testing.B) {
			inv, rt := hotSKU(b, benchServer(b, fsync), 64)
			deductParallel(b, inv)
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "RT/op")
		})
	}
}

// deductParallel runs b.N one-unit deductions of SKU "hot", each goroutine
// a buyer of its own, and reports deductions/s.
func deductParallel(b *testing.B, inv *stock.Inventory) {
	ctx := context.Background()
	var seq atomic.Int64
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		buyer := fmt.Sprintf("buyer-%d", seq.Add(1))
		for pb.Next() {
			o := stock.Order{ID: fmt.Sprintf("o-%d", seq.Add(1)), Buyer: buyer, Items: []stock.Item{{SKU: "hot", Qty: 1}}}
			if _, err := inv.Deduct(ctx, o); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deductions/s")
}

// BenchmarkInventory_DeductBatch_hotSKU: 4 callers each send batches of 100
// orders for one hot SKU. b.N counts orders.
func BenchmarkInventory_DeductBatch_hotSKU(b *testing.B) {
	const batch = 100
	inv, rt := hotSKU(b, shared, 4)
	ctx := context.Background()
	var seq atomic.Int64
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		orders := make([]stock.Order, 0, batch)
		flush := func() {
			for _, r := range inv.DeductBatch(ctx, orders) {
				if r.Err != nil {
					b.Error(r.Err)
				}
			}
			orders = orders[:0]
		}
		for pb.Next() {
			n := seq.Add(1)
			orders = append(orders, stock.Order{ID: fmt.Sprintf("o-%d", n), Buyer: fmt.Sprintf("b-%d", n%1000),
				Items: []stock.Item{{SKU: "hot", Qty: 1}}})
			if len(orders) == batch {
				flush()
			}
		}
		if len(orders) > 0 {
			flush()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deductions/s")
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "RT/op")
}

// BenchmarkInventory_Deduct_clusterBuckets: 64 buyers on a loopback
// 3-master Cluster, one hot SKU kept whole (buckets=1, one node does the
// work) or split into 6 buckets (spread over the three nodes).
func BenchmarkInventory_Deduct_clusterBuckets(b *testing.B) {
	c := redistest.NewCluster(b, redistest.ClusterOptions{Masters: 3})
	for _, buckets := range []int{1, 6} {
		b.Run(fmt.Sprintf("buckets=%d", buckets), func(b *testing.B) {
			rdb := c.Client(func(o *redis.ClusterOptions) { o.PoolSize = 64 })
			inv := mustNew(b, rdb, stock.WithKeyPrefix(fmt.Sprintf("bench%d", time.Now().UnixNano())))
			b.Cleanup(func() { _ = inv.Close() })
			ctx := context.Background()
			if err := inv.Create(ctx, "hot", 1<<53-1, stock.WithBuckets(buckets)); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			deductParallel(b, inv)
		})
	}
}
