package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/stream"
	"github.com/redkit-go/redkit/internal/valid"
)

// Journal entry kinds.
const (
	KindCreate      = "create"       // the SKU was created; Delta.Available = initial stock
	KindRestock     = "restock"      // units added
	KindWriteOff    = "writeoff"     // available units removed
	KindClose       = "close"        // the SKU was closed; no deltas
	KindDeduct      = "deduct"       // units sold by Deduct
	KindReserve     = "reserve"      // units moved to reserved by Reserve
	KindConfirm     = "confirm"      // held units sold (and the rest returned) by Confirm
	KindCancel      = "cancel"       // held units returned by Cancel
	KindExpire      = "expire"       // held units returned after the deadline
	KindRefund      = "refund"       // sold units returned by Refund
	KindTransferOut = "transfer_out" // units left this bucket for another
	KindTransferIn  = "transfer_in"  // units arrived from another bucket
	KindCheckpoint  = "checkpoint"   // no change; carries the levels so audits start here
)

// Entry is one change of one SKU, appended by the same script that made
// the change, so the journal never misses or duplicates one.
type Entry struct {
	ID    string // stream entry ID, increasing; unique within the SKU's journal; usable as an Entries cursor
	Kind  string // one of the Kind constants
	SKU   string
	Op    string // the order or operation ID; empty for create, close, checkpoint
	Buyer string // the buyer, for order kinds
	// Delta is the change of each level; After the levels right after it.
	Delta, After Levels
	// SupplyDelta is the change of supply (initial + restocked - written off,
	// plus units moved in from other buckets) and Supply its value after.
	SupplyDelta, Supply int64
	// Bucket is the bucket whose journal holds the entry (0 unless the SKU is
	// split into buckets; set by Consume, IDs are unique per bucket).
	Bucket int
	// Journal is the SKU whose journal holds the entry (set by Consume). It
	// differs from SKU only in an entry written there by other means than
	// stock's scripts (a damaged entry).
	Journal string
	Time    time.Time // server time of the entry (from its ID)
}

func parseEntry(m redis.XMessage) Entry {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	n := func(k string) int64 { x, _ := strconv.ParseInt(s(k), 10, 64); return x }
	e := Entry{
		ID: m.ID, Kind: s("kind"), SKU: s("sku"), Op: s("op"), Buyer: s("buyer"),
		Delta:       Levels{Available: n("d_avail"), Reserved: n("d_res"), Sold: n("d_sold"), Refunded: n("d_ref")},
		After:       Levels{Available: n("avail"), Reserved: n("res"), Sold: n("sold"), Refunded: n("ref")},
		SupplyDelta: n("d_supply"), Supply: n("supply"),
	}
	if ms, _, ok := strings.Cut(m.ID, "-"); ok {
		v, _ := strconv.ParseInt(ms, 10, 64)
		e.Time = time.UnixMilli(v)
	}
	return e
}

// MaxPage is the largest page Entries returns.
const MaxPage = valid.MaxPage

// Entries returns up to limit (1..MaxPage) journal entries of sku that
// come after cursor, oldest first, and the cursor of the next page ("" when
// this page reached the end), as wallet's Entries does for an account. An
// empty cursor starts at the oldest retained entry; entries older than the
// last checkpoint may have been trimmed. A SKU split into buckets: bucket
// 0's journal (Consume reads them all). Errors: ErrInvalid, ErrSKUNotFound.
func (inv *Inventory) Entries(ctx context.Context, sku, cursor string, limit int) (_ []Entry, _ string, err error) {
	ctx, done := inv.tel.begin(ctx, "entries")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return nil, "", err
	}
	// A SKU whose hash is gone still has the journal it kept.
	journal := inv.journalKey(g, sku)
	msgs, next, exists, err := stream.Page(ctx, inv.rdb, inv.cfg.retry, journal, cursor, limit, inv.skuKey(g, sku), journal)
	switch {
	case errors.Is(err, ErrInvalid):
		return nil, "", err
	case err != nil:
		return nil, "", fmt.Errorf("stock: entries %s: %w", sku, err)
	case !exists:
		return nil, "", fmt.Errorf("stock: entries %s: %w", sku, ErrSKUNotFound)
	}
	out := make([]Entry, len(msgs))
	for i, m := range msgs {
		out[i] = parseEntry(m)
	}
	return out, next, nil
}

