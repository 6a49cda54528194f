package pgjournal_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redkit-go/redkit/pgjournal"
)

// The setup the module's README gives, step by step: a database, a role
// that runs the migrations with CREATE on the database alone, and a
// service role with the listed grants that opens the book, runs both sinks
// and the reconciler, and can neither rewrite the book nor change the
// schema.
func TestSetup_readme(t *testing.T) {
	ctx := t.Context()
	n := seq.Add(1)
	db := fmt.Sprintf("redkit_%d_%d", os.Getpid(), n)
	migrate, service := db+"_migrate", db+"_book"
	admin := sharedPG.Pool(t)
	exec := func(pool *pgxpool.Pool, sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, q := range []string{
		"CREATE DATABASE " + db,
		"CREATE ROLE " + migrate + " LOGIN",
		"CREATE ROLE " + service + " LOGIN",
		"GRANT CREATE ON DATABASE " + db + " TO " + migrate,
	} {
		exec(admin, q)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
		_, _ = admin.Exec(ctx, "DROP ROLE "+service)
		_, _ = admin.Exec(ctx, "DROP ROLE "+migrate)
	})
	as := func(role string) *pgxpool.Pool {
		url := strings.Replace(sharedPG.URL(), "postgres://postgres@", "postgres://"+role+"@", 1)
		url = strings.Replace(url, "/postgres?", "/"+db+"?", 1)
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	owner := as(migrate)
	if _, err := pgjournal.Open(ctx, owner); err != nil {
		t.Fatalf("migrate as %s: %v", migrate, err)
	}
	for _, q := range []string{
		"GRANT USAGE ON SCHEMA pgjournal TO " + service,
		"GRANT SELECT ON pgjournal.schema_migrations TO " + service,
		"GRANT SELECT, INSERT ON pgjournal.stock_entries, pgjournal.wallet_entries, pgjournal.anomalies TO " + service,
		"GRANT SELECT, INSERT, UPDATE ON pgjournal.stock_levels, pgjournal.wallet_balances TO " + service,
		"GRANT USAGE ON SEQUENCE pgjournal.anomalies_id_seq TO " + service,
	} {
		exec(owner, q)
	}
	pool := as(service)
	book, err := pgjournal.Open(ctx, pool)
	if err != nil {
		t.Fatalf("open as %s: %v", service, err)
	}
	f := shared(t) // Redis clients, on this test's key prefix
	f.book, f.pool, f.schema = book, owner, "pgjournal"
	skus, accounts := []string{"su/a"}, []string{"su/x", "su/y"}
	stockWork(t, f.inv, "su", 20, skus...)
	walletWork(t, f.led, "su", 20, accounts...)
	f.rdb.XAdd(ctx, xaddPoison(f.journalKey("su/a"))) // an anomaly to write
	f.catchUp(skus, accounts)
	f.noDrift(skus, accounts)
	for _, q := range []string{
		"DELETE FROM pgjournal.wallet_entries",
		"UPDATE pgjournal.stock_entries SET d_sold = 0",
		"CREATE TABLE pgjournal.x (i int)",
		"ALTER TABLE pgjournal.anomalies DROP COLUMN detail",
	} {
		if _, err := pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") && !strings.Contains(err.Error(), "must be owner") {
			t.Errorf("%s as %s: %v, want it refused", q, service, err)
		}
	}
}
