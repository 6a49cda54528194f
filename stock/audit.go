package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/stream"
)

// AuditReport is what Audit found for one SKU. Problems is empty when every
// check passed.
type AuditReport struct {
	SKU string
	// Supply = Initial + Restocked - WrittenOff, from the SKU's counters.
	Initial, Restocked, WrittenOff, Supply int64
	Levels                                 Levels
	// InFlight counts units moving between buckets of a SKU split into
	// buckets (0 otherwise).
	InFlight int64
	// Checkpoint is the ID of the journal entry the replay started from
	// ("" when there is none and the replay started at the SKU's creation).
	Checkpoint string
	// Entries is the number of journal entries replayed.
	Entries  int
	Problems []string
}

// OK reports whether the audit found nothing wrong.
func (r AuditReport) OK() bool { return len(r.Problems) == 0 }

// Err returns nil when the audit found nothing wrong, and otherwise an error
// wrapping ErrMismatch that lists the problems.
func (r AuditReport) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("stock: audit %s: %w: %s", r.SKU, ErrMismatch, strings.Join(r.Problems, "; "))
}

func (r *AuditReport) problem(format string, a ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
}

// auditPage is how many journal entries an audit reads per round trip
// (tests lower it, export_test.go).
var auditPage int64 = 1000

// auditRounds bounds how often an audit of one bucket starts over because a
// checkpoint moved the journal's start while it was read.
const auditRounds = 5

// Audit checks sku's books and reports what differs:
//
//   - the identity initial + restocked - written_off = available + reserved
//   - sold - refunded (+ units in flight between buckets);
//   - each journal entry since the last checkpoint: the levels before it plus
//     its deltas equal the levels it records, and those satisfy the
//     identity;
//   - the journal's last levels equal the SKU's current levels;
//   - the reserved units equal the units of the holds indexed for the SKU
//     (a hold counted twice, or one gone while its units stay reserved).
//
// The counters and the journal position are read in one atomic step; entries
// appended afterwards are not part of the audit. A Checkpoint and a Trim
// (by any process) may run meanwhile: each page of the journal is read
// together with the SKU's last checkpoint, and when that moved the audit
// of the bucket starts over from the new checkpoint, so what they changed
// is never reported as drift; when a checkpoint comes during each of 5
// attempts, Audit returns an error that says so (not a finding). A SKU split into buckets is
// audited bucket by bucket (each bucket's supply also counts the units moved
// in and out), and the identity is checked over all buckets plus the units
// in flight; those are read one bucket after the other, so the sum is exact
// only while no order or transfer of the SKU runs. An error is returned only
// when the audit could not run (ErrSKUNotFound, I/O).
func (inv *Inventory) Audit(ctx context.Context, sku string) (_ AuditReport, err error) {
	ctx, done := inv.tel.begin(ctx, "audit")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return AuditReport{}, err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return AuditReport{}, fmt.Errorf("stock: audit %s: %w", sku, err)
	}
	if len(tags) == 1 {
		return inv.auditBucket(ctx, g, sku)
	}
	total := AuditReport{SKU: sku}
	for k, t := range tags {
		r, err := inv.auditBucket(ctx, t, sku)
		if k > 0 && errors.Is(err, ErrSKUNotFound) {
			// The SKU exists (bucket 0 says how it is split): a bucket
			// without its hash is a finding, not a SKU never created.
			total.problem("bucket %d: the bucket's hash is missing", k)
			continue
		}
		if err != nil {
			return AuditReport{}, err
		}
		total.Initial += r.Initial
		total.Restocked += r.Restocked
		total.WrittenOff += r.WrittenOff
		total.Levels = total.Levels.add(r.Levels)
		total.Entries += r.Entries
		if k == 0 {
			total.Checkpoint = r.Checkpoint
		}
		for _, p := range r.Problems {
			total.problem("bucket %d: %s", k, p)
		}
	}
	if total.InFlight, err = inv.inFlight(ctx, tags, sku); err != nil {
		return AuditReport{}, fmt.Errorf("stock: audit %s: %w", sku, err)
	}
	total.Supply = total.Initial + total.Restocked - total.WrittenOff
	if got := units(total.Levels) + total.InFlight; got != total.Supply {
		total.problem("supply %d, but available + reserved + sold - refunded + in flight = %d over all buckets", total.Supply, got)
	}
	return total, nil
}

