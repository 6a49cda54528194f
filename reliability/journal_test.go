package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// journal is one module's journal as the pager sees it: the IDs of a page
// of Entries and the next cursor.
type journal struct {
	name     string
	maxPage  int
	notFound error
	invalid  error
	// write appends n entries to the journal of key (creating it first).
	write func(ctx context.Context, key string, n int) error
	page  func(ctx context.Context, key, cursor string, limit int) ([]string, string, error)
}

// Entries pages the same way in stock and wallet: up to limit entries
// after a cursor, oldest first, the next cursor ("" at the end), the same
// bounds on limit and cursor, and not-found for a key that never existed.
func TestEntries_sameAcrossModules(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.New(t, redistest.Options{}).Client()
	inv, err := stock.New(rdb, stock.WithKeyPrefix("j"))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	led, err := wallet.New(rdb, wallet.WithKeyPrefix("j"), wallet.WithRecovery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	ids := func(n int, id func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id(i)
		}
		return out
	}
	for _, j := range []journal{
		{name: "stock", maxPage: stock.MaxPage, notFound: stock.ErrSKUNotFound, invalid: stock.ErrInvalid,
			write: func(ctx context.Context, sku string, n int) error {
				if err := inv.Create(ctx, sku, int64(n)); err != nil { // the first entry
					return err
				}
				for i := 1; i < n; i++ {
					if _, err := inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("o%d", i), Buyer: "b",
						Items: []stock.Item{{SKU: sku, Qty: 1}}}); err != nil {
						return err
					}
				}
				return nil
			},
			page: func(ctx context.Context, sku, cursor string, limit int) ([]string, string, error) {
				es, next, err := inv.Entries(ctx, sku, cursor, limit)
				return ids(len(es), func(i int) string { return es[i].ID }), next, err
			}},
		{name: "wallet", maxPage: wallet.MaxPage, notFound: wallet.ErrAccountNotFound, invalid: wallet.ErrInvalid,
			write: func(ctx context.Context, acct string, n int) error {
				if err := led.Open(ctx, acct, wallet.WithCurrency("EUR")); err != nil { // the first entry
					return err
				}
				for i := 1; i < n; i++ {
					if _, err := led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c%d", i), Account: acct, Amount: 1}); err != nil {
						return err
					}
				}
				return nil
			},
			page: func(ctx context.Context, acct, cursor string, limit int) ([]string, string, error) {
				es, next, err := led.Entries(ctx, acct, cursor, limit)
				return ids(len(es), func(i int) string { return es[i].ID }), next, err
			}},
	} {
		t.Run(j.name, func(t *testing.T) {
			if j.maxPage != 1000 {
				t.Errorf("MaxPage %d", j.maxPage)
			}
			if err := j.write(ctx, "g/k", 5); err != nil {
				t.Fatal(err)
			}
			all, next, err := j.page(ctx, "g/k", "", j.maxPage)
			if err != nil || len(all) != 5 || next != "" {
				t.Fatalf("one page: %d entries, next %q, %v; want 5, \"\"", len(all), next, err)
			}
			var paged []string
			cursor, pages := "", 0
			for {
				got, next, err := j.page(ctx, "g/k", cursor, 2)
				if err != nil {
					t.Fatal(err)
				}
				paged, pages = append(paged, got...), pages+1
				if next == "" {
					break
				}
				if next != got[len(got)-1] {
					t.Fatalf("next %q is not the page's last ID %q", next, got[len(got)-1])
				}
				cursor = next
			}
			if fmt.Sprint(paged) != fmt.Sprint(all) || pages != 3 {
				t.Fatalf("paged by 2: %v in %d pages, want %v in 3", paged, pages, all)
			}
			// A page that ends exactly at the newest entry has no cursor.
			if got, next, err := j.page(ctx, "g/k", all[2], 2); err != nil || len(got) != 2 || next != "" {
				t.Fatalf("last full page: %v %q %v", got, next, err)
			}
			for _, bad := range []struct {
				cursor string
				limit  int
			}{{"", 0}, {"", j.maxPage + 1}, {"-", 1}, {"(1-0", 1}, {"x", 1}} {
				if _, _, err := j.page(ctx, "g/k", bad.cursor, bad.limit); !errors.Is(err, j.invalid) {
					t.Errorf("cursor %q limit %d: %v, want ErrInvalid", bad.cursor, bad.limit, err)
				}
			}
			if _, _, err := j.page(ctx, "g/none", "", 10); !errors.Is(err, j.notFound) {
				t.Errorf("a key that never existed: %v, want not found", err)
			}
		})
	}
}
