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

// rec is one journal entry on its way to the book.
type rec struct {
	id       string
	ms, seq  int64
	kind, op string
	extra    []any
	delta    []int64
	after    []int64
	// bad is why the entry cannot be booked ("" when it can); lost marks
	// an entry the journal no longer holds.
	bad  string
	lost bool
}

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

func levelsEqual(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// apply books the entries of one journal (in journal order) in tx:
// entries already booked are skipped, entries it cannot read and
// operations booked under another stream ID become anomalies, every other
// entry is inserted and added to the projection, and an entry whose levels
// before it are not the projection's is booked with a gap anomaly. The
// projection row is locked first, so sinks writing the same journal take
// turns. It returns how many entries it inserted.
func (b *Book) apply(ctx context.Context, tx pgx.Tx, j *journal, key []any, recs []rec) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	keyWhere := j.keyWhere()
	n := len(j.keyCols)

	ops := make([]string, len(recs))
	for i, r := range recs {
		ops[i] = r.op
	}
	batch := &pgx.Batch{}
	batch.Queue(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT DO NOTHING",
		b.t(j.proj), strings.Join(j.keyCols, ", "), placeholders(1, n)), key...)
	var cur []int64
	var lastMs, lastSeq int64
	batch.Queue(fmt.Sprintf("SELECT %s, last_ms, last_seq FROM %s WHERE %s FOR UPDATE",
		strings.Join(j.levels, ", "), b.t(j.proj), keyWhere), key...).QueryRow(func(row pgx.Row) error {
		cur = make([]int64, len(j.levels))
		dst := make([]any, 0, len(cur)+2)
		for i := range cur {
			dst = append(dst, &cur[i])
		}
		return row.Scan(append(dst, &lastMs, &lastSeq)...)
	})
	present := map[[2]int64]bool{}
	// The batch is one journal's entries in order: the booked ones among
	// them lie in one range of the primary key.
	lo, hi := 0, 0
	for i, r := range recs {
		if idLess(r.ms, r.seq, recs[lo].ms, recs[lo].seq) {
			lo = i
		}
		if idLess(recs[hi].ms, recs[hi].seq, r.ms, r.seq) {
			hi = i
		}
	}
	batch.Queue(fmt.Sprintf("SELECT ms, seq FROM %s WHERE %s AND (ms, seq) BETWEEN ($%d, $%d) AND ($%d, $%d)",
		b.t(j.entries), keyWhere, n+1, n+2, n+3, n+4),
		append(append([]any{}, key...), recs[lo].ms, recs[lo].seq, recs[hi].ms, recs[hi].seq)...).Query(func(rows pgx.Rows) error {
		var a, s int64
		_, err := pgx.ForEachRow(rows, []any{&a, &s}, func() error { present[[2]int64{a, s}] = true; return nil })
		return err
	})
	bookedOp := map[[2]string]string{}
	// One probe of the (key, op, kind) index per entry, whatever the
	// planner believes of the table's size (OFFSET 0 keeps the subquery
	// from being flattened into a join it could turn around).
	batch.Queue(fmt.Sprintf("SELECT e.kind, e.op, e.stream_id FROM unnest($%d::text[]) AS u(op) CROSS JOIN LATERAL "+
		"(SELECT kind, op, stream_id FROM %s WHERE %s AND op = u.op AND op <> '' OFFSET 0) e",
		n+1, b.t(j.entries), keyWhere), append(append([]any{}, key...), ops)...).Query(func(rows pgx.Rows) error {
		var k, o, id string
		_, err := pgx.ForEachRow(rows, []any{&k, &o, &id}, func() error { bookedOp[[2]string{k, o}] = id; return nil })
		return err
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}

	var rows [][]any
	var anomalies []anomaly
	for _, r := range recs {
		if idLess(lastMs, lastSeq, r.ms, r.seq) {
			lastMs, lastSeq = r.ms, r.seq
		}
		switch {
		case present[[2]int64{r.ms, r.seq}]:
			continue // delivered again after a crash or a lost commit
		case r.lost:
			anomalies = append(anomalies, anomaly{r.id, "lost", r.bad})
			continue
		case r.bad != "":
			anomalies = append(anomalies, anomaly{r.id, "poison", r.bad})
			continue
		}
		if r.op != "" {
			k := [2]string{r.kind, r.op}
			if first, ok := bookedOp[k]; ok {
				anomalies = append(anomalies, anomaly{r.id, "duplicate_op",
					fmt.Sprintf("%s %s already booked as entry %s", r.kind, r.op, first)})
				continue
			}
			bookedOp[k] = r.id
		}
		before := make([]int64, len(cur))
		for i := range cur {
			before[i] = r.after[i] - r.delta[i]
		}
		if !levelsEqual(before, cur) {
			anomalies = append(anomalies, anomaly{r.id, "gap", fmt.Sprintf(
				"%s before entry %s are %v in the journal, %v in the book", strings.Join(j.levels, "/"), r.id, before, cur)})
		}
		for i := range cur {
			cur[i] += r.delta[i]
		}
		row := append(append([]any{}, key...), r.ms, r.seq, r.id, r.kind, r.op)
		row = append(row, r.extra...)
		for _, d := range r.delta {
			row = append(row, d)
		}
		for _, a := range r.after {
			row = append(row, a)
		}
		rows = append(rows, row)
	}

	if len(rows) > 0 {
		cols := append(append([]string{}, j.keyCols...), "ms", "seq", "stream_id", "kind", "op")
		cols = append(cols, j.extra...)
		for _, l := range j.levels {
			cols = append(cols, "d_"+l)
		}
		cols = append(cols, j.levels...)
		// Nothing else writes this journal's rows while the projection
		// row is locked, and present entries were left out, so the copy
		// meets no conflict.
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{b.cfg.schema, j.entries}, cols, pgx.CopyFromRows(rows)); err != nil {
			return 0, err
		}
	}
	batch = &pgx.Batch{}
	set := make([]string, len(j.levels))
	args := append([]any{}, key...)
	for i, l := range j.levels {
		set[i] = fmt.Sprintf("%s = $%d", l, len(args)+1)
		args = append(args, cur[i])
	}
	args = append(args, int64(len(rows)), lastMs, lastSeq)
	batch.Queue(fmt.Sprintf("UPDATE %s SET %s, entries = entries + $%d, last_ms = $%d, last_seq = $%d, updated_at = now() WHERE %s",
		b.t(j.proj), strings.Join(set, ", "), len(args)-2, len(args)-1, len(args), keyWhere), args...)
	label, bucket := j.keyLabel(key)
	for _, a := range anomalies {
		batch.Queue("INSERT INTO "+b.t("anomalies")+" (module, key, bucket, stream_id, kind, detail) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
			j.module, label, bucket, a.streamID, a.kind, a.detail)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}
	return len(rows), nil
}

func placeholders(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(p, ", ")
}
