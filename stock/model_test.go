package stock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// The model-based test: random sequences of stock's public operations run
// against Redis and against an in-memory model of the documented semantics
// (model below), over option combinations: 1 or 3 buckets, a buyer limit or
// none, fences with rising and stale tokens, reservations whose deadline
// passes, lost replies (the command runs, its reply is dropped; the call
// ends in a decision or ErrUnknownOutcome and is then repeated with the same
// ID), operation IDs reused with other fields, and quantities at the 2^53
// bounds. After each step the model and Redis agree on the answer and on
// the levels; at the end Audit is clean.
//
// A hold's deadline passing is the one thing a test cannot wait for at this
// pace: the "expire" step moves the deadline of one hold (its score in the
// deadline index and the marker's dl field) into the past, which is what the
// Redis clock reaching it looks like to the scripts.

const modelMax = 1<<53 - 1

type modelHold struct {
	kind      string // "deduct" | "reserve" | "restock" | "writeoff"
	buyer     string
	qty       int64
	code      string // the stored decision: "ok" or a refusal class
	levels    *stock.Levels
	state     string // orders: "sold" | "held" | "confirmed" | "cancelled" | "expired" | "refunded"
	indexed   bool   // reservations: the hold is in the deadline index
	expired   bool   // reservations: its deadline has passed
	take      int64  // confirmed units
	confirmed bool   // a Confirm was decided (its levels below)
	cLevels   *stock.Levels
	cancelled bool // a Cancel was decided
	xLevels   *stock.Levels
	refunded  bool
	fLevels   *stock.Levels
	tombstone bool
}

type model struct {
	buckets   int
	limit     int64
	avail     int64 // as the SKU hash holds them: expired holds not yet swept stay reserved
	reserved  int64
	sold      int64
	refunded  int64
	restocked int64
	written   int64
	closed    bool
	buyers    map[string]int64 // units held (not expired) or sold, per buyer
	ops       map[string]*modelHold
	fence     uint64
	// bound: on a SKU split into buckets, the first call with an ID binds
	// it to its kind, buyer and quantity (claim.lua), decided or not.
	bound map[string][3]string
	// follow is Redis's answer to a write-off of a SKU split into buckets:
	// it takes from one bucket, whose level the model does not follow, so
	// the model takes Redis's choice between "ok" and "sold_out" when the
	// SKU has the units somewhere.
	follow string
}

// claim binds id on a SKU split into buckets; false: bound to other fields.
func (m *model) claim(id, kind, buyer string, qty int64, check bool) bool {
	if m.buckets == 1 {
		return true
	}
	q := strconv.FormatInt(qty, 10)
	b, ok := m.bound[id]
	if !ok {
		if !check {
			m.bound[id] = [3]string{kind, buyer, q}
		}
		return true
	}
	return (kind == "" || b[0] == kind) && b[1] == buyer && b[2] == q
}

func (m *model) supply() int64 { return m.avail + m.reserved + m.sold - m.refunded }

func (m *model) levels() *stock.Levels {
	return &stock.Levels{Available: m.avail, Reserved: m.reserved, Sold: m.sold, Refunded: m.refunded}
}

// sweep returns every hold whose deadline passed to available, as the
// scripts do before judging an order (and Reclaim does).
func (m *model) sweep() {
	for _, o := range m.ops {
		if o.kind == "reserve" && o.indexed && o.expired {
			m.release(o, o.qty)
			o.indexed = false
		}
	}
}

// release returns q units of o's hold to available.
func (m *model) release(o *modelHold, q int64) {
	m.avail += q
	m.reserved -= o.qty
	m.buyers[o.buyer] -= q
}

// answer is what a call returned, reduced to what the model predicts.
type answer struct {
	code     string // "ok" or an error class
	replayed bool
	levels   *stock.Levels
}