// Verify is Audit for a caller that wants a verdict, as wallet's Verify: nil
// when sku's books check out, an error wrapping ErrMismatch (with the
// problems) when they do not, or the error that kept the audit from running.
func (inv *Inventory) Verify(ctx context.Context, sku string) error {
	rep, err := inv.Audit(ctx, sku)
	if err != nil {
		return err
	}
	return rep.Err()
}

// auditFields are the fields of a SKU's hash an audit reads, in order.
var auditFields = []string{"initial", "restocked", "written_off", "supply",
	"available", "reserved", "sold", "refunded", "ckpt", "moved"}

// auditBucket audits one bucket (the whole SKU when it has one): its own
// counters, with moved counting units transferred in minus out, and its
// journal.
func (inv *Inventory) auditBucket(ctx context.Context, tag, sku string) (AuditReport, error) {
	skuKey, journal := inv.skuKey(tag, sku), inv.journalKey(tag, sku)
	// A Checkpoint and a Trim may run while the journal is paged: each page
	// is read with the SKU's checkpoint (stream.Range), and the audit
	// starts over from the new checkpoint when it moved.
	for attempt := 1; ; attempt++ {
		var h *redis.SliceCmd
		var last *redis.XMessageSliceCmd
		var holds *redis.StringSliceCmd
		_, err := inv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			h = p.HMGet(ctx, skuKey, auditFields...)
			last = p.XRevRangeN(ctx, journal, "+", "-", 1)
			holds = p.ZRange(ctx, inv.holdsKey(tag, sku), 0, -1)
			return nil
		})
		if err != nil {
			return AuditReport{}, fmt.Errorf("stock: audit %s: %w", sku, err)
		}
		v := h.Val()
		if v[0] == nil {
			return AuditReport{}, fmt.Errorf("stock: audit %s: %w", sku, ErrSKUNotFound)
		}
		var bad []string
		n := func(i int) int64 {
			s, _ := v[i].(string)
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil && (i != 9 || v[i] != nil) { // moved is absent on a SKU made before buckets
				bad = append(bad, fmt.Sprintf("%s is %q, not a whole number", auditFields[i], s))
			}
			return x
		}
		r := AuditReport{SKU: sku, Initial: n(0), Restocked: n(1), WrittenOff: n(2), Supply: n(3),
			Levels: Levels{Available: n(4), Reserved: n(5), Sold: n(6), Refunded: n(7)}}
		r.Checkpoint, _ = v[8].(string)
		moved := n(9)
		for _, b := range bad {
			r.problem("%s", b)
		}
		end := ""
		if msgs := last.Val(); len(msgs) > 0 {
			end = msgs[0].ID
		}
		restart, err := inv.replay(ctx, skuKey, journal, end, &r)
		if err != nil {
			return AuditReport{}, fmt.Errorf("stock: audit %s: %w", sku, err)
		}
		if restart {
			if attempt < auditRounds {
				continue
			}
			return AuditReport{}, fmt.Errorf("stock: audit %s: a checkpoint came during each of %d reads of the journal; "+
				"nothing is wrong with it so far, call again", sku, auditRounds)
		}
		if want := r.Initial + r.Restocked - r.WrittenOff + moved; r.Supply != want {
			r.problem("supply %d, but initial %d + restocked %d - written off %d + moved in %d = %d",
				r.Supply, r.Initial, r.Restocked, r.WrittenOff, moved, want)
		}
		if got := units(r.Levels); got != r.Supply {
			r.problem("supply %d, but available + reserved + sold - refunded = %d", r.Supply, got)
		}
		// Every reserved unit is held by one indexed hold (expired or not:
		// an expired hold stays reserved until it is reclaimed).
		var held int64
		for _, m := range holds.Val() {
			q, _, _ := strings.Cut(m, " ")
			n, err := strconv.ParseInt(q, 10, 64)
			if err != nil || n < 1 {
				r.problem("malformed hold %q", m)
				continue
			}
			held += n
		}
		if held != r.Levels.Reserved {
			r.problem("reserved %d, but the holds add up to %d", r.Levels.Reserved, held)
		}
		return r, nil
	}
}

