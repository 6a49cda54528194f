package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Transfers across slot groups post in steps (hold, then credit and
// post); each step's entry chains with the one before, so the book sees no
// gap and no drift.
func TestSinkWallet_crossGroupTransfers(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"cg1/a", "cg2/b", "cg3/c"}
	for _, a := range accounts {
		if err := f.led.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: "seed-" + a, Account: a, Amount: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	stop := runSink(t, f.walletSink(accounts...))
	for i := range 30 {
		from, to := accounts[i%3], accounts[(i+1)%3]
		if _, err := f.led.Transfer(ctx, wallet.Transfer{ID: fmt.Sprintf("x%d", i), From: from, To: to, Amount: int64(1 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	f.drain(nil, accounts, stop)
	f.checkBook(nil, accounts)
	f.noAnomalies()
}

// A hot SKU split into buckets: Consume hands over every bucket's journal,
// transfers between buckets chain within each, and once the sink caught up
// the projection summed over the buckets is the SKU's level.
func TestSinkStock_buckets(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	sku := "bk/hot"
	if err := f.inv.Create(ctx, sku, 40, stock.WithBuckets(4)); err != nil {
		t.Fatal(err)
	}
	stop := runSink(t, f.stockSink(sku))
	for i := range 60 {
		_, err := f.inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("o%d", i), Buyer: fmt.Sprintf("b%d", i),
			Items: []stock.Item{{SKU: sku, Qty: 1}}})
		if err != nil && !errors.Is(err, stock.ErrSoldOut) {
			t.Fatal(err)
		}
	}
	waitFor(t, "the book to hold every bucket's entries", func() bool {
		ds, err := f.book.ReconcileStock(context.Background(), f.inv, sku)
		return err == nil && len(ds) == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.checkStock(nil, sku)
	f.noAnomalies()
	if n := f.int("SELECT count(DISTINCT bucket) FROM $S.stock_entries WHERE sku = $1", sku); n < 2 {
		t.Fatalf("entries of %d buckets booked, want several", n)
	}
}
