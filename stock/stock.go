package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

// MaxItems is the largest number of items in one order.
const MaxItems = 64

// maxAgain bounds the calls one write makes while its script keeps
// reclaiming batches of expired holds (64 holds per SKU per call).
const maxAgain = 1000

// Inventory sells units of SKUs kept in Redis. It is safe for concurrent use.
type Inventory struct {
	rdb       redis.UniversalClient
	cfg       config
	space     keys.Space
	reclaimer reclaimer
	tel       *telemetry
	buckets   sync.Map // SKU -> bucket count, fixed at Create
	windowArg any      // the idempotency window in milliseconds, as the scripts take it (boxed once)
}

// New returns an Inventory storing its data through rdb, which may be a
// single-node, failover or Cluster client. A nil rdb or an invalid option is
// an error wrapping ErrInvalid, and no Inventory is returned.
func New(rdb redis.UniversalClient, opts ...Option) (*Inventory, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: stock.New needs a Redis client", ErrInvalid)
	}
	cfg := newConfig(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	cfg.retry = cfg.retry.For(rdb) // whether go-redis re-sends decides what a failure means
	return &Inventory{rdb: rdb, cfg: cfg, space: keys.Space{Prefix: cfg.prefix, Module: "stock", Version: 1},
		tel: newTelemetry(cfg), windowArg: strconv.FormatInt(cfg.window.Milliseconds(), 10)}, nil
}

// Close stops the Inventory's background work (the reservation reclaimer)
// and waits for it. It does not close the Redis client. Close is idempotent;
// calls made after Close still work, and reservations still expire lazily.
// (So the package has no ErrClosed: a SKU closed with CloseSKU is
// ErrSKUClosed.)
func (inv *Inventory) Close() error {
	inv.reclaimer.close()
	return nil
}

// IdempotencyWindow returns how long this Inventory's scripts keep an
// operation's marker (WithIdempotencyWindow): an operation ID used again
// within it is answered from the marker; after it, it is a new operation.
func (inv *Inventory) IdempotencyWindow() time.Duration { return inv.cfg.window }

// Levels are the unit counts of a SKU. Available units can be sold; reserved
// units are held for a pending order; sold counts every unit ever sold;
// refunded counts sold units that came back (they are available again). So
// supply = available + reserved + sold - refunded.
type Levels struct {
	Available, Reserved, Sold, Refunded int64
}

// Item is one line of an order.
type Item struct {
	SKU string
	Qty int64
}

// Order is one purchase: all items or none. ID identifies the order for
// idempotency: a retry must reuse it with the same buyer and items.
type Order struct {
	ID    string
	Buyer string
	Items []Item
}

// Result is the outcome of a write.
type Result struct {
	// Replayed is true when an earlier call with the same operation ID had
	// already decided the operation and this call changed nothing. It is
	// false when the first decision was made during this call, even if the
	// call had to retry after a lost reply.
	Replayed bool
	// Levels holds, for each SKU the operation changed, its levels right
	// after the operation was first applied (stored with the operation, so
	// a replay returns the same numbers). Nil when the operation was refused.
	Levels map[string]Levels
	// Deadline is when a reservation's hold expires, on the Redis server's
	// clock; zero for orders placed with Deduct.
	Deadline time.Time
}

func (inv *Inventory) skuKey(g, sku string) string     { return inv.space.Key(g, "sku", sku) }
func (inv *Inventory) buyersKey(g, sku string) string  { return inv.space.Key(g, "buyers", sku) }
func (inv *Inventory) journalKey(g, sku string) string { return inv.space.Key(g, "journal", sku) }
func (inv *Inventory) holdsKey(g, sku string) string   { return inv.space.Key(g, "holds", sku) }
func (inv *Inventory) opKey(g, id string) string       { return inv.space.Key(g, "op", id) }

func (inv *Inventory) windowMillis() any {
	if inv.windowArg == nil {
		return strconv.FormatInt(inv.cfg.window.Milliseconds(), 10)
	}
	return inv.windowArg
}