func units(l Levels) int64 { return l.Available + l.Reserved + l.Sold - l.Refunded }

// replay walks the journal from r.Checkpoint (or the start) to end and
// records what differs in r. moved reports that the SKU's checkpoint
// (skuKey's ckpt) is no longer r.Checkpoint: a Checkpoint, maybe followed
// by a Trim, came during the walk, and what the walk found says nothing.
// While it is unchanged no entry from r.Checkpoint on was trimmed (Trim
// keeps every entry from the last checkpoint on), so a missing entry is
// drift.
func (inv *Inventory) replay(ctx context.Context, skuKey, journal, end string, r *AuditReport) (moved bool, err error) {
	var lv Levels
	var supply int64
	start, first := "-", true
	if r.Checkpoint != "" {
		start = r.Checkpoint
	}
	for end != "" {
		msgs, ckpt, err := stream.Range(ctx, inv.rdb, inv.cfg.retry, journal, start, end, auditPage, skuKey, "ckpt")
		if err != nil {
			return false, err
		}
		if ckpt != r.Checkpoint {
			return true, nil
		}
		for _, m := range msgs {
			e := parseEntry(m)
			if first {
				first = false
				switch {
				case r.Checkpoint != "" && (e.ID != r.Checkpoint || e.Kind != KindCheckpoint):
					r.problem("journal starts with %s entry %s, not with checkpoint %s", e.Kind, e.ID, r.Checkpoint)
					lv, supply = e.After, e.Supply
					continue
				case r.Checkpoint != "":
					lv, supply = e.After, e.Supply
				case e.Kind != KindCreate:
					r.problem("journal starts with %s entry %s, not with the creation", e.Kind, e.ID)
					lv, supply = e.After, e.Supply
					continue
				}
			}
			r.Entries++
			if e.Kind != KindCheckpoint || e.ID != r.Checkpoint {
				lv = Levels{lv.Available + e.Delta.Available, lv.Reserved + e.Delta.Reserved,
					lv.Sold + e.Delta.Sold, lv.Refunded + e.Delta.Refunded}
				supply += e.SupplyDelta
			}
			if lv != e.After || supply != e.Supply {
				r.problem("entry %s (%s %s): recorded levels %+v supply %d, replay gives %+v supply %d",
					e.ID, e.Kind, e.Op, e.After, e.Supply, lv, supply)
				lv, supply = e.After, e.Supply
			}
			if units(e.After) != e.Supply {
				r.problem("entry %s (%s %s): levels %+v do not add up to supply %d", e.ID, e.Kind, e.Op, e.After, e.Supply)
			}
		}
		if int64(len(msgs)) < auditPage {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	switch {
	case first && r.Checkpoint != "":
		r.problem("journal entries from checkpoint %s up to %s are missing", r.Checkpoint, end)
		return false, nil
	case end == "":
		r.problem("journal is empty")
		return false, nil
	case first:
		r.problem("journal entries up to %s vanished during the audit", end)
		return false, nil
	}
	if lv != r.Levels || supply != r.Supply {
		r.problem("journal ends at levels %+v supply %d, the SKU has %+v supply %d", lv, supply, r.Levels, r.Supply)
	}
	return false, nil
}
