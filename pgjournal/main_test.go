package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// One PostgreSQL and one Redis server for the tests that need no faults of
// their own; each test has its own schema and key prefix.
var (
	sharedPG    *pgtest.Server
	sharedRedis *redistest.Server
)

type runAndClose struct{ m *testing.M }

func (r runAndClose) Run() int {
	defer pgtest.RemoveTemplate()
	defer sharedRedis.Close()
	defer sharedPG.Close()
	return r.m.Run()
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	var err error
	if sharedPG, err = pgtest.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if sharedRedis, err = redistest.Start(context.Background(), redistest.Options{}); err != nil {
		_ = sharedPG.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(runAndClose{m})
}

var seq atomic.Int64

// fixture is one test's book, inventory and ledger.
type fixture struct {
	t      testing.TB
	pool   *pgxpool.Pool
	book   *pgjournal.Book
	rdb    *redis.Client
	inv    *stock.Inventory
	led    *wallet.Ledger
	prefix string
	schema string
}

func newFixture(t testing.TB, pg *pgtest.Server, rs *redistest.Server) *fixture {
	t.Helper()
	n := seq.Add(1)
	f := &fixture{t: t, prefix: fmt.Sprintf("t%d", n), schema: fmt.Sprintf("book_%d_%d", os.Getpid(), n)}
	f.pool = pg.Pool(t)
	var err error
	f.book, err = pgjournal.Open(t.Context(), f.pool, pgjournal.WithSchema(f.schema))
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups close these, not whatever a test puts in f later.
	rdb := rs.Client()
	inv, err := stock.New(rdb, stock.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	led, err := wallet.New(rdb, wallet.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close(); _ = inv.Close(); _ = rdb.Close() })
	f.rdb, f.inv, f.led = rdb, inv, led
	return f
}

func shared(t testing.TB) *fixture { return newFixture(t, sharedPG, sharedRedis) }

// runSink runs fn in a goroutine until the test ends or stop is called.
func runSink(t testing.TB, fn func(ctx context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once atomic.Bool
	var res error
	stop = func() error {
		if once.CompareAndSwap(false, true) {
			cancel()
			res = <-done
			if errors.Is(res, context.Canceled) {
				res = nil
			}
		}
		return res
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (f *fixture) stockSink(skus ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return f.book.SinkStock(ctx, f.inv, stock.Consumer{Group: "book", Name: "sink", SKUs: skus, Poll: 5 * time.Millisecond, MinIdle: time.Hour})
	}
}

func (f *fixture) walletSink(accounts ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return f.book.SinkWallet(ctx, f.led, pgjournal.WalletSource{Accounts: accounts, Poll: 5 * time.Millisecond})
	}
}

func (f *fixture) query(sql string, args ...any) [][]any {
	f.t.Helper()
	rows, err := f.pool.Query(context.Background(), strings.ReplaceAll(sql, "$S.", f.schema+"."), args...)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) int(sql string, args ...any) int64 {
	f.t.Helper()
	r := f.query(sql, args...)
	if len(r) != 1 || len(r[0]) != 1 {
		f.t.Fatalf("%s: %v", sql, r)
	}
	switch v := r[0][0].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case nil:
		return 0
	}
	f.t.Fatalf("%s: %T", sql, r[0][0])
	return 0
}

// stockIDs returns the IDs of bucket 0's retained journal of sku.
func (f *fixture) stockIDs(sku string) []string {
	f.t.Helper()
	return journalIDs(f.t, func(cursor string) ([]stock.Entry, string, error) {
		return f.inv.Entries(context.Background(), sku, cursor, stock.MaxPage)
	}, func(e stock.Entry) string { return e.ID })
}

func (f *fixture) walletIDs(account string) []string {
	f.t.Helper()
	return journalIDs(f.t, func(cursor string) ([]wallet.Entry, string, error) {
		return f.led.Entries(context.Background(), account, cursor, wallet.MaxPage)
	}, func(e wallet.Entry) string { return e.ID })
}

// fataler is what journalIDs needs of a test: a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// journalIDs reads a journal a page at a time and returns its IDs.
func journalIDs[E any](t fataler, page func(cursor string) ([]E, string, error), id func(E) string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		es, next, err := page(cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			ids = append(ids, id(e))
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

func (f *fixture) bookedIDs(table, keyCol, key string) []string {
	f.t.Helper()
	var ids []string
	for _, r := range f.query("SELECT stream_id FROM $S."+table+" WHERE "+keyCol+" = $1 ORDER BY ms, seq", key) {
		ids = append(ids, r[0].(string))
	}
	return ids
}

// waitFor polls cond until it holds or 30s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStock waits until the book holds the last entry of every SKU's
// journal (bucket 0).
func (f *fixture) waitStock(skus ...string) {
	f.t.Helper()
	for _, sku := range skus {
		waitFor(f.t, "the book to catch up with "+sku, func() bool {
			ids := f.stockIDs(sku)
			last := ids[len(ids)-1]
			return f.int("SELECT count(*) FROM $S.stock_entries WHERE sku = $1 AND stream_id = $2", sku, last)+
				f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1 AND stream_id = $2 AND kind IN ('poison','lost','duplicate_op')", sku, last) > 0
		})
	}
}

func (f *fixture) waitWallet(accounts ...string) {
	f.t.Helper()
	for _, a := range accounts {
		waitFor(f.t, "the book to catch up with "+a, func() bool {
			ids := f.walletIDs(a)
			last := ids[len(ids)-1]
			return f.int("SELECT count(*) FROM $S.wallet_entries WHERE account = $1 AND stream_id = $2", a, last)+
				f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1 AND stream_id = $2", a, last) > 0
		})
	}
}

// checkStock asserts the book's claims for skus: every entry of the
// retained journal booked once (or recorded as an anomaly, when except
// holds "<sku> <id>"), the projection equal to the sum of the booked entries.
func (f *fixture) checkStock(except map[string]bool, skus ...string) {
	f.t.Helper()
	for _, sku := range skus {
		booked := map[string]int{}
		// Journal reads bucket 0; stream IDs repeat across buckets.
		for _, r := range f.query("SELECT stream_id FROM $S.stock_entries WHERE sku = $1 AND bucket = 0", sku) {
			id := r[0].(string)
			booked[id]++
		}
		for _, id := range f.stockIDs(sku) {
			if except[sku+" "+id] {
				if booked[id] != 0 {
					f.t.Errorf("%s: entry %s booked, want it left out", sku, id)
				}
				continue
			}
			if booked[id] != 1 {
				f.t.Errorf("%s: entry %s booked %d times, want once", sku, id, booked[id])
			}
		}
	}
	bad := f.query(`SELECT l.sku, l.bucket FROM $S.stock_levels l LEFT JOIN (
		SELECT sku, bucket, sum(d_available) a, sum(d_reserved) r, sum(d_sold) s, sum(d_refunded) f, sum(d_supply) u, count(*) n
		FROM $S.stock_entries GROUP BY sku, bucket) e USING (sku, bucket)
		WHERE (coalesce(e.a,0), coalesce(e.r,0), coalesce(e.s,0), coalesce(e.f,0), coalesce(e.u,0), coalesce(e.n,0)) <>
		      (l.available, l.reserved, l.sold, l.refunded, l.supply, l.entries)`)
	if len(bad) > 0 {
		f.t.Errorf("projection differs from the sum of the entries for %v", bad)
	}
}

func (f *fixture) checkWallet(except map[string]bool, accounts ...string) {
	f.t.Helper()
	for _, a := range accounts {
		booked := map[string]int{}
		for _, id := range f.bookedIDs("wallet_entries", "account", a) {
			booked[id]++
		}
		dup := map[string]bool{}
		for _, r := range f.query("SELECT stream_id FROM $S.anomalies WHERE module = 'wallet' AND key = $1 AND kind = 'duplicate_op'", a) {
			dup[r[0].(string)] = true
		}
		for _, id := range f.walletIDs(a) {
			if except[a+" "+id] || dup[id] {
				continue
			}
			if booked[id] != 1 {
				f.t.Errorf("%s: entry %s booked %d times, want once", a, id, booked[id])
			}
		}
	}
	bad := f.query(`SELECT b.account FROM $S.wallet_balances b LEFT JOIN (
		SELECT account, sum(d_posted) p, sum(d_held) h, count(*) n FROM $S.wallet_entries GROUP BY account) e USING (account)
		WHERE (coalesce(e.p,0), coalesce(e.h,0), coalesce(e.n,0)) <> (b.posted, b.held, b.entries)`)
	if len(bad) > 0 {
		f.t.Errorf("projection differs from the sum of the entries for %v", bad)
	}
}

// drain waits until the book holds the last entry of every journal of
// skus and accounts, then stops the sinks.
func (f *fixture) drain(skus, accounts []string, stops ...func() error) {
	f.t.Helper()
	f.waitStock(skus...)
	f.waitWallet(accounts...)
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	if err := errors.Join(errs...); err != nil {
		f.t.Fatal(err)
	}
}

// catchUp runs the sinks of skus and accounts (either may be empty) until
// the book holds every entry of their journals.
func (f *fixture) catchUp(skus, accounts []string) {
	f.t.Helper()
	var stops []func() error
	if len(skus) > 0 {
		stops = append(stops, runSink(f.t, f.stockSink(skus...)))
	}
	if len(accounts) > 0 {
		stops = append(stops, runSink(f.t, f.walletSink(accounts...)))
	}
	f.drain(skus, accounts, stops...)
}

// checkBook asserts the book's claims for skus and accounts (either may
// be empty): every entry booked once, each projection the sum of its
// entries, and Redis in agreement.
func (f *fixture) checkBook(skus, accounts []string) {
	f.t.Helper()
	if len(skus) > 0 {
		f.checkStock(nil, skus...)
	}
	if len(accounts) > 0 {
		f.checkWallet(nil, accounts...)
	}
	f.noDrift(skus, accounts)
}

// noDrift fails the test unless Redis and the book agree on skus and
// accounts.
func (f *fixture) noDrift(skus, accounts []string) {
	f.t.Helper()
	if ds := append(f.reconcileStock(skus...), f.reconcileWallet(accounts...)...); len(ds) != 0 {
		f.t.Fatalf("drift: %+v", ds)
	}
}

// noAnomalies fails the test if the sinks recorded an anomaly.
func (f *fixture) noAnomalies() {
	f.t.Helper()
	as, err := f.book.Anomalies(context.Background(), "", "")
	if err != nil {
		f.t.Fatal(err)
	}
	if len(as) != 0 {
		f.t.Fatalf("anomalies: %+v", as)
	}
}

// driftKeys returns the sorted keys of drifts.
func driftKeys(ds []pgjournal.Drift) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Key)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) reconcileStock(skus ...string) []pgjournal.Drift {
	f.t.Helper()
	return f.drifts(f.book.ReconcileStock(context.Background(), f.inv, skus...))
}

func (f *fixture) reconcileWallet(accounts ...string) []pgjournal.Drift {
	f.t.Helper()
	return f.drifts(f.book.ReconcileWallet(context.Background(), f.led, accounts...))
}

// drifts fails the test on a reconciliation's error.
func (f *fixture) drifts(ds []pgjournal.Drift, err error) []pgjournal.Drift {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

// journalKey finds the Redis key of a journal stream (module "stock" or
// "wallet") by its documented suffix.
func (f *fixture) journalKey(name string) string {
	f.t.Helper()
	return f.redisKey("journal", name)
}

// redisKey finds the Redis key of kind ("sku", "acct", "journal") for
// name by its documented suffix.
func (f *fixture) redisKey(kind, name string) string {
	f.t.Helper()
	ks, err := f.rdb.Keys(context.Background(), f.prefix+":*:"+kind+":"+name).Result()
	if err != nil || len(ks) != 1 {
		f.t.Fatalf("%s key of %s: %v %v", kind, name, ks, err)
	}
	return ks[0]
}
