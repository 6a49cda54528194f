// Package book runs an example's book of record (pgjournal) when
// DATABASE_URL names a PostgreSQL database: it opens the book, runs the
// sink beside the example's own work, and at the end waits for the book to
// catch up and reports the book's totals beside Redis's with the
// reconciler's verdict. With DATABASE_URL unset an example never calls it.
package book

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Env names the variable holding the PostgreSQL connection string.
const Env = "DATABASE_URL"

// catchUp bounds the wait for the sink to book what Redis's journals hold
// at the end of a run.
const catchUp = 30 * time.Second

// Book is an open book of record with at most one sink running.
type Book struct {
	pool *pgxpool.Pool
	book *pgjournal.Book
	log  *slog.Logger

	stop context.CancelFunc
	done chan error // the sink's error once it has returned
}

// Open connects to url and applies the book's migrations in schema (one
// schema per example: the book identifies journals by SKU or account, not
// by key prefix). Close releases it.
func Open(ctx context.Context, url, schema string, log *slog.Logger) (*Book, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Env, err)
	}
	b, err := pgjournal.Open(ctx, pool, pgjournal.WithSchema(schema),
		pgjournal.WithMaxBackoff(time.Second),
		pgjournal.WithErrorHandler(func(err error) { log.Warn("book: sink retries", "err", err) }))
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("book: %w", err)
	}
	log.Info("book of record in PostgreSQL", "schema", schema)
	return &Book{pool: pool, book: b, log: log}, nil
}

// OpenEnv is Open of the database $DATABASE_URL names; with the variable
// unset it returns a nil Book, which an example keeps no book with.
func OpenEnv(ctx context.Context, schema string, log *slog.Logger) (*Book, error) {
	url := os.Getenv(Env)
	if url == "" {
		return nil, nil
	}
	return Open(ctx, url, schema, log)
}

// Close stops the sink, if one runs, and closes the pool. A nil Book has
// nothing to close.
func (b *Book) Close() {
	if b == nil {
		return
	}
	_ = b.stopSink()
	b.pool.Close()
}

// start runs sink in its own goroutine until stopSink.
func (b *Book) start(ctx context.Context, sink func(ctx context.Context) error) {
	ctx, b.stop = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan error, 1)
	go func() { b.done <- sink(ctx) }()
}

// stopSink stops the sink and returns the error it stopped on, if it did
// not stop because it was told to.
func (b *Book) stopSink() error {
	if b.stop == nil {
		return nil
	}
	b.stop()
	err := <-b.done
	b.stop = nil
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// sinkFailed returns the sink's error if it has stopped by itself.
func (b *Book) sinkFailed() error {
	select {
	case err := <-b.done:
		b.done <- err // stopSink reads it again
		return fmt.Errorf("book: sink stopped: %w", err)
	default:
		return nil
	}
}

// HasSKU reports whether the book holds entries of sku.
func (b *Book) HasSKU(ctx context.Context, sku string) (bool, error) {
	var known bool
	err := b.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+b.book.Schema()+".stock_levels WHERE sku = $1)", sku).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("book: %w", err)
	}
	return known, nil
}

// SinkStock starts booking sku's journal (every bucket) through a consumer
// group of its own.
func (b *Book) SinkStock(ctx context.Context, inv *stock.Inventory, sku string) {
	c := stock.Consumer{Group: "book", Name: "book", SKUs: []string{sku}, Poll: 20 * time.Millisecond, Batch: 500}
	b.start(ctx, func(ctx context.Context) error { return b.book.SinkStock(ctx, inv, c) })
}

// SinkWallet starts booking the journals of accounts.
func (b *Book) SinkWallet(ctx context.Context, led *wallet.Ledger, accounts []string) {
	src := pgjournal.WalletSource{Accounts: accounts, Batch: wallet.MaxPage, Poll: 20 * time.Millisecond}
	b.start(ctx, func(ctx context.Context) error { return b.book.SinkWallet(ctx, led, src) })
}

// Verdict is what the book says at the end of a run.
type Verdict struct {
	Fields      []string // the values compared
	Redis, Book []int64  // totals over the keys, in the order of Fields
	Entries     int64    // entries booked for the keys
	Keys        int
	Drifts      []pgjournal.Drift
}

// OK reports whether the reconciler found no drift.
func (v *Verdict) OK() bool { return len(v.Drifts) == 0 }

