package pgjournal

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// journal describes the tables of one module's book.
type journal struct {
	module   string   // "stock" or "wallet"
	entries  string   // table of entries
	proj     string   // table of the projection
	keyCols  []string // identity of one journal: sku, bucket / account
	levels   []string // projected columns; entries hold d_<col> and <col>
	extra    []string // further columns of an entry, after kind and op
	keyLabel func(key []any) (string, int)
	// scope names the column that, with kind and op, identifies an
	// operation in one journal ("" when kind and op do): wallet's
	// src_group, since a transfer into a group is named by its source's
	// group and ID.
	scope string
}

// keyWhere is the condition that selects one journal's rows, its key
// being the first parameters of the query ("sku = $1 AND bucket = $2").
func (j *journal) keyWhere() string {
	where := make([]string, len(j.keyCols))
	for i, c := range j.keyCols {
		where[i] = fmt.Sprintf("%s = $%d", c, i+1)
	}
	return strings.Join(where, " AND ")
}

// contentCols are the columns that hold what an entry says, in the order
// of rec.content.
func (j *journal) contentCols() []string {
	cols := append([]string{"kind", "op"}, j.extra...)
	for _, l := range j.levels {
		cols = append(cols, "d_"+l)
	}
	return append(cols, j.levels...)
}

// rec is one journal entry on its way to the book.
type rec struct {
	id       string
	ms, seq  int64 // -1 when id is not a stream ID
	kind, op string
	scope    string // with kind and op, the operation's identity (see journal.scope)
	extra    []any
	delta    []int64
	after    []int64
	// bad is why the entry cannot be booked ("" when it can).
	bad string
}

// content is what the entry says, in the order of journal.contentCols.
func (r *rec) content() []any {
	c := append([]any{r.kind, r.op}, r.extra...)
	for _, d := range r.delta {
		c = append(c, d)
	}
	for _, a := range r.after {
		c = append(c, a)
	}
	return c
}

// opKey is an operation's identity within one journal.
type opKey struct{ kind, scope, op string }

type anomaly struct {
	streamID, kind, detail string
}

// parseID splits a stream ID "<ms>-<seq>".
func parseID(id string) (ms, seq int64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	return ms, seq, err1 == nil && err2 == nil && ms >= 0 && seq >= 0
}

func idLess(ams, aseq, bms, bseq int64) bool {
	return ams < bms || ams == bms && aseq < bseq
}

// before returns the stream ID right before ms-seq, as a cursor from
// which a journal read starts with the entry ms-seq itself; "" for 0-0.
func before(ms, seq int64) string {
	switch {
	case seq > 0:
		return fmt.Sprintf("%d-%d", ms, seq-1)
	case ms > 0:
		return fmt.Sprintf("%d-18446744073709551615", ms-1)
	}
	return ""
}

