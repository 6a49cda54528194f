package wallet_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// roundTrips counts commands and pipelines sent by a client, except the
// handshake of new connections.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd.Name()) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !handshake(cmds[0].Name()) {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// handshake reports commands go-redis sends when it sets up a connection.
func handshake(name string) bool {
	switch name {
	case "hello", "client", "ping", "auth", "select":
		return true
	}
	return false
}

// BenchmarkLedger_Debit_hotAccount: 64 goroutines debit one account, each
// debit with a fresh transaction ID. Reports debits/s and round trips per
// debit (1: one EVALSHA).
func BenchmarkLedger_Debit_hotAccount(b *testing.B) {
	ctx := context.Background()
	srv := redistest.New(b, redistest.Options{})
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 64 })
	rt := &roundTrips{}
	led := mustNew(b, rdb)
	if err := led.Open(ctx, "hot", wallet.WithCurrency("CNY"), wallet.WithOverdraft(1<<53-1)); err != nil {
		b.Fatal(err)
	}
	// Load the script and open 64 connections before measuring.
	var warm sync.WaitGroup
	for i := range 64 {
		warm.Go(func() {
			if _, err := led.Debit(ctx, wallet.Tx{ID: "warm" + strconv.Itoa(i), Account: "hot", Amount: 1}); err != nil {
				b.Error(err)
			}
		})
	}
	warm.Wait()
	rdb.AddHook(rt)
	var seq atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "d" + strconv.FormatInt(seq.Add(1), 10)
			if _, err := led.Debit(ctx, wallet.Tx{ID: id, Account: "hot", Amount: 1}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "debits/s")
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "RT/op")
}

// benchTransfers starts a server and a Ledger whose client keeps conns
// connections, opens 64 slot groups of two accounts each with a large
// balance, sets b.RunParallel to run about conns goroutines, and returns
// the Ledger and a function giving the next transfer, between the pair of
// one group, safe for concurrent use.
func benchTransfers(b *testing.B, conns int) (*wallet.Ledger, func() wallet.Transfer) {
	const groups = 64
	ctx := context.Background()
	srv := redistest.New(b, redistest.Options{})
	led := mustNew(b, srv.Client(func(o *redis.Options) { o.PoolSize = conns }))
	for g := range groups {
		for _, side := range []string{"a", "b"} {
			acct := "g" + strconv.Itoa(g) + "/" + side
			if err := led.Open(ctx, acct, wallet.WithCurrency("CNY"), wallet.WithOverdraft(1<<52)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	var seq atomic.Int64
	return led, func() wallet.Transfer {
		i := seq.Add(1)
		g := "g" + strconv.FormatInt(i%groups, 10)
		return wallet.Transfer{ID: "t" + strconv.FormatInt(i, 10), From: g + "/a", To: g + "/b", Amount: 1}
	}
}

// BenchmarkLedger_Transfer_many: 64 goroutines, one Transfer call each at a
// time, over 128 accounts. Compare with BenchmarkLedger_TransferBatch_many.
func BenchmarkLedger_Transfer_many(b *testing.B) {
	led, next := benchTransfers(b, 64)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := led.Transfer(context.Background(), next()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "transfers/s")
}

// BenchmarkLedger_TransferBatch_many: the same transfers sent 64 per
// TransferBatch from 8 goroutines; b.N counts transfers.
func BenchmarkLedger_TransferBatch_many(b *testing.B) {
	const batch = 64
	led, next := benchTransfers(b, 8)
	start := time.Now()
	var done atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		ts := make([]wallet.Transfer, 0, batch)
		flush := func() {
			for _, r := range led.TransferBatch(context.Background(), ts) {
				if r.Err != nil {
					b.Error(r.Err)
				}
			}
			done.Add(int64(len(ts)))
			ts = ts[:0]
		}
		for pb.Next() {
			if ts = append(ts, next()); len(ts) == batch {
				flush()
			}
		}
		if len(ts) > 0 {
			flush()
		}
	})
	b.ReportMetric(float64(done.Load())/time.Since(start).Seconds(), "transfers/s")
}