// modelCodes are the model's reply codes of the module's errors, in the order
// classify tests them.
var modelCodes = []struct {
	err  error
	code string
}{
	{stock.ErrUnknownOutcome, "unknown"}, {stock.ErrConflict, "conflict"}, {stock.ErrStaleFence, "stale"},
	{stock.ErrSoldOut, "sold_out"}, {stock.ErrBuyerLimit, "limit"}, {stock.ErrSKUClosed, "closed"},
	{stock.ErrSKUNotFound, "not_found"}, {stock.ErrOrderNotFound, "no_order"}, {stock.ErrHoldExpired, "expired"},
	{stock.ErrCancelled, "cancelled"}, {stock.ErrInvalid, "invalid"},
}

func classify(err error) string {
	if err == nil {
		return "ok"
	}
	for _, c := range modelCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "error: " + err.Error()
}

// modelRun is one generated sequence.
type modelRun struct {
	t       *rapid.T
	tt      *testing.T
	lossy   bool
	ctx     context.Context
	m       *model
	inv     *stock.Inventory // through the proxy when lossy
	direct  *redis.Client
	px      *redistest.Proxy
	prefix  string
	sku     string
	fenced  bool
	big     bool
	steps   int
	dropped int
}

var modelRuns int

func runModel(t *testing.T, checks, steps int) {
	srv := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, srv.Addr())
	direct := srv.Client()
	defer direct.Close()
	lossy := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer lossy.Close()
	if err := flag.Set("rapid.checks", strconv.Itoa(checks)); err != nil {
		t.Fatal(err)
	}
	startRuns := modelRuns
	var total struct{ steps, dropped int }
	rapid.Check(t, func(rt *rapid.T) {
		modelRuns++
		r := &modelRun{t: rt, tt: t, ctx: t.Context(), direct: direct, px: px, sku: "m/s",
			prefix: fmt.Sprintf("mb%d", modelRuns)}
		r.m = &model{
			buckets: rapid.SampledFrom([]int{1, 1, 3}).Draw(rt, "buckets"),
			limit:   rapid.SampledFrom([]int64{0, 2, 4}).Draw(rt, "limit"),
			buyers:  map[string]int64{}, ops: map[string]*modelHold{}, bound: map[string][3]string{},
		}
		r.fenced = rapid.Bool().Draw(rt, "fenced")
		r.big = r.m.buckets == 1 && rapid.Bool().Draw(rt, "big")
		client := redis.UniversalClient(direct)
		if r.lossy = rapid.Bool().Draw(rt, "lossy"); r.lossy {
			client = lossy
		}
		r.inv = mustNew(t, client, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0),
			stock.WithRetry(2, 10*time.Millisecond, 200*time.Millisecond))
		defer r.inv.Close()
		initial := int64(rapid.IntRange(0, 3*r.m.buckets).Draw(rt, "initial"))
		if r.big {
			initial = modelMax - 20
		}
		opts := []stock.SKUOption{stock.WithBuckets(r.m.buckets)}
		if r.m.limit > 0 {
			opts = append(opts, stock.WithBuyerLimit(r.m.limit))
		}
		if err := r.inv.Create(r.ctx, r.sku, initial, opts...); err != nil {
			rt.Fatalf("create: %v", err)
		}
		r.m.avail = initial
		n := rapid.IntRange(steps/2, steps).Draw(rt, "steps")
		for i := 0; i < n; i++ {
			r.step(i)
			r.checkLevels(fmt.Sprintf("after step %d", i))
		}
		r.reclaim()
		r.checkLevels("after the final reclaim")
		rep, err := r.inv.Audit(r.ctx, r.sku)
		if err != nil || !rep.OK() {
			rt.Fatalf("audit: %v %v", err, rep.Problems)
		}
		if _, err := r.inv.Checkpoint(r.ctx, r.sku); err != nil {
			rt.Fatalf("checkpoint: %v", err)
		}
		total.steps += r.steps
		total.dropped += r.dropped
	})
	t.Logf("model: %d sequences, %d calls checked, %d replies dropped", modelRuns-startRuns, total.steps, total.dropped)
}

func TestModel_stock(t *testing.T) {
	runModel(t, 20, 40)
}

// TestChaos_model is the long run of the model-based test.
func TestChaos_model(t *testing.T) {
	redistest.Chaos(t)
	runModel(t, 200, 150)
}

