package stock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

// MaxBuckets is the most buckets a SKU can be split into.
const MaxBuckets = 64

// maxRoutingRounds bounds the script calls of one order that learn the
// bucket count.
const maxRoutingRounds = 5

// maxRefills bounds the refills of one order's home bucket. Each asks twice
// as much as the one before, so only refills taken by other orders while
// the other buckets are restocked again and again reach it.
const maxRefills = 64

// errContended is an order whose home bucket was refilled maxRefills times,
// each time emptied by other orders first: nothing was decided or stored.
var errContended = errors.New("stock: refills of the home bucket taken by other orders; nothing decided, call again with the same ID")

// WithBuckets splits a hot SKU into b buckets (default 1, at most 64) on
// different hash tags, so that on a Cluster its sales spread over several
// nodes. A buyer always buys from their home bucket (a hash of the buyer ID),
// so the per-buyer limit is still checked in one script and a retry never
// moves to another bucket. A bucket that runs short is refilled from the
// others by idempotent transfers; an order is refused as sold out only when
// no other bucket could give units. A SKU split into buckets must be the
// only item of its orders. The count is fixed at Create.
func WithBuckets(b int) SKUOption { return skuOptionFunc(func(c *skuConfig) { c.buckets = b }) }

// bucketTag is the hash tag of bucket k of a SKU in group g: g itself for
// bucket 0, "g#k" otherwise ('#' never occurs in a valid name, so no user
// group collides with it).
func bucketTag(g string, k int) string {
	if k == 0 {
		return g
	}
	return g + "#" + strconv.Itoa(k)
}

// home is the bucket of id among b; the scripts compute the same hash.
func home(id string, b int) int {
	var h uint32
	for i := 0; i < len(id); i++ {
		h = h*31 + uint32(id[i])
	}
	return int(h % uint32(b))
}

// bucketsOf returns the cached bucket count of sku (1 when unknown: the
// scripts refuse a call routed with a wrong count and say the right one).
func (inv *Inventory) bucketsOf(sku string) int {
	if v, ok := inv.buckets.Load(sku); ok {
		return v.(int)
	}
	return 1
}

func (inv *Inventory) learnBuckets(sku, count string) {
	if b, err := strconv.Atoi(count); err == nil && b >= 1 && b <= MaxBuckets {
		inv.buckets.Store(sku, b)
	}
}

// lookupBuckets returns sku's bucket count, reading it from bucket 0 when
// it is not cached.
func (inv *Inventory) lookupBuckets(ctx context.Context, g, sku string) (int, error) {
	if v, ok := inv.buckets.Load(sku); ok {
		return v.(int), nil
	}
	var v []any
	err := retry.Read(ctx, inv.cfg.retry, func(ctx context.Context, _ int) (err error) {
		v, err = inv.rdb.HMGet(ctx, inv.skuKey(g, sku), "available", "buckets").Result()
		return err
	})
	if err != nil {
		return 0, err
	}
	if v[0] == nil {
		return 0, ErrSKUNotFound
	}
	b := 1
	if s, ok := v[1].(string); ok {
		b, _ = strconv.Atoi(s)
	}
	inv.buckets.Store(sku, b)
	return b, nil
}

// tags returns the hash tags of every bucket of sku.
func (inv *Inventory) tags(ctx context.Context, g, sku string) ([]string, error) {
	b, err := inv.lookupBuckets(ctx, g, sku)
	if err != nil {
		return nil, err
	}
	t := make([]string, b)
	for k := range t {
		t[k] = bucketTag(g, k)
	}
	return t, nil
}

func (inv *Inventory) transfersKey(t, sku string) string { return inv.space.Key(t, "transfers", sku) }

