package pgjournal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// The grants SECURITY.md lists for the sink's role are enough to open the
// book, run both sinks, reconcile, checkpoint a wallet account and run the
// repairs, and the role can neither delete nor
// rewrite booked entries nor change the schema.
func TestLeastPrivilegeRole(t *testing.T) {
	f := shared(t) // migrated by the owner
	role := f.schema + "_sink"
	s := f.schema
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + s + " TO " + role,
		"GRANT SELECT ON " + s + ".schema_migrations TO " + role,
		"GRANT SELECT, INSERT ON " + s + ".stock_entries, " + s + ".wallet_entries, " + s + ".anomalies TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON " + s + ".stock_levels, " + s + ".wallet_balances TO " + role,
		"GRANT USAGE ON SEQUENCE " + s + ".anomalies_id_seq TO " + role,
	} {
		f.query(q)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = f.pool.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = f.pool.Exec(ctx, "DROP ROLE "+role)
	})
	url := strings.Replace(sharedPG.URL(), "postgres://postgres@", "postgres://"+role+"@", 1)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	book, err := pgjournal.Open(t.Context(), pool, pgjournal.WithSchema(s))
	if err != nil {
		t.Fatalf("open as the sink role: %v", err)
	}
	owner := f.book
	f.book = book
	skus, accounts := []string{"lp/a"}, []string{"lp/x", "lp/y"}
	stockWork(t, f.inv, "lp", 30, skus...)
	walletWork(t, f.led, "lp", 30, accounts...)
	// A poison entry makes the sink write an anomaly too.
	f.rdb.XAdd(t.Context(), xaddPoison(f.journalKey("lp/a")))
	f.catchUp(skus, accounts)
	f.noDrift(skus, accounts)
	// The checkpoint helper and the repairs need no further grant.
	if _, err := f.led.Credit(t.Context(), wallet.Tx{ID: "lp-late", Account: "lp/x", Amount: 3}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := book.CheckpointWallet(t.Context(), f.led, "lp/x"); err != nil {
		t.Fatalf("checkpoint as the sink role: %v", err)
	}
	if _, err := book.RepairWallet(t.Context(), f.led, "lp/x"); err != nil {
		t.Fatalf("repair as the sink role: %v", err)
	}
	noOrders := func(context.Context, string) (stock.Order, bool, error) { return stock.Order{}, false, nil }
	if _, err := book.RepairStock(t.Context(), f.inv, "lp/a", noOrders); err != nil {
		t.Fatalf("repair as the sink role: %v", err)
	}
	f.book = owner
	for _, q := range []string{
		"DELETE FROM " + s + ".stock_entries",
		"UPDATE " + s + ".wallet_entries SET d_posted = 0",
		"TRUNCATE " + s + ".anomalies",
		"CREATE TABLE " + s + ".x (i int)",
	} {
		if _, err := pool.Exec(t.Context(), q); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as the sink role: %v, want permission denied", q, err)
		}
	}
	if n := f.int(fmt.Sprintf("SELECT count(*) FROM %s.anomalies", s)); n != 1 {
		t.Errorf("anomalies: %d, want the poison entry", n)
	}
}
