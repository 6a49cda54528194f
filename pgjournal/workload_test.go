package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// stockWork creates skus and runs n random operations on them: sales,
// reservations confirmed or cancelled, restocks, refunds. Business refusals
// are fine; they change nothing and journal nothing.
func stockWork(t testing.TB, inv *stock.Inventory, tag string, n int, skus ...string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range skus {
		if err := inv.Create(ctx, s, 50); err != nil {
			t.Fatal(err)
		}
	}
	moreStockWork(t, inv, tag, n, skus...)
}

func moreStockWork(t testing.TB, inv *stock.Inventory, tag string, n int, skus ...string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(len(tag)), uint64(n)))
	var sold []stock.Order
	for i := range n {
		sku := skus[rng.IntN(len(skus))]
		o := stock.Order{ID: fmt.Sprintf("%s-o%d", tag, i), Buyer: fmt.Sprintf("b%d", rng.IntN(5)),
			Items: []stock.Item{{SKU: sku, Qty: 1 + rng.Int64N(3)}}}
		var err error
		switch rng.IntN(6) {
		case 0, 1:
			_, err = inv.Deduct(ctx, o)
			if err == nil {
				sold = append(sold, o)
			}
		case 2:
			if _, err = inv.Reserve(ctx, o, time.Minute); err == nil {
				if rng.IntN(2) == 0 {
					_, err = inv.Confirm(ctx, o)
				} else {
					_, err = inv.Cancel(ctx, o)
				}
			}
		case 3:
			_, err = inv.Restock(ctx, o.ID, sku, 1+rng.Int64N(5))
		case 4:
			if len(sold) > 0 {
				k := rng.IntN(len(sold))
				_, err = inv.Refund(ctx, sold[k])
				sold = append(sold[:k], sold[k+1:]...)
			}
		case 5:
			_, err = inv.Deduct(ctx, o)
		}
		if err != nil && !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("stock op %d: %v", i, err)
		}
	}
}

// walletWork opens accounts (all in one slot group) and runs n random
// postings, transfers and holds.
func walletWork(t testing.TB, led *wallet.Ledger, tag string, n int, accounts ...string) {
	t.Helper()
	ctx := context.Background()
	for _, a := range accounts {
		if err := led.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			t.Fatal(err)
		}
	}
	moreWalletWork(t, led, tag, n, accounts...)
}

func moreWalletWork(t testing.TB, led *wallet.Ledger, tag string, n int, accounts ...string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(len(tag))+7, uint64(n)))
	type hold struct{ account, id string }
	var holds []hold
	for i := range n {
		a := accounts[rng.IntN(len(accounts))]
		id := fmt.Sprintf("%s-t%d", tag, i)
		amt := 1 + rng.Int64N(20)
		var err error
		switch rng.IntN(6) {
		case 0, 1:
			_, err = led.Credit(ctx, wallet.Tx{ID: id, Account: a, Amount: amt})
		case 2:
			_, err = led.Debit(ctx, wallet.Tx{ID: id, Account: a, Amount: amt})
		case 3:
			b := accounts[rng.IntN(len(accounts))]
			if b != a {
				_, err = led.Transfer(ctx, wallet.Transfer{ID: id, From: a, To: b, Amount: amt})
			}
		case 4:
			if _, err = led.Hold(ctx, wallet.HoldReq{ID: id, Account: a, Amount: amt, TTL: time.Hour}); err == nil {
				holds = append(holds, hold{a, id})
			}
		case 5:
			if len(holds) > 0 {
				k := rng.IntN(len(holds))
				h := holds[k]
				holds = append(holds[:k], holds[k+1:]...)
				if rng.IntN(2) == 0 {
					_, err = led.Capture(ctx, h.account, h.id, 1)
				} else {
					_, err = led.Void(ctx, h.account, h.id)
				}
			}
		}
		if err != nil && !errors.Is(err, wallet.ErrInsufficientFunds) {
			t.Fatalf("wallet op %d: %v", i, err)
		}
	}
}