var modelBuyers = []string{"ann", "bob", "cy", "dee", "eve"}

func (r *modelRun) step(i int) {
	rt := r.t
	op := rapid.SampledFrom([]string{"deduct", "deduct", "deduct", "reserve", "reserve", "reserve", "confirm",
		"partial", "cancel", "refund", "restock", "writeoff", "expire", "expire", "expire", "reclaim", "close",
		"invalid", "batch", "checkpoint", "crash"}).Draw(rt, "op")
	if op == "close" && rapid.IntRange(0, 5).Draw(rt, "really close") != 0 {
		op = "restock" // closing ends most of the run's interest: rarely
	}
	id := fmt.Sprintf("id-%d", rapid.IntRange(0, 7).Draw(rt, "id"))
	buyer := rapid.SampledFrom(modelBuyers).Draw(rt, "buyer")
	qty := int64(rapid.IntRange(1, 3).Draw(rt, "qty"))
	if r.big && rapid.IntRange(0, 3).Draw(rt, "big qty") == 0 {
		qty = rapid.SampledFrom([]int64{modelMax - 25, modelMax - 19, modelMax, 30}).Draw(rt, "which big qty")
	}
	var copts []stock.CallOption
	var token uint64
	if r.fenced {
		token = max(1, r.m.fence+uint64(rapid.IntRange(0, 2).Draw(rt, "token step")))
		if r.m.fence > 1 && rapid.IntRange(0, 3).Draw(rt, "stale") == 0 {
			token = r.m.fence - 1
		}
		copts = append(copts, stock.WithFence(lock.Fence{Name: "m", Token: token}))
	}
	o := stock.Order{ID: id, Buyer: buyer, Items: []stock.Item{{SKU: r.sku, Qty: qty}}}
	take := qty
	if op == "partial" {
		take = int64(rapid.IntRange(0, int(min(qty, 3))).Draw(rt, "take"))
	}
	lose := r.lossy && rapid.IntRange(0, 6).Draw(rt, "lose") == 0

	var call func() (stock.Result, error)
	var want func() answer
	switch op {
	case "deduct", "reserve", "batch":
		switch op {
		case "deduct":
			call = func() (stock.Result, error) { return r.inv.Deduct(r.ctx, o, copts...) }
		case "batch":
			// DeductBatch: the same guarantees per order as Deduct.
			call = func() (stock.Result, error) {
				br := r.inv.DeductBatch(r.ctx, []stock.Order{o}, copts...)[0]
				return br.Result, br.Err
			}
			op = "deduct"
		default:
			call = func() (stock.Result, error) { return r.inv.Reserve(r.ctx, o, time.Hour, copts...) }
		}
		kind := op
		want = func() answer { return r.m.order(kind, id, buyer, qty, token, r.fenced) }
	case "confirm", "partial":
		call = func() (stock.Result, error) {
			if op == "partial" {
				return r.inv.ConfirmPartial(r.ctx, o, []stock.Item{{SKU: r.sku, Qty: take}}, copts...)
			}
			return r.inv.Confirm(r.ctx, o, copts...)
		}
		want = func() answer { return r.m.confirm(id, buyer, qty, take, token, r.fenced) }
	case "cancel":
		call = func() (stock.Result, error) { return r.inv.Cancel(r.ctx, o, copts...) }
		want = func() answer { return r.m.cancel(id, buyer, qty, token, r.fenced) }
	case "refund":
		call = func() (stock.Result, error) { return r.inv.Refund(r.ctx, o, copts...) }
		want = func() answer { return r.m.refund(id, buyer, qty, token, r.fenced) }
	case "restock", "writeoff":
		call = func() (stock.Result, error) {
			if op == "restock" {
				return r.inv.Restock(r.ctx, id, r.sku, qty, copts...)
			}
			return r.inv.WriteOff(r.ctx, id, r.sku, qty, copts...)
		}
		want = func() answer { return r.m.adjust(op, id, qty, token, r.fenced) }
	case "expire":
		var held []string
		for k := range 8 {
			id := fmt.Sprintf("id-%d", k)
			if o := r.m.ops[id]; o != nil && o.kind == "reserve" && o.code == "ok" && o.indexed && !o.expired {
				held = append(held, id)
			}
		}
		if len(held) > 0 {
			r.expire(held[rapid.IntRange(0, len(held)-1).Draw(rt, "which hold")])
		}
		return
	case "reclaim":
		r.reclaim()
		return
	case "crash":
		// A caller that crashed in the middle of a refill: units left one
		// bucket toward another and were not credited. The next refill
		// finishes the transfer; until then Level does not count them and
		// Audit reports them in flight.
		if r.m.buckets == 1 {
			return
		}
		from := rapid.IntRange(0, r.m.buckets-1).Draw(rt, "from")
		to := (from + rapid.IntRange(1, r.m.buckets-1).Draw(rt, "to")) % r.m.buckets
		other := mustNew(r.tt, r.direct, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0))
		defer other.Close()
		if _, err := other.TransferOutForTest(r.ctx, r.sku, from, to, qty); err != nil {
			rt.Fatalf("step %d: transfer out: %v", i, err)
		}
		return
	case "checkpoint":
		// A checkpoint and a trim change no level; later audits start there.
		other := mustNew(r.tt, r.direct, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0))
		defer other.Close()
		if _, err := other.Checkpoint(r.ctx, r.sku); err != nil {
			rt.Fatalf("step %d: checkpoint: %v", i, err)
		}
		if _, err := other.Trim(r.ctx, r.sku); err != nil {
			rt.Fatalf("step %d: trim: %v", i, err)
		}
		return
	case "close":
		if err := r.inv.CloseSKU(r.ctx, r.sku); err != nil {
			rt.Fatalf("close: %v", err)
		}
		r.m.closed = true
		return
	case "invalid":
		// Bad input is refused before anything is sent.
		bad := rapid.SampledFrom([]int64{0, -1, modelMax + 1}).Draw(rt, "bad qty")
		_, err := r.inv.Deduct(r.ctx, stock.Order{ID: id, Buyer: buyer, Items: []stock.Item{{SKU: r.sku, Qty: bad}}})
		if classify(err) != "invalid" {
			rt.Fatalf("step %d: deduct of %d: %v", i, bad, err)
		}
		_, err = r.inv.Restock(r.ctx, id, r.sku, bad)
		if classify(err) != "invalid" {
			rt.Fatalf("step %d: restock of %d: %v", i, bad, err)
		}
		return
	}

	// The bucketed write-off takes from one bucket only, whose level the
	// model does not follow: Redis decides, the model checks the rest.
	oracleFree := op == "writeoff" && r.m.buckets > 1

	var res stock.Result
	var err error
	if lose {
		r.dropped++
		err = redistest.LostReply(r.tt, r.px, func() error {
			var e error
			res, e = call()
			return e
		}, func() {})
		if c := classify(err); c != "unknown" && !strings.HasPrefix(c, "error:") {
			// The module's own retry got the decision: never "replayed".
			r.compare(i, op+" (reply lost once)", res, err, want, oracleFree, false)
			return
		}
		// Undecided for the caller: it calls again with the same ID. The
		// model answers as if only this call had run; a replayed answer is
		// allowed then.
		res, err = call()
		r.compare(i, op+" (repeated after a lost reply)", res, err, want, oracleFree, true)
		return
	}
	res, err = call()
	r.compare(i, op, res, err, want, oracleFree, false)
}