// refill moves up to want units into bucket to of sku from the other
// buckets, first finishing transfers a crashed caller left in flight. It
// returns the units moved. One pipelined read of every bucket comes first,
// so a SKU whose buckets are all empty (the usual state once a sale is sold
// out) costs one round trip here. A bucket is skipped only when that read
// found it with nothing available, nothing reserved (no hold that may have
// expired) and no transfer toward it just finished; every other bucket is
// asked, its expired holds reclaimed first, so an order is refused as sold
// out only on a view with no such units left. A transfer never moves more
// than the receiving bucket can take below 2^53-1, so its "in" step does not
// refuse for overflow (unless a restock of the receiver raced it; the
// transfer then stays in flight, counted by Audit, and later refills go on
// without it).
func (inv *Inventory) refill(ctx context.Context, sku string, want int64, to int) (int64, error) {
	g, err := inv.checkSKU(sku)
	if err != nil {
		return 0, err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return 0, err
	}
	st, err := inv.bucketState(ctx, tags, sku)
	if err != nil {
		return 0, err
	}
	moved, err := inv.finish(ctx, tags, sku, to, st.pending)
	if err != nil || moved >= want {
		return moved, err
	}
	received := map[int]bool{}
	for _, p := range st.pending {
		received[p.to] = true
	}
	for step := 1; step < len(tags) && moved < want; step++ {
		p := pendingTransfer{from: (to + step) % len(tags), to: to, id: "t-" + retry.Nonce()}
		if st.avail[p.from] <= 0 && st.reserved[p.from] <= 0 && !received[p.from] {
			continue
		}
		if st.reserved[p.from] > 0 {
			if err := inv.reclaimAll(ctx, tags[p.from], sku); err != nil {
				return moved, err
			}
		}
		room := valid.MaxAmount - st.supply[to] - moved
		if room <= 0 {
			break
		}
		if p.qty, p.seq, err = inv.transferOut(ctx, tags[p.from], sku, p.id, want-moved, to, room); err != nil {
			return moved, err
		}
		if p.qty == 0 {
			continue
		}
		if err := inv.transferIn(ctx, tags, sku, p); err != nil {
			return moved, err // finished by the next refill
		}
		moved += p.qty
	}
	return moved, nil
}

// reclaimAll returns every expired hold of one bucket to its available
// units, batch after batch.
func (inv *Inventory) reclaimAll(ctx context.Context, tag, sku string) error {
	for range maxAgain {
		var v []int64
		err := retry.Do(ctx, inv.cfg.retry, func(ctx context.Context, _ int) (err error) {
			v, err = reclaimScript.Run(ctx, inv.rdb,
				[]string{inv.skuKey(tag, sku), inv.buyersKey(tag, sku), inv.journalKey(tag, sku), inv.holdsKey(tag, sku)},
				sku, reclaimBatch).Int64Slice()
			return err
		})
		if err != nil {
			return err
		}
		if v[1] == 0 {
			return nil
		}
	}
	return errors.New("stock: too many expired holds to reclaim in one call")
}

func (inv *Inventory) transferOut(ctx context.Context, from, sku, id string, want int64, to int, room int64) (qty, seq int64, err error) {
	reply, ackErr, err := inv.write(ctx, xferScript,
		[]string{inv.skuKey(from, sku), inv.journalKey(from, sku), inv.transfersKey(from, sku)},
		[]any{"out", sku, id, want, to, room})
	if err == nil && ackErr != nil {
		err = unacked(ackErr)
	}
	if err != nil {
		return 0, 0, err
	}
	return num(reply, 0), num(reply, 1), nil
}

// unacked is the error of a refill stopped at a transfer step its replicas
// did not acknowledge (WithReplicaAck). Going on would build on a step a
// failover may undo: units credited that never left the other bucket, or an
// out-record deleted for a credit that is then lost. The transfer stays in
// flight (Audit counts it) and the next refill finishes it once the
// replicas acknowledge; the order that needed the units is not decided, so
// calling again with the same ID decides it.
func unacked(ackErr error) error {
	return fmt.Errorf("transfer between buckets in flight, stopped after a step the replicas did not acknowledge: %w: %w",
		ErrUnknownOutcome, ackErr)
}