// checkSKU validates a SKU name and returns its slot group.
func (inv *Inventory) checkSKU(sku string) (string, error) {
	if err := valid.Name("sku", sku); err != nil {
		return "", err
	}
	return keys.Group(sku), nil
}

// write runs a state-changing script, retrying a lost reply or a command
// that certainly did not run with identical arguments. With WithReplicaAck,
// ackErr reports a write that happened but was not acknowledged by enough
// replicas in time.
func (inv *Inventory) write(ctx context.Context, s *script.Script, keys []string, args []any) (reply []any, ackErr, err error) {
	err = retry.Do(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
		// "again": the script reclaimed a batch of expired holds but decided
		// nothing; the next call sees the units they returned.
		for range maxAgain {
			cmd, _, err := script.RunAck(ctx, inv.rdb, inv.cfg.ack, s, keys, args...)
			ackErr = nil
			if errors.Is(err, script.ErrReplicaAck) {
				ackErr, err = err, nil
			}
			if err != nil {
				return err
			}
			if reply, err = cmd.Slice(); err != nil || str(reply, 0) != "again" {
				return err
			}
		}
		return errors.New("stock: too many expired holds to reclaim in one call")
	})
	return reply, ackErr, err
}

// Create creates sku with initial available units (0..2^53-1). Creating a SKU
// that already exists with the same settings changes nothing and returns nil,
// so a retried Create is safe; with other settings it returns a
// *ConflictError. Create never resets the levels of an existing SKU.
func (inv *Inventory) Create(ctx context.Context, sku string, initial int64, opts ...SKUOption) error {
	_, err := inv.tel.observe(ctx, "create", func(ctx context.Context) (Result, error) {
		return Result{}, inv.create(ctx, sku, initial, opts)
	})
	return err
}

func (inv *Inventory) create(ctx context.Context, sku string, initial int64, opts []SKUOption) error {
	g, err := inv.checkSKU(sku)
	if err != nil {
		return err
	}
	var sc skuConfig
	for _, o := range opts {
		if o != nil {
			o.applySKU(&sc)
		}
	}
	if initial != 0 {
		if err := valid.Amount("initial stock", initial); err != nil {
			return err
		}
	}
	if sc.limit != 0 {
		if err := valid.Amount("buyer limit", sc.limit); err != nil {
			return err
		}
	}
	b := sc.buckets
	if b == 0 {
		b = 1
	}
	if b < 1 || b > MaxBuckets {
		return fmt.Errorf("%w: %d buckets, want 1..%d", ErrInvalid, b, MaxBuckets)
	}
	// A SKU that exists with another bucket count is a conflict, found
	// before any bucket is written.
	if have, err := inv.lookupBuckets(ctx, g, sku); err == nil && have != b {
		return fmt.Errorf("stock: create %s: %w", sku, &ConflictError{ID: sku, Field: "buckets"})
	} else if err != nil && !errors.Is(err, ErrSKUNotFound) {
		return fmt.Errorf("stock: create %s: %w", sku, err)
	}
	// Bucket 0 last: it is where other calls learn the bucket count, so a
	// SKU is visible only once every bucket exists. The remainder goes one
	// unit each to the first buckets, as the buckets' shares of 2^53-1
	// (adjust.lua), so no bucket starts above its share.
	for k := b - 1; k >= 0; k-- {
		share := initial / int64(b)
		if int64(k) < initial%int64(b) {
			share++
		}
		t := bucketTag(g, k)
		reply, ackErr, err := inv.write(ctx, createScript, []string{inv.skuKey(t, sku), inv.journalKey(t, sku)},
			[]any{sku, share, sc.limit, b, k})
		if err != nil {
			return fmt.Errorf("stock: create %s: %w", sku, err)
		}
		switch code, detail := str(reply, 0), str(reply, 1); code {
		case "created", "exists":
			err = ackErr
		default:
			err = refusal(code, sku, detail, "")
		}
		if err != nil {
			return fmt.Errorf("stock: create %s: %w", sku, err)
		}
	}
	inv.buckets.Store(sku, b)
	return nil
}