func (r *modelRun) compare(i int, what string, res stock.Result, err error, want func() answer,
	oracleFree, replayOK bool) {
	r.steps++
	rt := r.t
	got := answer{code: classify(err), replayed: res.Replayed}
	if res.Levels != nil {
		lv := res.Levels[r.sku]
		got.levels = &lv
	}
	r.m.follow = ""
	if oracleFree {
		r.m.follow = got.code
	}
	w := want()
	if got.code != w.code {
		rt.Fatalf("step %d %s: got %s (%v), model %s", i, what, got.code, err, w.code)
	}
	if got.replayed != w.replayed && !(replayOK && got.replayed) {
		rt.Fatalf("step %d %s: replayed %v, model %v", i, what, got.replayed, w.replayed)
	}
	if r.m.buckets == 1 && w.code == "ok" && !equalLevels(got.levels, w.levels) {
		rt.Fatalf("step %d %s: levels %v, model %v", i, what, fmtLevels(got.levels), fmtLevels(w.levels))
	}
}

func equalLevels(a, b *stock.Levels) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtLevels(l *stock.Levels) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%+v", *l)
}

func (r *modelRun) checkLevels(when string) {
	lv, err := r.inv.Level(r.ctx, r.sku)
	if err != nil {
		// A lossy client may lose a read too: read again directly.
		other := mustNew(r.tt, r.direct, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0))
		defer other.Close()
		if lv, err = other.Level(r.ctx, r.sku); err != nil {
			r.t.Fatalf("level %s: %v", when, err)
		}
	}
	m := r.m
	if m.buckets == 1 {
		if lv != *m.levels() {
			r.t.Fatalf("levels %s: redis %+v, model %+v", when, lv, *m.levels())
		}
		return
	}
	// Buckets: expired holds are swept bucket by bucket, so only what
	// sweeping does not move is compared (and everything after a reclaim);
	// units in flight between buckets are in none of them.
	lv.Available += r.inFlight()
	if lv.Available+lv.Reserved != m.avail+m.reserved || lv.Sold != m.sold || lv.Refunded != m.refunded {
		r.t.Fatalf("levels %s: redis %+v, model %+v", when, lv, *m.levels())
	}
}