// transferIn credits transfer p to its bucket, first crediting the earlier
// transfers between the same two buckets when the receiver asks for them,
// then deletes p's out-record.
func (inv *Inventory) transferIn(ctx context.Context, tags []string, sku string, p pendingTransfer) error {
	for attempt := 0; ; attempt++ {
		reply, ackErr, err := inv.write(ctx, xferScript,
			[]string{inv.skuKey(tags[p.to], sku), inv.journalKey(tags[p.to], sku)},
			[]any{"in", sku, p.id, p.qty, p.from, p.seq})
		if err == nil && ackErr != nil {
			err = unacked(ackErr) // keep the out-record: the credit may yet be lost
		}
		if err != nil {
			if strings.Contains(err.Error(), "ERR overflow") {
				return fmt.Errorf("stock: transfer %s of %s: %w", p.id, sku, errOverflow)
			}
			return err
		}
		if num(reply, 0) >= 0 {
			break
		}
		if attempt > 0 {
			return fmt.Errorf("stock: transfer %s of %s: %w", p.id, sku, errTransferMissing)
		}
		ps, err := inv.pendingTransfers(ctx, tags, sku)
		if err != nil {
			return err
		}
		for _, q := range ps {
			if q.from == p.from && q.to == p.to && q.seq < p.seq {
				if err := inv.transferIn(ctx, tags, sku, q); err != nil {
					return err
				}
			}
		}
	}
	return retry.Do(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
		return inv.rdb.HDel(ctx, inv.transfersKey(tags[p.from], sku), p.id).Err()
	})
}

// errOverflow is a transfer the receiving bucket cannot take: it would pass
// 2^53-1 units.
var errOverflow = errors.New("the receiving bucket would pass 2^53-1 units")

// The errors of a transfer the buckets do not explain. Sentinels, so the
// span's error.type (otelx.ErrorType) carries their text and never a SKU or
// a transfer ID.
var (
	errTransferMissing   = errors.New("stock: an earlier transfer between the buckets is missing")
	errMalformedTransfer = errors.New("stock: malformed transfer record")
)

// pendingTransfer is an out-record: units that left bucket from for bucket
// to as transfer number seq between the two, maybe not yet credited.
type pendingTransfer struct {
	from, to int
	id       string
	qty, seq int64
}

// pendingTransfers lists the out-records of every bucket of sku, in order of
// giving bucket, receiving bucket and number.
func (inv *Inventory) pendingTransfers(ctx context.Context, tags []string, sku string) ([]pendingTransfer, error) {
	st, err := inv.bucketState(ctx, tags, sku)
	return st.pending, err
}

// buckets is one read of every bucket of a SKU.
type buckets struct {
	pending                 []pendingTransfer
	avail, reserved, supply []int64
}

// bucketState reads, in one pipelined round trip (one per node on a
// Cluster), the out-records of every bucket of sku, sorted as
// pendingTransfers returns them, and each bucket's available, reserved and
// supply units. The read is retried as any read (retry.Read): on a Cluster
// a reply that says a bucket's slot moved, or a node that is gone, is read
// again on a reloaded slot map.
func (inv *Inventory) bucketState(ctx context.Context, tags []string, sku string) (buckets, error) {
	outs := make([]*redis.MapStringStringCmd, len(tags))
	levels := make([]*redis.SliceCmd, len(tags))
	err := retry.Read(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
		pipe := inv.rdb.Pipeline()
		for k, t := range tags {
			outs[k] = pipe.HGetAll(ctx, inv.transfersKey(t, sku))
			levels[k] = pipe.HMGet(ctx, inv.skuKey(t, sku), "available", "reserved", "supply")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return nil
	})
	if err != nil {
		return buckets{}, err
	}
	st := buckets{avail: make([]int64, len(tags)), reserved: make([]int64, len(tags)), supply: make([]int64, len(tags))}
	for k := range tags {
		m, err := outs[k].Result()
		if err != nil {
			return buckets{}, err
		}
		v, err := levels[k].Result()
		if err != nil {
			return buckets{}, err
		}
		n := func(i int) int64 { s, _ := v[i].(string); x, _ := strconv.ParseInt(s, 10, 64); return x }
		st.avail[k], st.reserved[k], st.supply[k] = n(0), n(1), n(2)
		for id, v := range m {
			if strings.HasPrefix(id, "next:") {
				continue
			}
			p := pendingTransfer{from: k, id: id}
			if _, err := fmt.Sscanf(v, "%d %d %d", &p.qty, &p.to, &p.seq); err != nil || p.to < 0 || p.to >= len(tags) {
				return buckets{}, fmt.Errorf("stock: transfer %s of %s: %q: %w", id, sku, v, errMalformedTransfer)
			}
			st.pending = append(st.pending, p)
		}
	}
	slices.SortFunc(st.pending, func(a, b pendingTransfer) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to), cmp.Compare(a.seq, b.seq))
	})
	return st, nil
}