// Print writes the verdict as the report's book section.
func (v *Verdict) Print(w io.Writer) {
	fmt.Fprintf(w, "book of record (PostgreSQL): %d entries booked for %d %s\n", v.Entries, v.Keys, plural(v.Keys))
	for i, f := range v.Fields {
		fmt.Fprintf(w, "  %-10s Redis %-10d book %d\n", f, v.Redis[i], v.Book[i])
	}
	if v.OK() {
		fmt.Fprintln(w, "  reconciler: OK, Redis and the book agree")
		return
	}
	fmt.Fprintf(w, "  reconciler: DRIFT on %d %s\n", len(v.Drifts), plural(len(v.Drifts)))
	for _, d := range v.Drifts {
		fmt.Fprintf(w, "    %s: Redis %v, book %v (%d anomalies, %d lost by Redis, %d missing from the book)\n",
			d.Key, d.Redis, d.Book, len(d.Anomalies), len(d.BookOnly), len(d.JournalOnly))
	}
}

func plural(n int) string {
	if n == 1 {
		return "key"
	}
	return "keys"
}

// FinishStock waits until the book holds the entries of sku's journal
// (want: how many the journal was given, stock's AuditReport.Entries),
// stops the sink and reconciles the SKU.
func (b *Book) FinishStock(ctx context.Context, inv *stock.Inventory, sku string, want int) (*Verdict, error) {
	v := &Verdict{Fields: []string{"available", "reserved", "sold", "refunded"}, Keys: 1}
	lv := make([]int64, 4)
	read := func() error {
		err := b.pool.QueryRow(ctx, "SELECT coalesce(sum(entries), 0)::bigint, coalesce(sum(available), 0)::bigint, coalesce(sum(reserved), 0)::bigint, coalesce(sum(sold), 0)::bigint, coalesce(sum(refunded), 0)::bigint FROM "+
			b.book.Schema()+".stock_levels WHERE sku = $1", sku).Scan(&v.Entries, &lv[0], &lv[1], &lv[2], &lv[3])
		return err
	}
	if err := b.wait(ctx, func() (bool, error) {
		err := read()
		return v.Entries >= int64(want), err
	}); err != nil {
		return nil, err
	}
	if err := b.stopSink(); err != nil {
		return nil, fmt.Errorf("book: sink: %w", err)
	}
	r, err := inv.Level(ctx, sku)
	if err != nil {
		return nil, err
	}
	v.Redis, v.Book = []int64{r.Available, r.Reserved, r.Sold, r.Refunded}, lv
	if v.Drifts, err = b.book.ReconcileStock(ctx, inv, sku); err != nil {
		return nil, err
	}
	return v, nil
}

// FinishWallet waits until the book has read every account's journal to
// its end, stops the sink and reconciles the accounts.
func (b *Book) FinishWallet(ctx context.Context, led *wallet.Ledger, accounts []string) (*Verdict, error) {
	v := &Verdict{Fields: []string{"posted", "held"}, Keys: len(accounts)}
	if err := b.wait(ctx, func() (bool, error) {
		for _, a := range accounts {
			pos, err := b.book.WalletPosition(ctx, a)
			if err != nil {
				return false, err
			}
			// Nothing after the book's position: caught up.
			es, _, err := led.Entries(ctx, a, pos, 1)
			if err != nil || len(es) > 0 {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	if err := b.stopSink(); err != nil {
		return nil, fmt.Errorf("book: sink: %w", err)
	}
	v.Redis, v.Book = make([]int64, 2), make([]int64, 2)
	for _, a := range accounts {
		bal, err := led.Balance(ctx, a)
		if err != nil {
			return nil, err
		}
		v.Redis[0] += bal.Posted
		v.Redis[1] += bal.Held
	}
	err := b.pool.QueryRow(ctx, "SELECT coalesce(sum(entries), 0)::bigint, coalesce(sum(posted), 0)::bigint, coalesce(sum(held), 0)::bigint FROM "+
		b.book.Schema()+".wallet_balances WHERE account = ANY($1)", accounts).Scan(&v.Entries, &v.Book[0], &v.Book[1])
	if err != nil {
		return nil, err
	}
	if v.Drifts, err = b.book.ReconcileWallet(ctx, led, accounts...); err != nil {
		return nil, err
	}
	return v, nil
}

// wait polls done until it is true, the sink fails, or catchUp has passed.
func (b *Book) wait(ctx context.Context, done func() (bool, error)) error {
	deadline := time.Now().Add(catchUp)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if err := b.sinkFailed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("book: the sink did not catch up within %s", catchUp)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