func (r *modelRun) reclaim() {
	other := mustNew(r.tt, r.direct, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0))
	defer other.Close()
	for {
		res, err := other.Reclaim(r.ctx, r.sku)
		if err != nil {
			r.t.Fatalf("reclaim: %v", err)
		}
		if res.Remaining == 0 {
			break
		}
	}
	r.m.sweep()
	if r.m.buckets > 1 {
		lv, err := other.Level(r.ctx, r.sku)
		if err != nil {
			r.t.Fatalf("level: %v", err)
		}
		lv.Available += r.inFlight()
		if lv != *r.m.levels() {
			r.t.Fatalf("levels after reclaim: redis %+v, model %+v", lv, *r.m.levels())
		}
	}
}

// inFlight is what Audit counts in flight between the buckets.
func (r *modelRun) inFlight() int64 {
	if r.m.buckets == 1 {
		return 0
	}
	other := mustNew(r.tt, r.direct, stock.WithKeyPrefix(r.prefix), stock.WithReclaimInterval(0))
	defer other.Close()
	rep, err := other.Audit(r.ctx, r.sku)
	if err != nil || !rep.OK() {
		r.t.Fatalf("audit: %v %v", err, rep.Problems)
	}
	return rep.InFlight
}

// expire moves the deadline of reservation id, still held and indexed,
// into the past.
func (r *modelRun) expire(id string) {
	o := r.m.ops[id]
	if o == nil || o.kind != "reserve" || o.code != "ok" || !o.indexed || o.expired {
		return
	}
	tag := "m"
	if r.m.buckets > 1 {
		if b := stock.HomeForTest(o.buyer, r.m.buckets); b > 0 {
			tag = "m#" + strconv.Itoa(b)
		}
	}
	member := strconv.FormatInt(o.qty, 10) + " " + o.buyer + " " + id
	holds := r.prefix + ":stock:v1:{" + tag + "}:holds:" + r.sku
	marker := r.prefix + ":stock:v1:{" + tag + "}:op:" + id
	if n := r.direct.ZAddXX(r.ctx, holds, redis.Z{Score: 1, Member: member}).Val(); n != 0 {
		r.t.Fatalf("expire %s: ZADD XX added", id)
	}
	if s, err := r.direct.ZScore(r.ctx, holds, member).Result(); err != nil || s != 1 {
		r.t.Fatalf("expire %s: hold not indexed: %v %v", id, s, err)
	}
	r.direct.HSet(r.ctx, marker, "dl", "1")
	o.expired = true
}

// The model's operations. Each returns the answer the documented semantics
// give and applies the change.