// finish credits the transfers ps and returns the units credited to bucket
// to. Their out-records were read, not written, here: with WithReplicaAck
// the replicas must have each giving bucket's records before any is
// credited.
func (inv *Inventory) finish(ctx context.Context, tags []string, sku string, to int, ps []pendingTransfer) (int64, error) {
	acked := map[int]bool{}
	for _, p := range ps {
		if acked[p.from] {
			continue
		}
		if _, err := script.Acked(ctx, inv.rdb, inv.cfg.ack, inv.transfersKey(tags[p.from], sku)); err != nil {
			return 0, unacked(err)
		}
		acked[p.from] = true
	}
	var n int64
	for _, p := range ps {
		if err := inv.transferIn(ctx, tags, sku, p); errors.Is(err, errOverflow) {
			continue // stays in flight; it must not block every later refill
		} else if err != nil {
			return n, err
		}
		if p.to == to {
			n += p.qty
		}
	}
	return n, nil
}

// inFlight sums the units of transfers that left a bucket and were not yet
// credited to another.
func (inv *Inventory) inFlight(ctx context.Context, tags []string, sku string) (int64, error) {
	ps, err := inv.pendingTransfers(ctx, tags, sku)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ps {
		var last int64
		err := retry.Read(ctx, inv.cfg.retry, func(ctx context.Context, _ int) (err error) {
			last, err = inv.rdb.HGet(ctx, inv.skuKey(tags[p.to], sku), "in:"+strconv.Itoa(p.from)).Int64()
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return err
		})
		if err != nil {
			return 0, err
		}
		if p.seq > last {
			n += p.qty
		}
	}
	return n, nil
}

// claim binds order o's ID to its buyer and items in bucket 0's tag (the
// slot group's own), before an order on a SKU split into buckets runs in the
// buyer's home bucket: the order's marker lives in that bucket, so without
// the claim the same ID with another buyer would look in another bucket's
// marker and be applied twice. The claim lives at least as long as the
// marker (the window, plus the hold's TTL for a reservation). It is
// idempotent, so a lost reply is simply retried. It returns claimID's
// decided and ackErr.
func (inv *Inventory) claim(ctx context.Context, op, g string, o Order, mode string) (decided bool, ackErr, err error) {
	kind, how, keep := "", "check", inv.cfg.window.Milliseconds()
	switch op {
	case "deduct":
		kind, how = "deduct", "claim"
	case "reserve":
		ttl, _ := strconv.ParseInt(mode, 10, 64)
		kind, how, keep = "reserve", "claim", keep+ttl
	case "cancel":
		// A Cancel before its Reserve leaves a tombstone: claim the ID for
		// the reservation it cancels.
		kind, how = "reserve", "claim"
	}
	it := o.Items[0]
	return inv.claimID(ctx, g, o.ID, o.Buyer, it.SKU+" "+strconv.FormatInt(it.Qty, 10), kind, how, keep)
}

