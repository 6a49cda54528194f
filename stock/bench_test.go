package stock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
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

// serverMicros is the server time of the commands a client sent, in µs,
// from INFO commandstats: EVALSHA's alone when scripts ran (it includes the
// commands they call, which Redis also counts apart), else every command's
// but INFO and CONFIG.
func serverMicros(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total, scripts int64
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" || name == "cmdstat_config" {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
				if name == "cmdstat_evalsha" {
					scripts = n
				}
			}
		}
	}
	if scripts > 0 {
		return scripts
	}
	return total
}

// BenchmarkConsume_serverTime: the Redis time per journal entry of one
// consumer reading a journal in batches of 1 and of 100, each batch handed
// out and acknowledged: Consume's two scripts (consume.lua, consumed.lua)
// beside the commands a consumer that keeps no order across consumers
// sends (XAUTOCLAIM, XPENDING, XREADGROUP, XACK). Reports srv-µs/entry
// from INFO commandstats.
func BenchmarkConsume_serverTime(b *testing.B) {
	for _, batch := range []int64{1, 100} {
		for _, way := range []string{"consume.lua", "commands"} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, way), func(b *testing.B) {
				srv, err := redistest.Start(context.Background(), redistest.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = srv.Close() })
				rdb := srv.Client()
				b.Cleanup(func() { _ = rdb.Close() })
				ctx := context.Background()
				inv := mustNew(b, rdb, stock.WithReclaimInterval(0))
				b.Cleanup(func() { _ = inv.Close() })
				const sku = "bench/sku"
				if err := inv.Create(ctx, sku, 1<<53-1); err != nil {
					b.Fatal(err)
				}
				n := b.N * int(batch)
				for done := 0; done < n; done += 500 {
					var orders []stock.Order
					for i := done; i < min(done+500, n); i++ {
						orders = append(orders, stock.Order{ID: fmt.Sprintf("o%d", i), Buyer: "b", Items: []stock.Item{{SKU: sku, Qty: 1}}})
					}
					for _, r := range inv.DeductBatch(ctx, orders) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
				}
				journal := inv.JournalKeyForTest(sku)
				if err := rdb.XGroupCreate(ctx, journal, "g", "0").Err(); err != nil {
					b.Fatal(err)
				}
				if _, _, err := inv.NextEntriesForTest(ctx, sku, "warm", "c", 1, time.Minute); err == nil {
					b.Fatal("no group warm, yet no error")
				}
				_, _ = inv.ConsumedForTest(ctx, sku, "g", "c", []string{"0-1"}) // loads the script
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				entries := 0
				b.ResetTimer()
				for range b.N {
					var ids []string
					if way == "consume.lua" {
						ids, _, err = inv.NextEntriesForTest(ctx, sku, "g", "c", batch, time.Minute)
						if err == nil {
							_, err = inv.ConsumedForTest(ctx, sku, "g", "c", ids)
						}
					} else {
						_, _, err = rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: journal, Group: "g", Consumer: "c",
							MinIdle: time.Minute, Start: "0-0", Count: batch}).Result()
						if err == nil {
							if err = rdb.XPending(ctx, journal, "g").Err(); errors.Is(err, redis.Nil) {
								err = nil
							}
						}
						var res []redis.XStream
						if err == nil {
							res, err = rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c",
								Streams: []string{journal, ">"}, Count: batch, Block: -1}).Result()
						}
						if err == nil {
							for _, m := range res[0].Messages {
								ids = append(ids, m.ID)
							}
							err = rdb.XAck(ctx, journal, "g", ids...).Err()
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					entries += len(ids)
				}
				b.StopTimer()
				b.ReportMetric(float64(serverMicros(b, rdb))/float64(max(entries, 1)), "srv-µs/entry")
			})
		}
	}
}