// ErrMismatch means Verify or Checkpoint found books the journal does not
// explain (Checkpoint then writes nothing, so the next Audit still replays
// and reports what differs). wallet's Verify and Checkpoint report the same
// finding with an error of the same name.
var ErrMismatch = errors.New("stock: the levels differ from what the journal explains")

// Checkpoint appends a checkpoint entry carrying sku's levels and returns its
// ID. Audits replay the journal from the last checkpoint, and Trim may delete
// the entries before it. A SKU split into buckets gets a checkpoint in every
// bucket's journal; the ID returned is bucket 0's.
//
// A checkpoint is the starting point of later audits, so it must not be
// written over drift: Checkpoint first audits each bucket and refuses with
// ErrMismatch (writing nothing to that bucket) when the audit found a problem,
// and the script that writes it refuses too when the levels differ from the
// journal's last entry (changed since the audit).
//
// With WithReplicaAck each bucket's checkpoint waits for the replicas (WAIT
// pipelined with the script); a shortfall returns the ID with an error
// wrapping ErrReplicaAck, after every bucket got its checkpoint.
func (inv *Inventory) Checkpoint(ctx context.Context, sku string) (_ string, err error) {
	ctx, done := inv.tel.begin(ctx, "checkpoint")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return "", err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return "", fmt.Errorf("stock: checkpoint %s: %w", sku, err)
	}
	var first string
	var ackErr error
	for k := len(tags) - 1; k >= 0; k-- {
		r, err := inv.auditBucket(ctx, tags[k], sku)
		if err != nil {
			return "", errors.Join(fmt.Errorf("stock: checkpoint %s: %w", sku, err), ackErr)
		}
		if err := r.Err(); err != nil {
			return "", errors.Join(fmt.Errorf("stock: checkpoint %s bucket %d: %w", sku, k, err), ackErr)
		}
		cmd, _, err := script.RunAck(ctx, inv.rdb, inv.cfg.ack, checkpointScript,
			[]string{inv.skuKey(tags[k], sku), inv.journalKey(tags[k], sku)}, sku)
		if errors.Is(err, ErrReplicaAck) {
			if ackErr == nil {
				ackErr = fmt.Errorf("stock: checkpoint %s: %w", sku, err)
			}
			err = nil
		}
		var id string
		if err == nil {
			id, err = cmd.Text()
		}
		switch {
		case errors.Is(err, redis.Nil):
			return "", errors.Join(fmt.Errorf("stock: checkpoint %s: %w", sku, ErrSKUNotFound), ackErr)
		case err != nil && strings.HasPrefix(err.Error(), "DRIFT"):
			return "", errors.Join(fmt.Errorf("stock: checkpoint %s bucket %d: %w: %w", sku, k, ErrMismatch, err), ackErr)
		case err != nil:
			return "", errors.Join(fmt.Errorf("stock: checkpoint %s: %w", sku, err), ackErr)
		}
		first = id
	}
	return first, ackErr
}