// claimSlack is how much longer than asked a claim lives. The claim's life
// starts when claim.lua runs, the marker's when the operation runs, later:
// an operation whose reply comes within claimSlack of the claim's sending
// has a marker that expires before the claim; a slower one lengthens the
// claim again once it is decided (lengthenClaim).
const claimSlack = 2 * time.Second

// lengthenClaim runs claim again when the operation's reply came claimSlack
// or more after the claim was sent, so the claim outlives the marker the
// operation wrote meanwhile. An error leaves the operation decided: the
// same call again replays it and claims the ID anew.
func lengthenClaim(claimedAt *time.Time, claim func() (bool, error, error)) error {
	if claimedAt.IsZero() || time.Since(*claimedAt) < claimSlack {
		return nil
	}
	*claimedAt = time.Now()
	_, ackErr, err := claim()
	if err != nil {
		return fmt.Errorf("the ID's claim was not lengthened (call again with the same ID): %w", err)
	}
	return ackErr
}

// claimID runs claim.lua for operation id of slot group g. decided reports
// that {g} holds a decision of the operation itself (stored before the SKU
// was split into buckets, or a tombstone): the operation must then run in
// {g}, where that decision is replayed, not in its bucket, which never saw
// it. With WithReplicaAck the claim is acknowledged like any write (a claim
// lost in a failover would let the same ID run again in another bucket);
// ackErr reports a claim its replicas did not acknowledge, for the caller
// to return with the operation's result.
func (inv *Inventory) claimID(ctx context.Context, g, id, buyer, desc, kind, how string, keep int64) (decided bool, ackErr, err error) {
	var reply []any
	err = retry.Do(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
		cmd, _, err := script.RunAck(ctx, inv.rdb, inv.cfg.ack, claimScript, []string{inv.opKey(g, id)},
			buyer, desc, kind, how, strconv.FormatInt(keep+claimSlack.Milliseconds(), 10))
		ackErr = nil
		if errors.Is(err, script.ErrReplicaAck) {
			ackErr, err = err, nil
		}
		if err != nil {
			return err
		}
		reply, err = cmd.Slice()
		return err
	})
	if err != nil {
		return false, nil, err
	}
	if str(reply, 0) != "ok" {
		return false, nil, refusal(str(reply, 0), id, str(reply, 1), "")
	}
	return str(reply, 2) == "decided", ackErr, nil
}

// learnFenced makes sure the bucket count of a single-item order's SKU is
// known before a fenced call is sent: a fenced write on a SKU split into
// buckets must raise the fence in every bucket first (raiseFences), also when
// the buyer's home is bucket 0, where a call routed without the count would
// otherwise be accepted at once. A SKU not found stays unknown (the script
// answers not_found).
func (inv *Inventory) learnFenced(ctx context.Context, cc callConfig, skus ...string) error {
	if cc.fence == nil || len(skus) != 1 {
		return nil
	}
	g, err := inv.checkSKU(skus[0])
	if err != nil {
		return nil // refused before any I/O by the caller's validation
	}
	if _, err := inv.lookupBuckets(ctx, g, skus[0]); err != nil && !errors.Is(err, ErrSKUNotFound) {
		return err
	}
	return nil
}

// ownPath reports whether order o of a batch must take Deduct's path (one
// call after the other) rather than the batch's pipeline: on a SKU split into
// buckets, an order claims its ID in bucket 0's tag first (claim), and a
// fenced one raises the fence in every bucket before that.
func (inv *Inventory) ownPath(ctx context.Context, o Order, opts []CallOption) bool {
	if len(o.Items) != 1 {
		return false
	}
	cc, err := newCallConfig(opts)
	if err != nil {
		return false
	}
	if err := inv.learnFenced(ctx, cc, o.Items[0].SKU); err != nil {
		return true // Deduct's path reports it
	}
	b := inv.bucketsOf(o.Items[0].SKU)
	return b > 1
}