func levelsEqual(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameContent reports whether two entry contents (as rec.content and a
// row of journal.contentCols give them) are the same.
func sameContent(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if norm(a[i]) != norm(b[i]) {
			return false
		}
	}
	return true
}

// norm makes a value of an entry's content comparable: bytes (memo_raw)
// as a string apart from text, none (NULL) as nil.
func norm(v any) any {
	if b, ok := v.([]byte); ok {
		if b == nil {
			return nil
		}
		return "bytes " + string(b)
	}
	return v
}

// describe renders an entry's content for an anomaly's detail.
func describe(c []any) string {
	parts := make([]string, 0, len(c))
	for _, v := range c {
		switch v := v.(type) {
		case []byte:
			if v != nil {
				parts = append(parts, strconv.Quote(string(v)))
			}
		case string:
			parts = append(parts, strconv.Quote(v))
		default:
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

// bookState is what the book holds of one journal, as the booking of some
// entries needs it: the projection, the position, the booked entries among
// those IDs (with what they say), and the booked operations among theirs.
type bookState struct {
	cur             []int64
	lastMs, lastSeq int64
	present         map[[2]int64][]any
	bookedOp        map[opKey]string
}

// batcher sends a batch of queries: a transaction, or the pool.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// readState reads the book's state of one journal for recs in tx; forUpdate
// locks the projection row first (creating it), so bookings of the same
// journal take turns.
func (b *Book) readState(ctx context.Context, tx batcher, j *journal, key []any, recs []rec, forUpdate bool) (*bookState, error) {
	keyWhere := j.keyWhere()
	n := len(j.keyCols)
	st := &bookState{cur: make([]int64, len(j.levels)), present: map[[2]int64][]any{}, bookedOp: map[opKey]string{}}
	batch := &pgx.Batch{}
	lock := ""
	if forUpdate {
		batch.Queue(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT DO NOTHING",
			b.t(j.proj), strings.Join(j.keyCols, ", "), placeholders(1, n)), key...)
		lock = " FOR UPDATE"
	}
	batch.Queue(fmt.Sprintf("SELECT %s, last_ms, last_seq FROM %s WHERE %s%s",
		strings.Join(j.levels, ", "), b.t(j.proj), keyWhere, lock), key...).Query(func(rows pgx.Rows) error {
		dst := make([]any, 0, len(st.cur)+2)
		for i := range st.cur {
			dst = append(dst, &st.cur[i])
		}
		_, err := pgx.ForEachRow(rows, append(dst, &st.lastMs, &st.lastSeq), func() error { return nil })
		return err
	})
	if len(recs) > 0 {
		// The entries come in journal order from one journal: the booked
		// ones among them lie in one range of the primary key.
		lo, hi := -1, -1
		ops := make([]string, len(recs))
		for i, r := range recs {
			ops[i] = r.op
			if r.ms < 0 {
				continue // no stream ID to look up
			}
			if lo < 0 || idLess(r.ms, r.seq, recs[lo].ms, recs[lo].seq) {
				lo = i
			}
			if hi < 0 || idLess(recs[hi].ms, recs[hi].seq, r.ms, r.seq) {
				hi = i
			}
		}
		if lo < 0 {
			lo, hi = 0, 0 // an empty range
		}
		cols := j.contentCols()
		batch.Queue(fmt.Sprintf("SELECT ms, seq, %s FROM %s WHERE %s AND (ms, seq) BETWEEN ($%d, $%d) AND ($%d, $%d)",
			strings.Join(cols, ", "), b.t(j.entries), keyWhere, n+1, n+2, n+3, n+4),
			append(append([]any{}, key...), recs[lo].ms, recs[lo].seq, recs[hi].ms, recs[hi].seq)...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					return err
				}
				st.present[[2]int64{v[0].(int64), v[1].(int64)}] = v[2:]
			}
			return rows.Err()
		})
		scope := "''"
		if j.scope != "" {
			scope = j.scope
		}
		// One probe of the operation index per entry, whatever the planner
		// believes of the table's size (OFFSET 0 keeps the subquery from
		// being flattened into a join it could turn around).
		batch.Queue(fmt.Sprintf("SELECT e.kind, e.scope, e.op, e.stream_id FROM unnest($%d::text[]) AS u(op) CROSS JOIN LATERAL "+
			"(SELECT kind, %s AS scope, op, stream_id FROM %s WHERE %s AND op = u.op AND op <> '' OFFSET 0) e",
			n+1, scope, b.t(j.entries), keyWhere), append(append([]any{}, key...), ops)...).Query(func(rows pgx.Rows) error {
			var k, s, o, id string
			_, err := pgx.ForEachRow(rows, []any{&k, &s, &o, &id}, func() error { st.bookedOp[opKey{k, s, o}] = id; return nil })
			return err
		})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	return st, nil
}

// outcome is what booking some entries does to the book.
type outcome struct {
	rows      [][]any // entries to insert, as copy rows
	anomalies []anomaly
	cur       []int64 // the projection after them
	// the position after them: the newest stream ID seen, or, after a
	// rewind, the last entry's
	lastMs, lastSeq int64
}

// decide books recs (one journal's entries, in journal order) against st
// without writing anything: entries already booked with the same content
// are skipped (delivered again after a crash or a lost commit); an entry
// under a booked stream ID with other content is a reused_id anomaly (the
// journal gave the ID out again: Redis's clock went back); entries it
// cannot read and operations booked under another stream ID are anomalies;
// every other entry is booked and added to the projection, with a gap
// anomaly when its levels before it are not the projection's. rewind sets
// the position to the last entry instead of the newest seen.
func decide(j *journal, key []any, st *bookState, recs []rec, rewind bool) outcome {
	out := outcome{cur: append([]int64{}, st.cur...), lastMs: st.lastMs, lastSeq: st.lastSeq}
	if rewind {
		for _, r := range recs {
			if r.ms >= 0 {
				out.lastMs, out.lastSeq = r.ms, r.seq
			}
		}
	}
	booked := map[opKey]string{}
	for k, v := range st.bookedOp {
		booked[k] = v
	}
	for _, r := range recs {
		if !rewind && idLess(out.lastMs, out.lastSeq, r.ms, r.seq) {
			out.lastMs, out.lastSeq = r.ms, r.seq
		}
		if have, ok := st.present[[2]int64{r.ms, r.seq}]; ok {
			if r.bad == "" && sameContent(r.content(), have) {
				continue // delivered again after a crash or a lost commit
			}
			detail := fmt.Sprintf("entry %s is booked as %s, and the journal now holds %s under its ID", r.id, describe(have), describe(r.content()))
			if r.bad != "" {
				detail += " (" + r.bad + ")"
			}
			out.anomalies = append(out.anomalies, anomaly{r.id, "reused_id", detail})
			continue
		}
		if r.bad != "" {
			out.anomalies = append(out.anomalies, anomaly{r.id, "poison", r.bad})
			continue
		}
		if r.op != "" {
			k := opKey{r.kind, r.scope, r.op}
			if first, ok := booked[k]; ok {
				out.anomalies = append(out.anomalies, anomaly{r.id, "duplicate_op",
					fmt.Sprintf("%s %s already booked as entry %s", r.kind, r.op, first)})
				continue
			}
			booked[k] = r.id
		}
		before := make([]int64, len(out.cur))
		for i := range out.cur {
			before[i] = r.after[i] - r.delta[i]
		}
		if !levelsEqual(before, out.cur) {
			out.anomalies = append(out.anomalies, anomaly{r.id, "gap", fmt.Sprintf(
				"%s before entry %s are %v in the journal, %v in the book", strings.Join(j.levels, "/"), r.id, before, out.cur)})
		}
		for i := range out.cur {
			out.cur[i] += r.delta[i]
		}
		row := append(append([]any{}, key...), r.ms, r.seq, r.id)
		out.rows = append(out.rows, append(row, r.content()...))
	}
	return out
}

// apply books the entries of one journal (in journal order) in tx, as
// decide says, and moves the projection and the position. The projection
// row is locked first, so bookings of the same journal take turns. It
// returns how many entries it inserted.
func (b *Book) apply(ctx context.Context, tx pgx.Tx, j *journal, key []any, recs []rec, rewind bool) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	st, err := b.readState(ctx, tx, j, key, recs, true)
	if err != nil {
		return 0, err
	}
	out := decide(j, key, st, recs, rewind)
	if len(out.rows) > 0 {
		cols := append(append([]string{}, j.keyCols...), "ms", "seq", "stream_id")
		// Nothing else writes this journal's rows while the projection
		// row is locked, and booked entries were left out, so the copy
		// meets no conflict.
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{b.cfg.schema, j.entries}, append(cols, j.contentCols()...), pgx.CopyFromRows(out.rows)); err != nil {
			return 0, err
		}
	}
	batch := &pgx.Batch{}
	set := make([]string, len(j.levels))
	args := append([]any{}, key...)
	for i, l := range j.levels {
		set[i] = fmt.Sprintf("%s = $%d", l, len(args)+1)
		args = append(args, out.cur[i])
	}
	args = append(args, int64(len(out.rows)), out.lastMs, out.lastSeq)
	batch.Queue(fmt.Sprintf("UPDATE %s SET %s, entries = entries + $%d, last_ms = $%d, last_seq = $%d, updated_at = now() WHERE %s",
		b.t(j.proj), strings.Join(set, ", "), len(args)-2, len(args)-1, len(args), j.keyWhere()), args...)
	label, bucket := j.keyLabel(key)
	for _, a := range out.anomalies {
		batch.Queue("INSERT INTO "+b.t("anomalies")+" (module, key, bucket, stream_id, kind, detail) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
			j.module, label, bucket, a.streamID, a.kind, a.detail)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}
	return len(out.rows), nil
}

func placeholders(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(p, ", ")
}
