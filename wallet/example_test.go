package wallet_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

func Example() {
	ctx := context.Background()
	srv, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	led, err := wallet.New(srv.Client())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer led.Close()
	for _, acct := range []string{"shop-7/alice", "shop-7/till"} {
		if err := led.Open(ctx, acct, wallet.WithCurrency("CNY")); err != nil {
			fmt.Println(err)
			return
		}
	}

	// The caller chooses the transaction ID, typically from its own request
	// (an Idempotency-Key header, an order number).
	res, _ := led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
	fmt.Println("credited, posted:", res.Balance.Posted)

	// Sending the same transaction again changes nothing and returns the
	// first result.
	res, _ = led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
	fmt.Println("again, replayed:", res.Replayed, "posted:", res.Balance.Posted)

	res, _ = led.Transfer(ctx, wallet.Transfer{ID: "order-9", From: "shop-7/alice", To: "shop-7/till", Amount: 1999})
	fmt.Println("paid, alice:", res.Balance.Posted, "till:", res.To.Posted)

	_, err = led.Debit(ctx, wallet.Tx{ID: "order-10", Account: "shop-7/alice", Amount: 9999})
	fmt.Println("too much:", errors.Is(err, wallet.ErrInsufficientFunds))

	fmt.Println("verified:", led.Verify(ctx, "shop-7/alice") == nil)
	// Output:
	// credited, posted: 5000
	// again, replayed: true posted: 5000
	// paid, alice: 3001 till: 1999
	// too much: true
	// verified: true
}

func ExampleLedger_Entries() {
	ctx := context.Background()
	led, stop := exampleLedger()
	defer stop()
	_ = led.Open(ctx, "bob", wallet.WithCurrency("EUR"))
	for i := 1; i <= 3; i++ {
		_, _ = led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c%d", i), Account: "bob", Amount: int64(i * 100)})
	}
	cursor := ""
	for {
		page, next, err := led.Entries(ctx, "bob", cursor, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, e := range page {
			fmt.Printf("%-6s %-3s %+5d -> %d\n", e.Kind, e.TxID, e.Delta, e.Posted)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	// Output:
	// open          +0 -> 0
	// credit c1   +100 -> 100
	// credit c2   +200 -> 300
	// credit c3   +300 -> 600
}

func ExampleLedger_Checkpoint() {
	ctx := context.Background()
	led, stop := exampleLedger()
	defer stop()
	_ = led.Open(ctx, "carol", wallet.WithCurrency("USD"))
	_, _ = led.Credit(ctx, wallet.Tx{ID: "c1", Account: "carol", Amount: 700})
	_, trimmed, _ := led.Checkpoint(ctx, "carol")
	_, _ = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "carol", Amount: 200})
	fmt.Println("trimmed:", trimmed, "verified:", led.Verify(ctx, "carol") == nil)
	// Output: trimmed: 2 verified: true
}

// exampleLedger starts a throwaway redis-server and a Ledger on it, as Example
// does; stop closes both.
func exampleLedger() (led *wallet.Ledger, stop func()) {
	srv, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		panic(err)
	}
	led, err = wallet.New(srv.Client())
	if err != nil {
		srv.Close()
		panic(err)
	}
	return led, func() { led.Close(); srv.Close() }
}