// fenceStale judges a fenced call where the script judges it (after the
// replay check, before the first write) and records an accepted token.
func (m *model) fenceStale(token uint64, fenced bool) bool {
	if !fenced {
		return false
	}
	if token < m.fence {
		return true
	}
	m.fence = token
	return false
}

// raise records a fenced call's token up front, as a call on a SKU split
// into buckets does in every bucket before it is judged.
func (m *model) raise(token uint64, fenced bool) {
	if fenced && m.buckets > 1 && token > m.fence {
		m.fence = token
	}
}

func (m *model) order(kind, id, buyer string, qty int64, token uint64, fenced bool) answer {
	stale, claimed := m.enter(id, kind, buyer, qty, token, fenced, false)
	if !claimed {
		return answer{code: "conflict"}
	}
	if o := m.ops[id]; o != nil {
		switch {
		case o.kind != kind:
			return answer{code: "conflict"}
		case o.buyer != buyer, o.qty != qty:
			return answer{code: "conflict"}
		case o.state == "cancelled" && kind == "reserve":
			return answer{code: "cancelled", replayed: true}
		}
		return answer{code: o.code, replayed: true, levels: o.levels}
	}
	if stale || m.fenceStale(token, fenced) {
		return answer{code: "stale"}
	}
	m.sweep()
	code := "ok"
	switch {
	case m.closed:
		code = "closed"
	case m.limit > 0 && m.buyers[buyer]+qty > m.limit:
		code = "limit"
	case m.avail < qty:
		code = "sold_out"
	case m.sold+qty > modelMax || m.reserved+qty > modelMax:
		return answer{code: "invalid"} // a bound: not stored
	}
	o := &modelHold{kind: kind, buyer: buyer, qty: qty, code: code}
	m.ops[id] = o
	if kind == "reserve" {
		o.state = "held"
	} else {
		o.state = "sold"
	}
	if code != "ok" {
		return answer{code: code}
	}
	m.avail -= qty
	m.buyers[buyer] += qty
	if kind == "reserve" {
		m.reserved += qty
		o.indexed = true
	} else {
		m.sold += qty
	}
	o.levels = m.levels()
	return answer{code: "ok", levels: o.levels}
}

func (m *model) confirm(id, buyer string, qty, take int64, token uint64, fenced bool) answer {
	stale, claimed := m.enter(id, "", buyer, qty, token, fenced, true)
	if !claimed {
		return answer{code: "conflict"}
	}
	o := m.ops[id]
	switch {
	case o == nil:
		return answer{code: "no_order"}
	case o.kind != "reserve" || o.buyer != buyer || o.qty != qty:
		return answer{code: "conflict"}
	case o.code != "ok":
		return answer{code: o.code}
	case o.state == "confirmed" || o.state == "refunded" && o.confirmed:
		if o.take != take {
			return answer{code: "conflict"}
		}
		return answer{code: "ok", replayed: true, levels: o.cLevels}
	case o.state == "cancelled":
		return answer{code: "cancelled"}
	case o.state == "expired":
		return answer{code: "expired"}
	}
	if stale || m.fenceStale(token, fenced) {
		return answer{code: "stale"}
	}
	// held
	if !o.indexed || o.expired {
		if o.indexed {
			m.release(o, o.qty)
			o.indexed = false
		}
		o.state = "expired"
		return answer{code: "expired"}
	}
	if m.sold+take > modelMax {
		return answer{code: "invalid"}
	}
	m.sold += take
	m.release(o, qty-take)
	o.indexed = false
	o.state, o.confirmed, o.take = "confirmed", true, take
	o.cLevels = m.levels()
	return answer{code: "ok", levels: o.cLevels}
}

// enter begins an operation on the model: it raises the fence to token and
// claims id, and tells whether token was already below the fence.
func (m *model) enter(id, kind, buyer string, qty int64, token uint64, fenced, order bool) (stale, claimed bool) {
	stale = fenced && token < m.fence
	m.raise(token, fenced)
	return stale, m.claim(id, kind, buyer, qty, order)
}