// Trim deletes the journal entries of sku (of every bucket) that are older
// than its last checkpoint, except those a consumer group (see Consume) has
// not yet read or acknowledged and that are younger than the holdback
// (WithJournalHoldback, default 7 days): an abandoned group holds back the
// trim for that long at most. It returns how many entries it deleted; a
// group that lost entries it had not acknowledged is counted in the
// redkit.stock.journal.overrun counter. With WithReplicaAck, a journal it
// deleted entries from waits for the replicas (WAIT after the script); a
// shortfall returns the count with an error wrapping ErrReplicaAck.
func (inv *Inventory) Trim(ctx context.Context, sku string) (_ int64, err error) {
	ctx, done := inv.tel.begin(ctx, "trim")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return 0, err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return 0, fmt.Errorf("stock: trim %s: %w", sku, err)
	}
	if err := inv.mirrorGroups(ctx, tags, sku); err != nil {
		return 0, fmt.Errorf("stock: trim %s: %w", sku, err)
	}
	var total int64
	var ackErr error
	for _, t := range tags {
		v, err := trimScript.Run(ctx, inv.rdb, []string{inv.skuKey(t, sku), inv.journalKey(t, sku)},
			sku, strconv.FormatInt(inv.cfg.holdback.Milliseconds(), 10)).Slice()
		if err != nil {
			return total, errors.Join(fmt.Errorf("stock: trim %s: %w", sku, err), ackErr)
		}
		total += num(v, 0)
		if n := num(v, 1); n > 0 {
			inv.tel.overrun.Add(ctx, n, inv.tel.attrs("trim", "overrun").Add...)
		}
		if num(v, 0) > 0 {
			if err := inv.acked(ctx, inv.journalKey(t, sku)); err != nil && ackErr == nil {
				ackErr = fmt.Errorf("stock: trim %s: %w", sku, err)
			}
		}
	}
	return total, ackErr
}

// mirrorGroups gives every bucket's journal of sku the consumer groups of
// bucket 0's, created at the first entry. A consumer group starts on bucket
// 0's journal (Consume of a SKU not created yet knows no other) and reaches
// the other buckets at its next round; a Trim in between would otherwise
// find no group on their journals and delete entries the group has not
// read. Created from "0", a group holds the entries back as any group that
// has not read them (for the holdback at most).
func (inv *Inventory) mirrorGroups(ctx context.Context, tags []string, sku string) error {
	if len(tags) < 2 {
		return nil
	}
	groups, err := inv.rdb.XInfoGroups(ctx, inv.journalKey(tags[0], sku)).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return nil
		}
		return err
	}
	for _, t := range tags[1:] {
		for _, gr := range groups {
			err := inv.rdb.XGroupCreate(ctx, inv.journalKey(t, sku), gr.Name, "0").Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") && !strings.Contains(err.Error(), "requires the key to exist") {
				return err
			}
		}
	}
	return nil
}

// Consumer names a reader of the journals of some SKUs. Entries are read
// through a Redis consumer group, so several consumers with the same Group
// share the work and each entry is handled by one of them until
// acknowledged.
type Consumer struct {
	Group string   // consumer group, e.g. "warehouse-db"
	Name  string   // this consumer within the group, e.g. the host name
	SKUs  []string // the SKUs whose journals are read
	// Batch is the most entries handed to the handler at once, 1..MaxPage
	// (default 100).
	Batch int64
	// MinIdle is how long an entry handed to another consumer of the group
	// stays unacknowledged before this one takes it over (default 30s): a
	// crashed consumer's entries are not lost. Keep it well above the
	// handler's longest run: a consumer whose batch is taken over may still
	// be handling it (see Consume).
	MinIdle time.Duration
	// Poll is the wait between rounds when no journal had anything new
	// (default 100ms).
	Poll time.Duration
	// ForgetIdle is how long another consumer of the group may stay idle,
	// with no entry pending, before this one removes it from the group
	// (default 1h): consumer names used once (a host name, a pod name) do
	// not stay in the group for good. A consumer removed while still
	// running is added back at its next read; one with entries pending is
	// never removed (its entries are taken over after MinIdle first).
	ForgetIdle time.Duration
}

