package pgjournal_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

func TestOpen_invalid(t *testing.T) {
	pool := sharedPG.Pool(t)
	for _, name := range []string{"", "Upper", "1abc", "a-b", "a;drop"} {
		if _, err := pgjournal.Open(t.Context(), pool, pgjournal.WithSchema(name)); !errors.Is(err, pgjournal.ErrInvalid) {
			t.Errorf("schema %q: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := pgjournal.Open(t.Context(), nil); !errors.Is(err, pgjournal.ErrInvalid) {
		t.Errorf("nil pool: %v, want ErrInvalid", err)
	}
}

// Several processes starting at once each apply the migrations; the
// advisory lock makes them take turns, so every one succeeds and each
// migration is recorded once.
func TestMigrate_concurrentOpen(t *testing.T) {
	f := shared(t) // a fresh schema, migrated once
	schema := f.schema + "_c"
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One pool each: separate sessions, like separate processes.
			pool := sharedPG.Pool(t)
			_, errs[i] = pgjournal.Open(context.Background(), pool, pgjournal.WithSchema(schema))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	f.schema = schema
	if got := f.int("SELECT count(*) FROM $S.schema_migrations"); got != 3 {
		t.Errorf("schema_migrations rows: %d, want one per migration (3)", got)
	}
}

func TestMigrate_refusesNewerSchema(t *testing.T) {
	f := shared(t)
	f.query("INSERT INTO $S.schema_migrations (version, name) VALUES (9999, 'future.sql')")
	_, err := pgjournal.Open(t.Context(), f.pool, pgjournal.WithSchema(f.schema))
	if !errors.Is(err, pgjournal.ErrSchemaTooNew) {
		t.Fatalf("open: %v, want ErrSchemaTooNew", err)
	}
}

func TestSinkStock_booksEveryEntryOnce(t *testing.T) {
	f := shared(t)
	skus := []string{"g/a", "g/b", "c"}
	stockWork(t, f.inv, "w1", 200, skus...)
	stop := runSink(t, f.stockSink(skus...))
	moreStockWork(t, f.inv, "w2", 200, skus...)
	f.drain(skus, nil, stop)
	f.checkBook(skus, nil)
	f.noAnomalies()
	// The projection is what Redis holds.
	for _, sku := range skus {
		lv, err := f.inv.Level(t.Context(), sku)
		if err != nil {
			t.Fatal(err)
		}
		r := f.query("SELECT available, reserved, sold, refunded FROM $S.stock_sku_levels WHERE sku = $1", sku)
		if got := []any{lv.Available, lv.Reserved, lv.Sold, lv.Refunded}; len(r) != 1 || !equalAny(r[0], got) {
			t.Errorf("%s: book %v, Redis %v", sku, r, got)
		}
	}
}

func TestSinkWallet_booksEveryEntryOnce(t *testing.T) {
	f := shared(t)
	accounts := []string{"w/alice", "w/bob", "w/carol"}
	walletWork(t, f.led, "w1", 200, accounts...)
	stop := runSink(t, f.walletSink(accounts...))
	moreWalletWork(t, f.led, "w2", 200, accounts...)
	f.drain(nil, accounts, stop)
	f.checkBook(nil, accounts)
	f.noAnomalies()
	for _, a := range accounts {
		bal, err := f.led.Balance(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		r := f.query("SELECT posted, held FROM $S.wallet_balances WHERE account = $1", a)
		if got := []any{bal.Posted, bal.Held}; len(r) != 1 || !equalAny(r[0], got) {
			t.Errorf("%s: book %v, Redis %v", a, r, got)
		}
	}
}

// Entries the sink has not booked yet are lag, not drift.
func TestReconcile_lagIsNotDrift(t *testing.T) {
	f := shared(t)
	stockWork(t, f.inv, "lag", 50, "lag")
	walletWork(t, f.led, "lag", 50, "l/a", "l/b")
	if ds := f.reconcileStock("lag"); len(ds) != 0 {
		t.Fatalf("stock drift before any booking: %+v", ds)
	}
	if ds := f.reconcileWallet("l/a", "l/b"); len(ds) != 0 {
		t.Fatalf("wallet drift before any booking: %+v", ds)
	}
}

func equalAny(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSinks_invalidInput(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	if _, err := pgjournal.Open(ctx, f.pool, pgjournal.WithSchema(f.schema), pgjournal.WithMaxBackoff(0)); !errors.Is(err, pgjournal.ErrInvalid) {
		t.Errorf("max backoff 0: %v, want ErrInvalid", err)
	}
	for name, err := range map[string]error{
		"nil inventory": f.book.SinkStock(ctx, nil, stock.Consumer{Group: "g", Name: "n", SKUs: []string{"a"}}),
		"nil ledger":    f.book.SinkWallet(ctx, nil, pgjournal.WalletSource{Accounts: []string{"a"}}),
		"no accounts":   f.book.SinkWallet(ctx, f.led, pgjournal.WalletSource{}),
		"big batch":     f.book.SinkWallet(ctx, f.led, pgjournal.WalletSource{Accounts: []string{"a"}, Batch: wallet.MaxPage + 1}),
	} {
		if !errors.Is(err, pgjournal.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := f.book.SinkStock(ctx, f.inv, stock.Consumer{Group: "g", Name: "n"}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("consumer without SKUs: %v, want stock.ErrInvalid", err)
	}
	if err := f.book.SinkWallet(ctx, f.led, pgjournal.WalletSource{Accounts: []string{"bad{name}"}}); !errors.Is(err, wallet.ErrInvalid) {
		t.Errorf("malformed account: %v, want wallet.ErrInvalid", err)
	}
	if n := f.int("SELECT count(*) FROM $S.wallet_balances") + f.int("SELECT count(*) FROM $S.stock_levels"); n != 0 {
		t.Errorf("invalid calls wrote %d rows", n)
	}
}