func (m *model) cancel(id, buyer string, qty int64, token uint64, fenced bool) answer {
	stale, claimed := m.enter(id, "reserve", buyer, qty, token, fenced, false)
	if !claimed {
		return answer{code: "conflict"}
	}
	o := m.ops[id]
	if o == nil {
		if stale || m.fenceStale(token, fenced) {
			return answer{code: "stale"}
		}
		m.ops[id] = &modelHold{kind: "reserve", buyer: buyer, qty: qty, code: "cancelled", state: "cancelled",
			tombstone: true, cancelled: true}
		return answer{code: "ok"}
	}
	if o.kind != "reserve" || o.buyer != buyer || o.qty != qty {
		return answer{code: "conflict"}
	}
	if o.code != "ok" || o.state == "cancelled" || o.state == "expired" {
		if o.cancelled {
			return answer{code: "ok", replayed: true, levels: o.xLevels}
		}
		if stale || m.fenceStale(token, fenced) {
			return answer{code: "stale"}
		}
		o.cancelled = true
		if o.code == "ok" {
			o.state = "cancelled"
		}
		return answer{code: "ok"}
	}
	if o.state != "held" {
		return answer{code: "conflict"} // confirmed or refunded: a state conflict
	}
	if stale || m.fenceStale(token, fenced) {
		return answer{code: "stale"}
	}
	if o.indexed {
		m.release(o, o.qty)
		o.indexed = false
	}
	o.state, o.cancelled = "cancelled", true
	o.xLevels = m.levels()
	return answer{code: "ok", levels: o.xLevels}
}

func (m *model) refund(id, buyer string, qty int64, token uint64, fenced bool) answer {
	stale, claimed := m.enter(id, "", buyer, qty, token, fenced, true)
	if !claimed {
		return answer{code: "conflict"}
	}
	o := m.ops[id]
	switch {
	case o == nil:
		return answer{code: "no_order"}
	case o.kind != "deduct" && o.kind != "reserve", o.buyer != buyer, o.qty != qty:
		return answer{code: "conflict"}
	case o.code != "ok":
		return answer{code: o.code}
	case o.state == "refunded":
		return answer{code: "ok", replayed: true, levels: o.fLevels}
	case o.state != "sold" && o.state != "confirmed":
		return answer{code: "conflict"}
	}
	if stale || m.fenceStale(token, fenced) {
		return answer{code: "stale"}
	}
	q := o.qty
	if o.state == "confirmed" {
		q = o.take
	}
	if m.avail+q > modelMax || m.refunded+q > modelMax {
		return answer{code: "invalid"}
	}
	m.avail += q
	m.refunded += q
	m.buyers[buyer] -= q
	o.state, o.refunded = "refunded", true
	o.fLevels = m.levels()
	return answer{code: "ok", levels: o.fLevels}
}

func (m *model) adjust(kind, id string, qty int64, token uint64, fenced bool) answer {
	stale, claimed := m.enter(id, kind, "", qty, token, fenced, false)
	if !claimed {
		return answer{code: "conflict"}
	}
	if o := m.ops[id]; o != nil {
		if o.kind != kind || o.qty != qty {
			return answer{code: "conflict"}
		}
		return answer{code: o.code, replayed: true, levels: o.levels}
	}
	if stale || m.fenceStale(token, fenced) {
		return answer{code: "stale"}
	}
	code := "ok"
	if kind == "restock" {
		switch {
		case m.closed:
			code = "closed"
		case m.avail+qty > modelMax || m.supply()+qty > modelMax || m.restocked+qty > modelMax:
			return answer{code: "invalid"}
		}
	} else {
		switch {
		case m.avail < qty, m.follow == "sold_out":
			code = "sold_out"
		case m.written+qty > modelMax:
			return answer{code: "invalid"}
		}
	}
	o := &modelHold{kind: kind, qty: qty, code: code}
	m.ops[id] = o
	if code != "ok" {
		return answer{code: code}
	}
	if kind == "restock" {
		m.avail += qty
		m.restocked += qty
	} else {
		m.avail -= qty
		m.written += qty
	}
	o.levels = m.levels()
	return answer{code: "ok", levels: o.levels}
}
