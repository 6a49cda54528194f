package redisconn_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// The embedded Redis runs the libraries' scripts in another Lua (gopher-lua),
// which differs from Redis's in small ways. These tests run the paths where
// it once gave other answers, so the zero-setup default keeps working.

// A SKU split into buckets refills a buyer's empty home bucket from the
// other one. (A multiple assignment that read and negated the same variable
// sent a negative quantity in gopher-lua.)
func TestEmbedded_stockBucketRefill(t *testing.T) {
	c := open(t, "")
	ctx := t.Context()
	inv, err := stock.New(c.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	if err := inv.Create(ctx, "hot", 10, stock.WithBuckets(2)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // one buyer, one home bucket: the second half comes from the other
		_, err := inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("o-%d", i), Buyer: "u-1",
			Items: []stock.Item{{SKU: "hot", Qty: 1}}})
		if err != nil {
			t.Fatalf("order %d of 10: %v", i, err)
		}
	}
	rep, err := inv.Audit(ctx, "hot")
	if err != nil || !rep.OK() || rep.Levels.Sold != 10 {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
}

// Wallet journal entries and replayed results carry the real balances.
// (string.format('%.0f', s) of a decimal string gave garbage in gopher-lua.)
func TestEmbedded_walletBalances(t *testing.T) {
	c := open(t, "")
	ctx := t.Context()
	led, err := wallet.New(c.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	if err := led.Open(ctx, "g/alice", wallet.WithCurrency("EUR")); err != nil {
		t.Fatal(err)
	}
	credit := wallet.Tx{ID: "c-1", Account: "g/alice", Amount: 100}
	first, err := led.Credit(ctx, credit)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := led.Hold(ctx, wallet.HoldReq{ID: "h-1", Account: "g/alice", Amount: 30, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if want := (wallet.Balance{Posted: 100, Held: 30, Available: 70}); !sameBalance(hold.Balance, want) {
		t.Fatalf("hold: balance %+v, want %+v", hold.Balance, want)
	}
	if _, err := led.Credit(ctx, wallet.Tx{ID: "c-2", Account: "g/alice", Amount: 10}); err != nil {
		t.Fatal(err)
	}
	again, err := led.Credit(ctx, credit)
	if err != nil || !again.Replayed || !sameBalance(again.Balance, first.Balance) {
		t.Fatalf("replay: %+v, %v; first %+v", again, err, first)
	}
	if err := led.Verify(ctx, "g/alice"); err != nil {
		t.Fatal(err)
	}
}

func sameBalance(a, b wallet.Balance) bool {
	return a.Posted == b.Posted && a.Held == b.Held && a.Available == b.Available
}
