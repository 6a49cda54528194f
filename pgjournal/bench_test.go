package pgjournal_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// BenchmarkSinkStock_hotSKU measures how fast the sink books one hot SKU's
// journal (entries/s) at several batch sizes; compare with
// BenchmarkDeduct_hotSKU in the same run: the sink must book faster than a
// flash sale deducts, or the book falls further behind.
func BenchmarkSinkStock_hotSKU(b *testing.B) {
	for _, batch := range []int64{100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			f := shared(b)
			ctx := context.Background()
			sku := f.hotSKU("bench/hot")
			orders := make([]stock.Order, 0, 500)
			for i := 0; i < b.N; i++ {
				orders = append(orders, hotOrder(sku, int64(i)))
				if len(orders) == cap(orders) || i == b.N-1 {
					for _, r := range f.inv.DeductBatch(ctx, orders) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					orders = orders[:0]
				}
			}
			want := int64(b.N + 1) // and the create entry
			b.ResetTimer()
			start := time.Now()
			stop := runSink(b, func(ctx context.Context) error {
				return f.book.SinkStock(ctx, f.inv, stock.Consumer{Group: "book", Name: "sink", SKUs: []string{sku},
					Batch: batch, Poll: time.Millisecond})
			})
			for {
				var n int64
				if err := f.pool.QueryRow(ctx, "SELECT coalesce(sum(entries), 0)::bigint FROM "+f.schema+".stock_levels WHERE sku = $1", sku).Scan(&n); err != nil {
					b.Fatal(err)
				}
				if n >= want {
					break
				}
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if err := stop(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
		})
	}
}

// BenchmarkDeduct_hotSKU is the flash-sale rate the sink must outrun: 64
// buyers deducting one unit of one SKU at a time.
func BenchmarkDeduct_hotSKU(b *testing.B) {
	f := shared(b)
	sku := f.hotSKU("bench/hot")
	start := time.Now()
	deductHot(b, f.inv, sku)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}

// hotSKU creates sku with more units than any run sells.
func (f *fixture) hotSKU(sku string) string {
	f.t.Helper()
	if err := f.inv.Create(context.Background(), sku, 1<<40); err != nil {
		f.t.Fatal(err)
	}
	return sku
}

// hotOrder is buyer i%1000's order i of one unit of sku.
func hotOrder(sku string, i int64) stock.Order {
	return stock.Order{ID: fmt.Sprintf("o%d", i), Buyer: fmt.Sprintf("u%d", i%1000), Items: []stock.Item{{SKU: sku, Qty: 1}}}
}

// deductHot has 64 buyers deduct one unit of sku at a time, b.N orders in
// all.
func deductHot(b *testing.B, inv *stock.Inventory, sku string) {
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := inv.Deduct(ctx, hotOrder(sku, seq.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReconcileWallet measures reconciling accounts whose book is up
// to date, one account per op (the sequential calls it makes: two balance
// reads and one journal read in Redis, two queries in PostgreSQL).
func BenchmarkReconcileWallet(b *testing.B) {
	f := shared(b)
	ctx := context.Background()
	const n = 200
	accounts := make([]string, n)
	for i := range accounts {
		accounts[i] = fmt.Sprintf("rb/a%d", i)
		if err := f.led.Open(ctx, accounts[i], wallet.WithCurrency("EUR")); err != nil {
			b.Fatal(err)
		}
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: "c" + accounts[i], Account: accounts[i], Amount: 10}); err != nil {
			b.Fatal(err)
		}
	}
	f.catchUp(nil, accounts)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ds, err := f.book.ReconcileWallet(ctx, f.led, accounts[i%n])
		if err != nil || len(ds) != 0 {
			b.Fatal(ds, err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "accounts/s")
}

// BenchmarkSinkStock_lagUnderSale runs the sink while 64 buyers deduct one
// hot SKU and reports the lag from an entry's append in Redis (its stream
// ID's time) to the start of the transaction that booked it, p50 and p99.
func BenchmarkSinkStock_lagUnderSale(b *testing.B) {
	f := shared(b)
	ctx := context.Background()
	sku := f.hotSKU("lag/hot")
	stop := runSink(b, func(ctx context.Context) error {
		return f.book.SinkStock(ctx, f.inv, stock.Consumer{Group: "book", Name: "sink", SKUs: []string{sku},
			Batch: 500, Poll: time.Millisecond})
	})
	b.ResetTimer()
	deductHot(b, f.inv, sku)
	b.StopTimer()
	for {
		var n int64
		if err := f.pool.QueryRow(ctx, "SELECT entries FROM "+f.schema+".stock_levels WHERE sku = $1", sku).Scan(&n); err == nil && n >= int64(b.N)+1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	var p50, p99 float64
	if err := f.pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)
		FROM (SELECT extract(epoch FROM recorded_at) * 1000 - ms AS lag FROM `+f.schema+`.stock_entries WHERE sku = $1 AND kind = 'deduct') l`,
		sku).Scan(&p50, &p99); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(p50, "lag-p50-ms")
	b.ReportMetric(p99, "lag-p99-ms")
}
