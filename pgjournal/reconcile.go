package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Drift is a SKU or account whose state in Redis differs from the book's.
type Drift struct {
	Module string   // "stock" or "wallet"
	Key    string   // the SKU or account
	Fields []string // names of the values compared: available, reserved, sold, refunded / posted, held
	// Redis is the state in Redis; Book the projection plus the entries of
	// Redis's journal the book has not read yet (the sink's lag, which is
	// not drift), in the order of Fields.
	Redis, Book []int64
	// Unbooked is how many entries of Redis's journal were added to Book.
	Unbooked int
	// Anomalies are what the sink recorded for this key: gaps, entries it
	// could not read or that were deleted before it read them, operations
	// booked twice in Redis.
	Anomalies []Anomaly
	// BookOnly lists booked entries that Redis's journal should hold (they
	// are newer than its oldest entry) and does not: writes Redis lost, in
	// a failover without replica acknowledgement or a restore from an old
	// snapshot.
	BookOnly []string
	// JournalOnly lists entries of Redis's journal older than the book's
	// position that the book does not hold: written by a new primary after
	// such a loss, or skipped.
	JournalOnly []string
}

// Anomaly is one thing a sink could not book as an ordinary entry.
type Anomaly struct {
	Module   string // "stock" or "wallet"
	Key      string // SKU or account
	Bucket   int    // the stock bucket
	StreamID string // the entry concerned
	// Kind is "gap" (the levels before the entry were not the book's),
	// "poison" (the entry could not be read), "lost" (deleted from the
	// journal after it was handed to the sink, before it was booked) or
	// "duplicate_op" (the operation was booked before under another ID).
	Kind       string
	Detail     string
	RecordedAt time.Time
}