// Restock adds qty units to sku's available stock, once per operation ID
// opID. A closed SKU refuses with ErrSKUClosed.
func (inv *Inventory) Restock(ctx context.Context, opID, sku string, qty int64, opts ...CallOption) (Result, error) {
	return inv.tel.observe(ctx, "restock", func(ctx context.Context) (Result, error) {
		return inv.adjust(ctx, "restock", opID, sku, qty, opts)
	})
}

// WriteOff removes qty available units from sku (damaged, lost, returned to
// the supplier), once per operation ID opID. It refuses with ErrSoldOut when
// fewer than qty units are available (units of expired holds count once
// reclaimed; call Reclaim first to include them).
func (inv *Inventory) WriteOff(ctx context.Context, opID, sku string, qty int64, opts ...CallOption) (Result, error) {
	return inv.tel.observe(ctx, "writeoff", func(ctx context.Context) (Result, error) {
		return inv.adjust(ctx, "writeoff", opID, sku, qty, opts)
	})
}

func (inv *Inventory) adjust(ctx context.Context, kind, opID, sku string, qty int64, opts []CallOption) (Result, error) {
	g, err := inv.checkSKU(sku)
	cc, cerr := newCallConfig(opts)
	if err == nil {
		err = errors.Join(valid.Name("operation ID", opID), valid.Amount("quantity", qty), cerr)
	}
	if err != nil {
		return Result{}, fmt.Errorf("stock: %s: %w", kind, err)
	}
	if err := inv.learnFenced(ctx, cc, sku); err != nil {
		return Result{}, fmt.Errorf("stock: %s %s: %w", kind, opID, err)
	}
	nonce := retry.Nonce()
	var reply []any
	var ackErr, earlyAck error // earlyAck: fence records and claim
	for round := 0; ; round++ {
		// A SKU split into buckets: the operation's bucket is hash(op ID).
		b := inv.bucketsOf(sku)
		fenceAck, err := inv.raiseFences(ctx, cc, g, b)
		if err != nil {
			return Result{}, fmt.Errorf("stock: %s %s: %w", kind, opID, err)
		}
		earlyAck = errors.Join(earlyAck, fenceAck)
		t := bucketTag(g, home(opID, b))
		var claimedAt time.Time
		claim := func() (bool, error, error) {
			return inv.claimID(ctx, g, opID, "", sku+" "+strconv.FormatInt(qty, 10), kind, "claim",
				inv.cfg.window.Milliseconds())
		}
		if b > 1 {
			// The operation's marker lives in its bucket: claim the ID in
			// bucket 0's tag, where orders of the group claim theirs. A
			// decision {g} holds (a refusal stored before the SKU existed)
			// is replayed there.
			claimedAt = time.Now()
			decided, claimAck, err := claim()
			if err != nil {
				return Result{}, fmt.Errorf("stock: %s %s: %w", kind, opID, err)
			}
			earlyAck = errors.Join(earlyAck, claimAck)
			if decided {
				t = g
			}
		}
		s, ks, args := inv.withFence(cc, t, adjustScript,
			[]string{inv.opKey(t, opID), inv.skuKey(t, sku), inv.journalKey(t, sku)},
			[]any{opID, sku, kind, qty, nonce, inv.windowMillis()})
		reply, ackErr, err = inv.write(ctx, s, ks, args)
		if err != nil {
			return Result{}, fmt.Errorf("stock: %s %s: %w", kind, opID, errors.Join(err, earlyAck))
		}
		earlyAck = errors.Join(earlyAck, lengthenClaim(&claimedAt, claim))
		if str(reply, 0) != "buckets" || round > 0 {
			break
		}
		inv.learnBuckets(sku, str(reply, 2))
	}
	res, err := decode(reply, opID, []string{sku})
	if err = errors.Join(err, earlyAck, ackErr); err != nil {
		return res, fmt.Errorf("stock: %s %s: %w", kind, opID, err)
	}
	return res, nil
}

