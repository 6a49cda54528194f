package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// could not read, operations booked twice in Redis, stream IDs given
	// out again.
	Anomalies []Anomaly
	// BookOnly lists booked entries that Redis's journal should hold (they
	// are not older than its oldest entry) and does not, or holds with other
	// content under their stream ID: writes Redis lost, in a failover
	// without replica acknowledgement, a restore from an old snapshot or a
	// restart without persistence.
	BookOnly []string
	// JournalOnly lists entries of Redis's journal up to the book's
	// position that the book does not hold (by stream ID and content):
	// written by a new primary after such a loss, or skipped.
	JournalOnly []string

	position [2]int64 // the book's position in the comparison
}

// Anomaly is one thing a sink could not book as an ordinary entry.
type Anomaly struct {
	Module   string // "stock" or "wallet"
	Key      string // SKU or account
	Bucket   int    // the stock bucket
	StreamID string // the entry concerned
	// Kind is "gap" (the levels before the entry were not the book's),
	// "poison" (the entry could not be read), "duplicate_op" (the
	// operation was booked before under another ID) or "reused_id" (the
	// journal holds an entry under a stream ID the book holds with other
	// content: Redis gave the ID out again, after a restart without
	// persistence on a clock that went back). Books kept by earlier
	// versions may also hold "lost" (a stock entry deleted from its
	// journal after it was handed to the sink; stock's Consume now
	// acknowledges such an entry without handing it over, and the next
	// entry shows the gap).
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

// reconcileAttempts bounds the comparisons of a key whose state keeps
// changing while it is compared.
const reconcileAttempts = 5

// ErrBusy: a key's state in Redis changed during every attempt to compare
// it; call again when writes to it pause.
var ErrBusy = errors.New("pgjournal: key changed during every comparison")

// ReconcileStock compares the levels of each SKU in Redis with the book and
// returns the SKUs that differ, with what explains the difference. Entries
// of a journal the sink has not booked yet count as booked (lag is not
// drift); for a SKU split into buckets only bucket 0's journal can be read
// this way, so the lag of the other buckets shows as a difference:
// reconcile those when the sink has caught up. Errors: ErrInvalid (from
// stock), ErrBusy, and those of Redis and PostgreSQL.
func (b *Book) ReconcileStock(ctx context.Context, inv *stock.Inventory, skus ...string) ([]Drift, error) {
	if inv == nil {
		return nil, fmt.Errorf("%w: nil inventory", ErrInvalid)
	}
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
			others: func(tx pgx.Tx) ([]int64, error) {
				o := make([]int64, 5)
				err := tx.QueryRow(ctx, `SELECT coalesce(sum(available), 0)::bigint, coalesce(sum(reserved), 0)::bigint,
					coalesce(sum(sold), 0)::bigint, coalesce(sum(refunded), 0)::bigint, coalesce(sum(supply), 0)::bigint
					FROM `+b.t("stock_levels")+` WHERE sku = $1 AND bucket <> 0`, sku).Scan(&o[0], &o[1], &o[2], &o[3], &o[4])
				return o, err
			},
			journal: func(cursor string) ([]rec, error) {
				es, err := readJournal(cursor, stock.ErrSKUNotFound, func(cursor string) ([]stock.Entry, string, error) {
					return inv.Entries(ctx, sku, cursor, stock.MaxPage)
				})
				return stockRecs(sku, es), err
			},
			grown: func(cursor string) (bool, error) {
				es, _, err := inv.Entries(ctx, sku, cursor, 1)
				if errors.Is(err, stock.ErrSKUNotFound) {
					return false, nil
				}
				return len(es) > 0, err
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
	if l == nil {
		return nil, fmt.Errorf("%w: nil ledger", ErrInvalid)
	}
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
			journal: func(cursor string) ([]rec, error) {
				es, err := readJournal(cursor, wallet.ErrAccountNotFound, func(cursor string) ([]wallet.Entry, string, error) {
					return l.Entries(ctx, account, cursor, wallet.MaxPage)
				})
				return walletRecs(es), err
			},
			grown: func(cursor string) (bool, error) {
				es, _, err := l.Entries(ctx, account, cursor, 1)
				if errors.Is(err, wallet.ErrAccountNotFound) {
					return false, nil
				}
				return len(es) > 0, err
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
	key    []any    // the journal's key in the book (a SKU's bucket 0)
	fields []string // names of the compared values, the first projected levels
	// state reads the values in Redis.
	state func() ([]int64, error)
	// others sums the projection of the key's journals other than key's
	// (a SKU's other buckets); nil when there are none.
	others func(tx pgx.Tx) ([]int64, error)
	// journal reads Redis's journal from after cursor to its end.
	journal func(cursor string) ([]rec, error)
	// grown reports whether Redis's journal holds an entry after cursor.
	grown func(cursor string) (bool, error)
}

// reconcile compares one key's values in Redis with the book's in one
// consistent view: the book's state is read in one snapshot (a read-only
// repeatable-read transaction), Redis's journal from the book's position
// on, and Redis's values before and after that read, compared only when
// they agree and the journal holds nothing after the entries read (each
// change appends its entry in the script that makes it, so the second read
// of the values is then the state the journal read ends at). The entries the book had not booked in the snapshot are
// added as the sink will book them (decide: entries seen again, duplicate
// operations and unreadable entries add nothing). The read starts at the
// entry at the position: when that entry is gone (a checkpoint trimmed it
// after the snapshot, or Redis lost it), a difference is compared again
// from a new snapshot before it is reported. It returns nil when the two
// agree.
func (b *Book) reconcile(ctx context.Context, k reconcileKey) (*Drift, error) {
	var last *Drift
	busy := false
	for range reconcileAttempts {
		var d *Drift
		var again bool
		err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var err error
			d, again, err = b.compare(ctx, tx, k)
			return err
		})
		if err != nil {
			return nil, err
		}
		busy = d == nil && again
		switch {
		case busy:
			continue
		case d == nil:
			return nil, nil
		case again:
			last = d
			continue
		}
		return d, b.explain(ctx, k, d)
	}
	if busy || last == nil {
		return nil, ErrBusy
	}
	return last, b.explain(ctx, k, last)
}

// compare makes one comparison of reconcile in the snapshot tx. It returns
// the drift (nil when the two agree) and whether to compare again: Redis
// changed during the read (no drift returned), or the entry at the book's
// position is gone from the journal (drift returned).
func (b *Book) compare(ctx context.Context, tx pgx.Tx, k reconcileKey) (*Drift, bool, error) {
	st, err := b.readState(ctx, tx, k.j, k.key, nil, false)
	if err != nil {
		return nil, false, err
	}
	others := make([]int64, len(k.j.levels))
	if k.others != nil {
		if others, err = k.others(tx); err != nil {
			return nil, false, err
		}
	}
	redis1, err := k.state()
	if err != nil {
		return nil, false, err
	}
	from := ""
	positioned := st.lastMs != 0 || st.lastSeq != 0
	if positioned {
		from = before(st.lastMs, st.lastSeq)
	}
	pending, err := k.journal(from)
	if err != nil {
		return nil, false, err
	}
	gone := positioned && (len(pending) == 0 || pending[0].ms != st.lastMs || pending[0].seq != st.lastSeq)
	rewind := gone && (len(pending) == 0 || pending[0].kind != "checkpoint")
	if rewind {
		// As the wallet sink does: read the journal again from its start.
		if pending, err = k.journal(""); err != nil {
			return nil, false, err
		}
	}
	redis2, err := k.state()
	if err != nil {
		return nil, false, err
	}
	if !levelsEqual(redis1, redis2) {
		return nil, true, nil
	}
	// Values that agree before and after the journal read may still have
	// moved in between and back (a hold and its void, a reservation and
	// its cancellation): the journal read then holds the first change and
	// not the second. Each change appends its entry in the script that
	// makes it, so a journal with nothing after the entries read means
	// the second read of the values is the state that journal read ends at.
	tail := from
	if rewind {
		tail = ""
	}
	if len(pending) > 0 {
		tail = pending[len(pending)-1].id
	}
	if grown, err := k.grown(tail); err != nil || grown {
		return nil, grown, err
	}
	if st, err = b.readState(ctx, tx, k.j, k.key, pending, false); err != nil {
		return nil, false, err
	}
	out := decide(k.j, k.key, st, pending, rewind && k.j.module == "wallet")
	book := make([]int64, len(k.fields))
	for i := range book {
		book[i] = others[i] + out.cur[i]
	}
	if levelsEqual(redis1, book) {
		return nil, false, nil
	}
	label, _ := k.j.keyLabel(k.key)
	return &Drift{Module: k.j.module, Key: label, Fields: k.fields, Redis: redis1, Book: book, Unbooked: len(out.rows),
		position: [2]int64{st.lastMs, st.lastSeq}}, gone, nil
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
// does not: Redis's retained journal against the book's entries from its
// oldest on, an entry being the same on both sides when its stream ID and
// content are.
func (b *Book) explain(ctx context.Context, k reconcileKey, d *Drift) error {
	j, key := k.j, k.key
	var err error
	if d.Anomalies, err = b.Anomalies(ctx, j.module, d.Key); err != nil {
		return err
	}
	all, err := k.journal("")
	if err != nil || len(all) == 0 {
		return err
	}
	n := len(key)
	rows, err := b.pool.Query(ctx, fmt.Sprintf("SELECT ms, seq, stream_id, %s FROM %s WHERE %s AND (ms, seq) >= ($%d, $%d) ORDER BY ms, seq",
		strings.Join(j.contentCols(), ", "), b.t(j.entries), j.keyWhere(), n+1, n+2), append(append([]any{}, key...), all[0].ms, all[0].seq)...)
	if err != nil {
		return err
	}
	type booked struct {
		id      string
		content []any
	}
	var bookedEntries []booked
	inBook := map[string][]any{}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			rows.Close()
			return err
		}
		e := booked{id: v[2].(string), content: v[3:]}
		bookedEntries = append(bookedEntries, e)
		inBook[e.id] = e.content
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	inJournal := map[string][]any{}
	for _, r := range all {
		inJournal[r.id] = r.content()
	}
	for _, e := range bookedEntries {
		if c, ok := inJournal[e.id]; !ok || !sameContent(c, e.content) {
			d.BookOnly = append(d.BookOnly, e.id)
		}
	}
	noted := map[string]bool{}
	for _, a := range d.Anomalies {
		noted[a.StreamID] = true
	}
	for _, r := range all {
		if idLess(d.position[0], d.position[1], r.ms, r.seq) || noted[r.id] {
			continue
		}
		if c, ok := inBook[r.id]; !ok || !sameContent(c, r.content()) {
			d.JournalOnly = append(d.JournalOnly, r.id)
		}
	}
	return nil
}