// Anomalies returns what the sinks recorded for module ("" for both) and
// key ("" for every key), oldest first.
func (b *Book) Anomalies(ctx context.Context, module, key string) ([]Anomaly, error) {
	rows, err := b.pool.Query(ctx, "SELECT module, key, bucket, stream_id, kind, detail, recorded_at FROM "+b.t("anomalies")+
		" WHERE ($1 = '' OR module = $1) AND ($2 = '' OR key = $2) ORDER BY id", module, key)
	if err != nil {
		return nil, fmt.Errorf("pgjournal: anomalies: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Anomaly, error) {
		var a Anomaly
		err := r.Scan(&a.Module, &a.Key, &a.Bucket, &a.StreamID, &a.Kind, &a.Detail, &a.RecordedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgjournal: anomalies: %w", err)
	}
	return out, nil
}

// reconcileAttempts bounds the reads of a key whose state keeps changing
// while it is compared.
const reconcileAttempts = 5

// ErrBusy: a key's state in Redis changed during every attempt to compare
// it; call again when writes to it pause.
var ErrBusy = errors.New("pgjournal: key changed during every comparison")

// ReconcileStock compares the levels of each SKU in Redis with the book and
// returns the SKUs that differ, with what explains the difference. Entries
// of a journal the sink has not booked yet count as booked (lag is not
// drift); for a SKU split into buckets only bucket 0's journal can be read
// this way, so reconcile those when the sink has caught up. Errors:
// ErrInvalid (from stock), ErrBusy, and those of Redis and PostgreSQL.
func (b *Book) ReconcileStock(ctx context.Context, inv *stock.Inventory, skus ...string) ([]Drift, error) {
	return reconcileEach(skus, func(sku string) (*Drift, error) {
		return b.reconcile(ctx, reconcileKey{
			j: stockJournalDesc, key: []any{sku, 0}, fields: []string{"available", "reserved", "sold", "refunded"},
			state: func() ([]int64, error) {
				l, err := inv.Level(ctx, sku)
				if errors.Is(err, stock.ErrSKUNotFound) {
					return make([]int64, 4), nil
				}
				return stockLevels(l), err
			},
			book: func() ([]int64, int64, int64, error) {
				book := make([]int64, 4)
				var ms, seq int64
				err := b.pool.QueryRow(ctx, `SELECT coalesce(sum(available), 0)::bigint, coalesce(sum(reserved), 0)::bigint,
					coalesce(sum(sold), 0)::bigint, coalesce(sum(refunded), 0)::bigint,
					coalesce(max(last_ms) FILTER (WHERE bucket = 0), 0), coalesce(max(last_seq) FILTER (WHERE bucket = 0), 0)
					FROM `+b.t("stock_levels")+` WHERE sku = $1`, sku).Scan(&book[0], &book[1], &book[2], &book[3], &ms, &seq)
				return book, ms, seq, err
			},
			journal: func(cursor string) ([]keyEntry, error) {
				es, err := readJournal(cursor, stock.ErrSKUNotFound, func(cursor string) ([]stock.Entry, string, error) {
					return inv.Entries(ctx, sku, cursor, stock.MaxPage)
				})
				out := make([]keyEntry, len(es))
				for i, e := range es {
					out[i] = keyEntry{id: e.ID, kind: e.Kind, op: e.Op, delta: stockLevels(e.Delta)}
				}
				return out, err
			},
		})
	})
}

func stockLevels(l stock.Levels) []int64 {
	return []int64{l.Available, l.Reserved, l.Sold, l.Refunded}
}

// ReconcileWallet compares the posted and held balances of each account in
// Redis with the book and returns the accounts that differ, with what
// explains the difference (entries the sink has not booked yet count as
// booked). Errors: ErrBusy, those of wallet, Redis and PostgreSQL.
func (b *Book) ReconcileWallet(ctx context.Context, l *wallet.Ledger, accounts ...string) ([]Drift, error) {
	return reconcileEach(accounts, func(account string) (*Drift, error) {
		return b.reconcile(ctx, reconcileKey{
			j: walletJournalDesc, key: []any{account}, fields: []string{"posted", "held"},
			state: func() ([]int64, error) {
				bal, err := l.Balance(ctx, account)
				if errors.Is(err, wallet.ErrAccountNotFound) {
					return make([]int64, 2), nil
				}
				return []int64{bal.Posted, bal.Held}, err
			},
			book: func() ([]int64, int64, int64, error) {
				book := make([]int64, 2)
				var ms, seq int64
				err := b.pool.QueryRow(ctx, "SELECT posted, held, last_ms, last_seq FROM "+b.t("wallet_balances")+" WHERE account = $1",
					account).Scan(&book[0], &book[1], &ms, &seq)
				if errors.Is(err, pgx.ErrNoRows) {
					err = nil
				}
				return book, ms, seq, err
			},
			journal: func(cursor string) ([]keyEntry, error) {
				es, err := readJournal(cursor, wallet.ErrAccountNotFound, func(cursor string) ([]wallet.Entry, string, error) {
					return l.Entries(ctx, account, cursor, wallet.MaxPage)
				})
				out := make([]keyEntry, len(es))
				for i, e := range es {
					out[i] = keyEntry{id: e.ID, kind: e.Kind, op: e.TxID, delta: []int64{e.Delta, e.HeldDelta}}
				}
				return out, err
			},
		})
	})
}

// reconcileEach reconciles each key in turn and returns the drifts found;
// it stops at the first error.
func reconcileEach(keys []string, reconcile func(key string) (*Drift, error)) ([]Drift, error) {
	var out []Drift
	for _, k := range keys {
		d, err := reconcile(k)
		if err != nil {
			return out, fmt.Errorf("pgjournal: reconcile %s: %w", k, err)
		}
		if d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// reconcileKey is how reconcile reads one SKU or account.
type reconcileKey struct {
	j      *journal
	key    []any    // the journal's key in the book
	fields []string // names of the compared values
	// state reads the values in Redis; book reads the book's and its
	// position in the journal.
	state func() ([]int64, error)
	book  func() (values []int64, ms, seq int64, err error)
	// journal reads Redis's journal from after cursor to its end.
	journal func(cursor string) ([]keyEntry, error)
}

// keyEntry is one entry of Redis's journal, as reconcile compares it.
type keyEntry struct {
	id, kind, op string
	delta        []int64 // in the order of the compared values
}

// reconcile compares one key's values in Redis with the book's plus the
// entries the book has not read yet, reading Redis before and after so as
// to compare a state that held still. It returns nil when they agree.
func (b *Book) reconcile(ctx context.Context, k reconcileKey) (*Drift, error) {
	for range reconcileAttempts {
		redis1, err := k.state()
		if err != nil {
			return nil, err
		}
		book, ms, seq, err := k.book()
		if err != nil {
			return nil, err
		}
		pending, err := k.journal(cursorAfter(ms, seq))
		if err != nil {
			return nil, err
		}
		kinds, ops := make([]string, len(pending)), make([]string, len(pending))
		for i, e := range pending {
			kinds[i], ops[i] = e.kind, e.op
		}
		booked, err := b.bookedOps(ctx, k.j, k.key, kinds, ops)
		if err != nil {
			return nil, err
		}
		for _, e := range pending {
			if booked[[2]string{e.kind, e.op}] {
				continue
			}
			for i, d := range e.delta {
				book[i] += d
			}
		}
		redis2, err := k.state()
		if err != nil {
			return nil, err
		}
		if !levelsEqual(redis1, redis2) {
			continue
		}
		if levelsEqual(redis1, book) {
			return nil, nil
		}
		label, _ := k.j.keyLabel(k.key)
		d := &Drift{Module: k.j.module, Key: label, Fields: k.fields, Redis: redis1, Book: book, Unbooked: len(pending)}
		all, err := k.journal("")
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(all))
		for i, e := range all {
			ids[i] = e.id
		}
		if err := b.explain(ctx, k.j, k.key, ids, ms, seq, d); err != nil {
			return nil, err
		}
		return d, nil
	}
	return nil, ErrBusy
}

func cursorAfter(ms, seq int64) string {
	if ms == 0 && seq == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", ms, seq)
}

// readJournal reads a journal from after cursor to its end, a page at a
// time; a key Redis does not hold (notFound) has an empty journal.
func readJournal[E any](cursor string, notFound error, page func(cursor string) ([]E, string, error)) ([]E, error) {
	var out []E
	for {
		es, next, err := page(cursor)
		if errors.Is(err, notFound) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// explain fills d's anomalies and the entries one side holds and the other
// does not. ids is Redis's retained journal, oldest first; (ms, seq) the
// book's position.
func (b *Book) explain(ctx context.Context, j *journal, key []any, ids []string, ms, seq int64, d *Drift) error {
	label, _ := j.keyLabel(key)
	var err error
	if d.Anomalies, err = b.Anomalies(ctx, j.module, label); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	oms, oseq, _ := parseID(ids[0])
	n := len(key)
	rows, err := b.pool.Query(ctx, fmt.Sprintf("SELECT stream_id FROM %s WHERE %s AND (ms, seq) >= ($%d, $%d) ORDER BY ms, seq",
		b.t(j.entries), j.keyWhere(), n+1, n+2), append(append([]any{}, key...), oms, oseq)...)
	if err != nil {
		return err
	}
	booked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	inJournal, inBook := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		inJournal[id] = true
	}
	for _, id := range booked {
		inBook[id] = true
	}
	for _, id := range booked {
		if !inJournal[id] {
			d.BookOnly = append(d.BookOnly, id)
		}
	}
	noted := map[string]bool{}
	for _, a := range d.Anomalies {
		noted[a.StreamID] = true
	}
	for _, id := range ids {
		ims, iseq, _ := parseID(id)
		if idLess(ms, seq, ims, iseq) || inBook[id] || noted[id] {
			continue
		}
		d.JournalOnly = append(d.JournalOnly, id)
	}
	return nil
}

// bookedOps returns which of the (kind, op) pairs the journal has booked:
// an entry not booked yet whose operation is (a retry or a repair applied
// it again in Redis) will be booked as a duplicate, so it is not lag.
func (b *Book) bookedOps(ctx context.Context, j *journal, key []any, kinds, ops []string) (map[[2]string]bool, error) {
	out := map[[2]string]bool{}
	if len(kinds) == 0 {
		return out, nil
	}
	n := len(key)
	// As in apply: one index probe per operation.
	rows, err := b.pool.Query(ctx, fmt.Sprintf("SELECT e.kind, e.op FROM unnest($%d::text[]) AS u(op) CROSS JOIN LATERAL "+
		"(SELECT kind, op FROM %s WHERE %s AND op = u.op AND op <> '' OFFSET 0) e",
		n+1, b.t(j.entries), j.keyWhere()), append(append([]any{}, key...), ops)...)
	if err != nil {
		return nil, err
	}
	var k, o string
	_, err = pgx.ForEachRow(rows, []any{&k, &o}, func() error { out[[2]string{k, o}] = true; return nil })
	return out, err
}