// CloseSKU ends the sale of sku for good: it stops sales, reservations and
// restocks, and deletes the SKU's per-buyer counters (WithBuyerLimit), which
// only judge the limit of new orders, so an ended sale does not keep a field
// per buyer who bought. Holds already taken can still be confirmed, cancelled
// or expire, sold orders refunded and write-offs made; none of them brings a
// counter back. Closing a closed SKU returns nil (and deletes counters a
// closed SKU may still have).
func (inv *Inventory) CloseSKU(ctx context.Context, sku string) error {
	_, err := inv.tel.observe(ctx, "close_sku", func(ctx context.Context) (Result, error) {
		return Result{}, inv.closeSKU(ctx, sku)
	})
	return err
}

func (inv *Inventory) closeSKU(ctx context.Context, sku string) error {
	g, err := inv.checkSKU(sku)
	if err != nil {
		return err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return fmt.Errorf("stock: close %s: %w", sku, err)
	}
	// Closing is a write like any other: with WithReplicaAck each bucket's
	// close waits for its replicas, and one they did not acknowledge is
	// reported (ErrReplicaAck) after the remaining buckets are closed.
	var ackErr error
	for _, t := range tags {
		err = retry.Do(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
			_, _, err := script.RunAck(ctx, inv.rdb, inv.cfg.ack, closeScript,
				[]string{inv.skuKey(t, sku), inv.journalKey(t, sku), inv.buyersKey(t, sku)}, sku)
			if errors.Is(err, script.ErrReplicaAck) {
				ackErr, err = errors.Join(ackErr, err), nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("stock: close %s: %w", sku, err)
		}
	}
	if ackErr != nil {
		return fmt.Errorf("stock: close %s: %w", sku, ackErr)
	}
	return nil
}

// Level returns the current levels of sku, or ErrSKUNotFound. For a SKU split
// into buckets it is the sum of the buckets' levels, read one bucket after
// the other, and units moving between buckets are in none of them.
func (inv *Inventory) Level(ctx context.Context, sku string) (_ Levels, err error) {
	ctx, done := inv.tel.begin(ctx, "level")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return Levels{}, err
	}
	fields := []string{"available", "reserved", "sold", "refunded", "buckets"}
	var v []any
	err = retry.Read(ctx, inv.cfg.retry, func(ctx context.Context, _ int) (err error) {
		v, err = inv.rdb.HMGet(ctx, inv.skuKey(g, sku), fields...).Result()
		return err
	})
	if err != nil {
		return Levels{}, fmt.Errorf("stock: level %s: %w", sku, err)
	}
	if v[0] == nil {
		return Levels{}, fmt.Errorf("stock: level %s: %w", sku, ErrSKUNotFound)
	}
	lv := levelsOf(v)
	b, _ := strconv.Atoi(fmt.Sprint(v[4]))
	if b <= 1 {
		return lv, nil
	}
	inv.buckets.Store(sku, b)
	cmds := make([]*redis.SliceCmd, b)
	err = retry.Read(ctx, inv.cfg.retry, func(ctx context.Context, _ int) error {
		_, err := inv.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k := 1; k < b; k++ {
				cmds[k] = p.HMGet(ctx, inv.skuKey(bucketTag(g, k), sku), fields...)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return Levels{}, fmt.Errorf("stock: level %s: %w", sku, err)
	}
	for k := 1; k < b; k++ {
		lv = lv.add(levelsOf(cmds[k].Val()))
	}
	return lv, nil
}

func levelsOf(v []any) Levels {
	n := func(i int) int64 { s, _ := v[i].(string); x, _ := strconv.ParseInt(s, 10, 64); return x }
	return Levels{Available: n(0), Reserved: n(1), Sold: n(2), Refunded: n(3)}
}

func (l Levels) add(m Levels) Levels {
	return Levels{l.Available + m.Available, l.Reserved + m.Reserved, l.Sold + m.Sold, l.Refunded + m.Refunded}
}

// Deduct sells every item of o at once, or none: it fails with an *ItemError
// wrapping ErrSoldOut, ErrBuyerLimit, ErrSKUClosed or ErrSKUNotFound for the first
// item that cannot be sold. The decision, success or refusal, is stored under
// o.ID for the idempotency window: calling Deduct again with the same order
// returns the same decision with Result.Replayed set, and the same ID with
// another buyer or other items fails with a *ConflictError.
//
// Items may come in any order; each SKU may appear once. All SKUs must be in
// one slot group (ErrCrossGroup otherwise). When the reply is lost and the
// retries run out, the error wraps ErrUnknownOutcome: call Deduct again with
// the same order to learn what happened.
func (inv *Inventory) Deduct(ctx context.Context, o Order, opts ...CallOption) (Result, error) {
	res, err := inv.order(ctx, "deduct", deductScript, o, "0", nil, opts)
	inv.tel.unitsSold(ctx, "deduct", o.Items, res, err)
	return res, err
}

// order validates o and runs s (deduct.lua or hold.lua) with the keys of
// o's items and the common arguments, followed by mode and extra.
func (inv *Inventory) order(ctx context.Context, op string, s *script.Script, o Order, mode string,
	extra func(items []Item) ([]any, error), opts []CallOption) (Result, error) {
	return inv.tel.observe(ctx, op, func(ctx context.Context) (Result, error) {
		return inv.runOrder(ctx, op, s, o, mode, extra, opts)
	})
}

// runOrder is order without telemetry.
func (inv *Inventory) runOrder(ctx context.Context, op string, s *script.Script, o Order, mode string,
	extra func(items []Item) ([]any, error), opts []CallOption) (Result, error) {
	c := inv.prepare(op, s, o, mode, extra, opts)
	if c.err != nil {
		return Result{}, c.err
	}
	if c.fence.fence != nil {
		if err := inv.learnFenced(ctx, c.fence, c.skus...); err != nil {
			return Result{}, fmt.Errorf("stock: %s %s: %w", op, o.ID, err)
		}
		c = inv.prepare(op, s, o, mode, extra, opts) // routed with the count learnt
	}
	raised, claimed := 1, 1
	var earlyAck error // fence records and claim not acknowledged (WithReplicaAck)
	var claimedAt time.Time
	claim := func() (bool, error, error) { return inv.claim(ctx, op, c.group, o, mode) }
	routed, refills := 0, 0
	for {
		if b := inv.bucketsOf(c.skus[0]); c.fence.fence != nil && b != raised {
			fenceAck, err := inv.raiseFences(ctx, c.fence, c.group, b)
			if err != nil {
				return Result{}, fmt.Errorf("stock: %s %s: %w", op, o.ID, err)
			}
			earlyAck, raised = errors.Join(earlyAck, fenceAck), b
		}
		if b := inv.bucketsOf(c.skus[0]); b != claimed && len(o.Items) == 1 {
			claimedAt = time.Now()
			decided, claimAck, err := claim()
			if err != nil {
				return Result{}, fmt.Errorf("stock: %s %s: %w", op, o.ID, err)
			}
			earlyAck, claimed = errors.Join(earlyAck, claimAck), b
			if decided && (s == deductScript || s == holdScript) {
				// {g} holds this order's decision (a refusal stored
				// before the SKU existed, a Cancel's tombstone): its
				// home bucket never saw it; deduct.lua or hold.lua in
				// {g} answers from it.
				c = inv.prepareAt(op, s, o, mode, extra, opts, true)
			}
		}
		reply, ackErr, err := inv.write(ctx, c.script, c.keys, c.args)
		if err == nil {
			earlyAck = errors.Join(earlyAck, lengthenClaim(&claimedAt, claim))
		}
		ackErr = errors.Join(earlyAck, ackErr)
		if err != nil {
			return c.finish(reply, ackErr, err)
		}
		switch str(reply, 0) {
		case "buckets":
			if routed >= maxRoutingRounds {
				return c.finish(reply, ackErr, err)
			}
			routed++
			// The SKU is split into buckets and this process did not
			// know yet: route to the buyer's home bucket.
			inv.learnBuckets(c.skus[0], str(reply, 2))
			c = inv.prepare(op, s, o, mode, extra, opts)
		case "short":
			// The home bucket ran short: move units from the others, then
			// try again. Sold out is decided (and stored for good) only
			// once a refill found nothing to move; while refills move
			// units that other orders of the bucket take first, the order
			// keeps trying, asking twice as much each time, within ctx.
			if refills >= maxRefills {
				return Result{}, fmt.Errorf("stock: %s %s: %w", op, o.ID, errContended)
			}
			want := o.Items[0].Qty
			for i := 0; i < refills && want <= valid.MaxAmount/2; i++ {
				want *= 2
			}
			refills++
			moved, err := inv.refill(ctx, c.skus[0], want, home(o.Buyer, inv.bucketsOf(c.skus[0])))
			if err != nil {
				return Result{}, fmt.Errorf("stock: %s %s: refill: %w", op, o.ID, err)
			}
			if moved == 0 {
				c.markFinal()
			}
		default:
			return c.finish(reply, ackErr, err)
		}
	}
}

// orderCall is one script call for an order, built before any I/O.
type orderCall struct {
	op, id string
	script *script.Script
	keys   []string
	args   []any
	skus   []string
	fenced bool // the last argument is a fence token
	fence  callConfig
	group  string // the slot group of the order's SKUs
	err    error  // invalid input: nothing may be sent
}

func (inv *Inventory) prepare(op string, s *script.Script, o Order, mode string,
	extra func(items []Item) ([]any, error), opts []CallOption) orderCall {
	return inv.prepareAt(op, s, o, mode, extra, opts, false)
}

// prepareAt is prepare, routed to the slot group's own tag {g} when inGroup
// is set, whatever the SKU's buckets.
func (inv *Inventory) prepareAt(op string, s *script.Script, o Order, mode string,
	extra func(items []Item) ([]any, error), opts []CallOption, inGroup bool) orderCall {
	c := orderCall{op: op, id: o.ID}
	g, items, err := inv.checkOrder(o)
	var more []any
	if err == nil && extra != nil {
		more, err = extra(items)
	}
	cc, cerr := newCallConfig(opts)
	if err = errors.Join(err, cerr); err != nil {
		c.err = fmt.Errorf("stock: %s: %w", op, err)
		return c
	}
	c.fence, c.group = cc, g
	if len(items) == 1 && !inGroup {
		// A SKU split into buckets is served by the buyer's home bucket.
		if b := inv.bucketsOf(items[0].SKU); b > 1 {
			g = bucketTag(g, home(o.Buyer, b))
		}
	}
	ks := make([]string, 1, 1+4*len(items))
	ks[0] = inv.opKey(g, o.ID)
	args := make([]any, 5, 5+3*len(items))
	args[0], args[1], args[2], args[3], args[4] = o.ID, o.Buyer, retry.Nonce(), inv.windowMillis(), modeArg(mode)
	c.skus = make([]string, len(items))
	for i, it := range items {
		c.skus[i] = it.SKU
		ks = append(ks, inv.skuKey(g, it.SKU), inv.buyersKey(g, it.SKU), inv.journalKey(g, it.SKU), inv.holdsKey(g, it.SKU))
		args = append(args, it.SKU, it.Qty)
	}
	args = append(args, more...)
	c.script, c.keys, c.args = inv.withFence(cc, g, s, ks, args)
	c.fenced = cc.fence != nil
	return c
}

// markFinal asks deduct.lua to decide even when a bucket is short: the
// optional "final" argument goes after the items, before a fence token.
func (c *orderCall) markFinal() {
	if len(c.args) > 0 && c.args[len(c.args)-1] == "final" || c.fenced && c.args[len(c.args)-2] == "final" {
		return
	}
	if c.fenced {
		token := c.args[len(c.args)-1]
		c.args = append(c.args[:len(c.args)-1], "final", token)
		return
	}
	c.args = append(c.args, "final")
}

// finish turns the script's reply (or the error of the call) into the
// operation's result.
func (c orderCall) finish(reply []any, ackErr, err error) (Result, error) {
	if err != nil {
		return Result{}, fmt.Errorf("stock: %s %s: %w", c.op, c.id, err)
	}
	res, err := decode(reply, c.id, c.skus)
	if err = errors.Join(err, ackErr); err != nil {
		return res, fmt.Errorf("stock: %s %s: %w", c.op, c.id, err)
	}
	return res, nil
}

// checkOrder validates o and returns its slot group and its items sorted by
// SKU (the canonical order the scripts store and compare).
func (inv *Inventory) checkOrder(o Order) (string, []Item, error) {
	if err := errors.Join(valid.Name("order ID", o.ID), valid.Name("buyer", o.Buyer)); err != nil {
		return "", nil, err
	}
	if len(o.Items) == 0 || len(o.Items) > MaxItems {
		return "", nil, fmt.Errorf("%w: order has %d items, want 1..%d", ErrInvalid, len(o.Items), MaxItems)
	}
	items := slices.Clone(o.Items)
	slices.SortFunc(items, func(a, b Item) int { return cmpString(a.SKU, b.SKU) })
	g := keys.Group(items[0].SKU)
	for i, it := range items {
		if err := errors.Join(valid.Name("sku", it.SKU), valid.Amount("quantity of "+it.SKU, it.Qty)); err != nil {
			return "", nil, err
		}
		if i > 0 && items[i-1].SKU == it.SKU {
			return "", nil, fmt.Errorf("%w: sku %s appears twice", ErrInvalid, it.SKU)
		}
		if keys.Group(it.SKU) != g {
			return "", nil, fmt.Errorf("%w: %s and %s", ErrCrossGroup, items[0].SKU, it.SKU)
		}
	}
	return g, items, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decode reads a {code, replayed, detail, deadline, levels...} reply.
func decode(reply []any, id string, skus []string) (Result, error) {
	code, detail := str(reply, 0), str(reply, 2)
	res := Result{Replayed: num(reply, 1) == 1}
	if ms := num(reply, 3); ms > 0 {
		res.Deadline = time.UnixMilli(ms)
	}
	if code == "ok" {
		if len(reply) == 4 {
			return res, nil // an action that changed no level (Cancel of an expired hold)
		}
		if len(reply) != 4+4*len(skus) {
			return res, fmt.Errorf("stock: reply has %d values for %d skus", len(reply), len(skus))
		}
		res.Levels = make(map[string]Levels, len(skus))
		for i, sku := range skus {
			j := 4 + 4*i
			res.Levels[sku] = Levels{Available: num(reply, j), Reserved: num(reply, j+1), Sold: num(reply, j+2), Refunded: num(reply, j+3)}
		}
		return res, nil
	}
	sku := ""
	if k, err := strconv.Atoi(detail); err == nil && k >= 1 && k <= len(skus) {
		sku = skus[k-1]
	}
	return res, refusal(code, id, detail, sku)
}

func str(reply []any, i int) string {
	if i >= len(reply) {
		return ""
	}
	switch v := reply[i].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

func num(reply []any, i int) int64 {
	if i >= len(reply) {
		return 0
	}
	switch v := reply[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// modeArg is a script's mode argument, boxed without an allocation when it
// is one of the constant modes (a reservation's TTL is not).
func modeArg(mode string) any {
	switch mode {
	case "0":
		return "0"
	case "confirm":
		return "confirm"
	case "cancel":
		return "cancel"
	case "refund":
		return "refund"
	}
	return mode
}
