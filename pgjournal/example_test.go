package pgjournal_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

func Example() {
	ctx := context.Background()
	// A real PostgreSQL and Redis for the example; a service passes its
	// DATABASE_URL to pgxpool.New and its own Redis client.
	pg, err := pgtest.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer pg.Close()
	rs, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	rdb := rs.Client()
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	book, err := pgjournal.Open(ctx, pool) // applies the migrations
	if err != nil {
		panic(err)
	}
	led, err := wallet.New(rdb)
	if err != nil {
		panic(err)
	}
	defer led.Close()
	_ = led.Open(ctx, "shop/alice", wallet.WithCurrency("EUR"))
	_, _ = led.Credit(ctx, wallet.Tx{ID: "top-up-1", Account: "shop/alice", Amount: 500})
	_, _ = led.Debit(ctx, wallet.Tx{ID: "order-1", Account: "shop/alice", Amount: 120})

	// The sink runs until its context ends; a service runs it for its life.
	sinkCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- book.SinkWallet(sinkCtx, led, pgjournal.WalletSource{Accounts: []string{"shop/alice"}, Poll: 10 * time.Millisecond})
	}()
	var posted, entries int64
	for entries < 3 { // open, credit, debit
		time.Sleep(10 * time.Millisecond)
		_ = pool.QueryRow(ctx, "SELECT posted, entries FROM pgjournal.wallet_balances WHERE account = 'shop/alice'").Scan(&posted, &entries)
	}
	stop()
	<-done
	fmt.Println("book: posted", posted, "from", entries, "entries")

	drift, err := book.ReconcileWallet(ctx, led, "shop/alice")
	fmt.Println("drift:", len(drift), err)
	// Output:
	// book: posted 380 from 3 entries
	// drift: 0 <nil>
}