// Consume reads the journals of c.SKUs and calls handle with each batch of
// entries of one journal, at least once each and in journal order across
// the whole group: no consumer of the group is handed an entry of a
// journal while an older entry of it is pending for (handed to, not yet
// acknowledged by) another consumer, however many consumers run and
// whichever of them crash, stall or restart. Each round asks Redis, in one
// script per journal, for the oldest pending entries this consumer holds
// already (a handler that failed, a restart under the same name) or that
// another consumer left unacknowledged for MinIdle (taken over, in order,
// up to the first one still held by a live consumer); only when nothing is
// pending are new entries read. So the consumers of a group take each
// journal one batch at a time; several SKUs spread the work over several
// consumers. The entries pass through that script, which costs the
// journal's Redis node more time per entry than a bare XREADGROUP would
// (BenchmarkConsume_serverTime measures both): larger batches cost less
// per entry.
//
// An entry is acknowledged only after handle returns nil, and only if
// this consumer still holds it: when another took it over meanwhile (this
// handler ran past MinIdle), the acknowledgement is the other's, and the
// late handler's work is a duplicate. So make handle idempotent by (SKU,
// Bucket, ID) (IDs are unique within one journal), and keep its runs well
// below MinIdle: a batch taken over is handed to the other consumer while
// the first may still be handling it, and the first may finish after the
// other, and after newer entries were handed out, since nothing newer is
// handed out only while the batch is pending.
//
// Consume returns when ctx ends (with ctx.Err()) or when handle fails (with
// its error; the batch stays unacknowledged and comes again, to this
// consumer when it restarts under the same name, or to another after
// MinIdle). Errors before any I/O: ErrInvalid (names, no SKU, Batch above
// MaxPage).
func (inv *Inventory) Consume(ctx context.Context, c Consumer, handle func(ctx context.Context, entries []Entry) error) error {
	if err := errors.Join(valid.Name("consumer group", c.Group), valid.Name("consumer name", c.Name)); err != nil {
		return err
	}
	if len(c.SKUs) == 0 {
		return fmt.Errorf("%w: consumer has no SKUs", ErrInvalid)
	}
	if c.Batch > MaxPage {
		return fmt.Errorf("%w: consumer batch %d above %d", ErrInvalid, c.Batch, MaxPage)
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.MinIdle <= 0 {
		c.MinIdle = 30 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = 100 * time.Millisecond
	}
	if c.ForgetIdle <= 0 {
		c.ForgetIdle = time.Hour
	}
	for _, sku := range c.SKUs {
		if _, err := inv.checkSKU(sku); err != nil {
			return err
		}
	}
	var streams []string
	bucketOf := map[string]int{}     // stream -> bucket
	journalOf := map[string]string{} // stream -> SKU
	// waiting holds the SKUs not created yet when Consume started: only
	// bucket 0's journal is known for them, so they are looked up again at
	// every idle round until they exist, and then every bucket is read.
	var waiting []string
	follow := func(sku string) (found bool, err error) {
		g := keys.Group(sku)
		tags, err := inv.tags(ctx, g, sku)
		if errors.Is(err, ErrSKUNotFound) {
			tags, err = []string{g}, nil // its journal will be bucket 0's
		} else if err == nil {
			found = true
		}
		if err != nil {
			return false, fmt.Errorf("stock: consume %s: %w", sku, err)
		}
		for k, t := range tags {
			s := inv.journalKey(t, sku)
			if _, ok := bucketOf[s]; ok {
				continue
			}
			streams, bucketOf[s], journalOf[s] = append(streams, s), k, sku
			// From "0": a bucket's journal created after Consume started is
			// read from its first entry.
			err = inv.rdb.XGroupCreateMkStream(ctx, s, c.Group, "0").Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				return false, fmt.Errorf("stock: consume %s: %w", sku, err)
			}
		}
		return found, nil
	}
	for _, sku := range c.SKUs {
		found, err := follow(sku)
		if err != nil {
			return err
		}
		if !found {
			waiting = append(waiting, sku)
		}
	}
	// round hands the next entries of one journal to handle and
	// acknowledges them; n counts what it found (entries handed out or
	// dropped), so an idle round reads 0.
	round := func(stream string) (n int, err error) {
		msgs, dropped, err := inv.nextEntries(ctx, stream, c.Group, c.Name, c.Batch, c.MinIdle)
		if err != nil || len(msgs) == 0 {
			return int(dropped), err
		}
		entries := make([]Entry, len(msgs))
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			entries[i], ids[i] = parseEntry(m), m.ID
			entries[i].Bucket, entries[i].Journal = bucketOf[stream], journalOf[stream]
		}
		bctx, done := inv.tel.consumeBatch(ctx)
		if err := handle(bctx, entries); err != nil {
			done(err)
			return 0, err
		}
		// Handled entries are acknowledged even when ctx ended meanwhile.
		actx, cancel := context.WithTimeout(context.WithoutCancel(bctx), 5*time.Second)
		defer cancel()
		_, err = inv.consumed(actx, stream, c.Group, c.Name, ids)
		done(err)
		return len(msgs), err
	}
	// forget removes the group's idle consumers, every ForgetIdle/2 at most.
	var forgotAt time.Time
	forget := func() error {
		if time.Since(forgotAt) < c.ForgetIdle/2 {
			return nil
		}
		forgotAt = time.Now()
		for _, s := range streams {
			err := forgetScript.Run(ctx, inv.rdb, []string{s}, c.Group, c.Name,
				strconv.FormatInt(max(c.ForgetIdle.Milliseconds(), 1), 10)).Err()
			if err != nil {
				return err
			}
		}
		return nil
	}
	for {
		still := waiting[:0]
		for _, sku := range waiting {
			found, err := follow(sku)
			if err != nil {
				return consumeErr(ctx, err)
			}
			if !found {
				still = append(still, sku)
			}
		}
		waiting = still
		busy := false
		for _, s := range streams {
			n, err := round(s)
			if err != nil {
				return consumeErr(ctx, err)
			}
			busy = busy || n > 0
		}
		if busy {
			continue
		}
		if err := forget(); err != nil {
			return consumeErr(ctx, err)
		}
		t := time.NewTimer(c.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// nextEntries runs consume.lua: the entries of stream handed to consumer
// name of group (its own pending ones again, others' idle for minIdle, or
// new ones; see the script), and how many pending entries were dropped
// because the journal no longer holds them.
func (inv *Inventory) nextEntries(ctx context.Context, stream, group, name string, batch int64, minIdle time.Duration) (
	[]redis.XMessage, int64, error) {
	v, err := consumeScript.Run(ctx, inv.rdb, []string{stream}, group, name, batch,
		max(minIdle.Milliseconds(), 1)).Slice()
	if err != nil {
		return nil, 0, err
	}
	if len(v) == 0 {
		return nil, 0, fmt.Errorf("consume.lua: empty reply")
	}
	dropped, _ := v[0].(int64)
	msgs := make([]redis.XMessage, 0, len(v)-1)
	for _, x := range v[1:] {
		e, _ := x.([]any)
		if len(e) != 2 {
			return nil, 0, fmt.Errorf("consume.lua: malformed entry %v", x)
		}
		id, _ := e[0].(string)
		kv, _ := e[1].([]any)
		m := redis.XMessage{ID: id, Values: make(map[string]any, len(kv)/2)}
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			m.Values[k] = kv[i+1]
		}
		msgs = append(msgs, m)
	}
	return msgs, dropped, nil
}

// consumed runs consumed.lua: it acknowledges those of ids (oldest first)
// that consumer name of group still holds, and returns how many.
func (inv *Inventory) consumed(ctx context.Context, stream, group, name string, ids []string) (int64, error) {
	args := make([]any, 0, len(ids)+2)
	args = append(args, group, name)
	for _, id := range ids {
		args = append(args, id)
	}
	return consumedScript.Run(ctx, inv.rdb, []string{stream}, args...).Int64()
}

func consumeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.Join(ctx.Err(), err)
	}
	return fmt.Errorf("stock: consume: %w", err)
}
