package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/wallet"
)

// Three wallet sinks on the same accounts at once, while transfers run:
// they take turns on each journal, every entry is booked once, and none of
// them takes another's progress for a journal written again (no anomaly).
func TestSinkWallet_threeSinksAtOnce(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"ts/a", "ts/b", "ts/c"}
	walletWork(t, f.led, "ts", 10, accounts...)
	for _, a := range accounts {
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: "ts-seed-" + a, Account: a, Amount: 100000}); err != nil {
			t.Fatal(err)
		}
	}
	var stops []func() error
	for range 3 {
		stops = append(stops, runSink(t, f.walletSink(accounts...)))
	}
	for i := range 450 {
		tr := wallet.Transfer{ID: fmt.Sprint("ts-x", i), From: accounts[i%3], To: accounts[(i+1)%3], Amount: int64(1 + i%7)}
		if _, err := f.led.Transfer(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	f.drain(nil, accounts, stops...)
	f.checkBook(nil, accounts)
	f.noAnomalies()
}

// Checkpoints through the book while a sink books, credits are posted and
// the reconciler runs: a checkpoint that trims the entry at the book's
// position under a comparison is no drift. Only a checkpoint that reports
// entries it trimmed unbooked may leave one.
func TestReconcile_besideCheckpoints(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"rc/x"}
	walletWork(t, f.led, "rc", 10, accounts...)
	stop := runSink(t, f.walletSink(accounts...))
	writing, stopWriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; writing.Err() == nil; i++ {
			if _, err := f.led.Credit(ctx, wallet.Tx{ID: fmt.Sprint("rc-w", i), Account: "rc/x", Amount: 1}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	var lost atomic.Bool
	wg.Go(func() {
		for writing.Err() == nil {
			_, _, err := f.book.CheckpointWallet(ctx, f.led, "rc/x")
			switch {
			case errors.Is(err, pgjournal.ErrTrimmedUnbooked):
				lost.Store(true)
			case err == nil, errors.Is(err, pgjournal.ErrBusy), writing.Err() != nil:
			case strings.Contains(err.Error(), "changed during each of"):
			default:
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	var compared int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		ds, err := f.book.ReconcileWallet(ctx, f.led, accounts...)
		if errors.Is(err, pgjournal.ErrBusy) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		compared++
		if len(ds) > 0 && !lost.Load() {
			t.Errorf("drift reported with nothing lost: %+v", ds[0])
		}
	}
	stopWriting()
	wg.Wait()
	f.drain(nil, accounts, stop)
	t.Logf("%d comparisons, a checkpoint trimmed unbooked entries: %v", compared, lost.Load())
}

// A book booked before migration 0003 (transfers into an account named by
// ID alone) is migrated in place: each booked transfer in gets its source's
// slot group, and a second transfer of the same ID from another group is
// booked after the migration.
func TestMigrate_0003_keepsBookedTransfers(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	schema := f.schema + "_old"
	// The schema as the first two migrations left it, with a transfer in.
	f.query("CREATE SCHEMA " + schema)
	f.query("CREATE TABLE " + schema + ".schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
	for _, name := range []string{"0001_book.sql", "0002_memo_raw.sql"} {
		sql, err := os.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+schema); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".schema_migrations (version, name) VALUES ($1, $2)", name[:4], name); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.schema = schema
	f.query(`INSERT INTO $S.wallet_entries (account, ms, seq, stream_id, kind, op, peer, d_posted, d_held, posted, held)
		VALUES ('xgd/dst', 1, 0, '1-0', 'open', '', '', 0, 0, 0, 0),
		       ('xgd/dst', 2, 0, '2-0', 'transfer_in', 'pay-1', 'xga/src', 100, 0, 100, 0),
		       ('solo', 1, 0, '1-0', 'transfer_in', 'pay-9', 'other', 5, 0, 5, 0)`)
	f.query(`INSERT INTO $S.anomalies (module, key, stream_id, kind, detail) VALUES ('wallet', 'xgd/dst', '3-0', 'gap', 'x')`)
	book, err := pgjournal.Open(ctx, f.pool, pgjournal.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.query("SELECT account, src_group FROM $S.wallet_entries WHERE kind = 'transfer_in' ORDER BY account"); fmt.Sprint(got) != "[[solo other] [xgd/dst xga]]" {
		t.Fatalf("source groups after the migration: %v", got)
	}
	// The index now lets the same ID from another group in.
	f.query(`INSERT INTO $S.wallet_entries (account, ms, seq, stream_id, kind, op, peer, src_group, d_posted, d_held, posted, held)
		VALUES ('xgd/dst', 3, 0, '3-0', 'transfer_in', 'pay-1', 'xgb/src', 'xgb', 30, 0, 130, 0)`)
	if _, err := f.pool.Exec(ctx, `INSERT INTO `+schema+`.wallet_entries (account, ms, seq, stream_id, kind, op, peer, src_group, d_posted, d_held, posted, held)
		VALUES ('xgd/dst', 4, 0, '4-0', 'transfer_in', 'pay-1', 'xga/other', 'xga', 30, 0, 160, 0)`); err == nil {
		t.Fatal("the same transfer from the same group booked twice")
	}
	if as, err := book.Anomalies(ctx, "wallet", "xgd/dst"); err != nil || len(as) != 1 {
		t.Fatalf("anomalies after the migration: %v, %v", as, err)
	}
}
