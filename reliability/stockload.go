package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/stock"
)

// Stock workload shape: slot groups of GroupSize SKUs checked with
// StockModel, and one hot SKU split into buckets with a per-buyer limit,
// checked by its invariants only (a refusal of a bucketed SKU is not one
// atomic decision over all buckets, so it is not linearizable).
const (
	stockInitial = 20
	hotSKU       = "hot"
	hotBuckets   = 4
	hotInitial   = 40
	hotLimit     = 6
)

var stockGroups = []string{"sa", "sb"}

func skuName(g string, i int) string { return fmt.Sprintf("%s/%d", g, i) }

// stockRecord is what a client knows of one of its operations.
type stockRecord struct {
	kind  string // deduct, restock, writeoff, refund
	order stock.Order
	op    string // restock/writeoff operation ID
	sku   string
	qty   int64
	// answer: "ok" with levels, or the refusal; "" while unknown.
	answer string
}

type stockLoad struct {
	prefix string
	ack    bool
	invs   []*stock.Inventory
	admin  redis.UniversalClient
	vinv   *stock.Inventory // verification, on admin
	hist   *History
	prog   Progress

	mu      sync.Mutex
	records []*stockRecord
	tally   Tally
}

func newStockLoad(tb testing.TB, d Deployment, prefix string, hist *History) *stockLoad {
	w := &stockLoad{prefix: prefix, ack: d.ReplicaAck(), admin: d.Admin(tb), hist: hist}
	opts := []stock.Option{stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0)}
	if w.ack {
		opts = append(opts, stock.WithReplicaAck(1, AckTimeout))
	}
	for range 2 {
		inv, err := stock.New(d.Client(tb), opts...)
		if err != nil {
			tb.Fatalf("stock.New: %v", err)
		}
		w.invs = append(w.invs, inv)
	}
	var err error
	w.vinv, err = stock.New(w.admin, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	if err != nil {
		tb.Fatalf("stock.New: %v", err)
	}
	return w
}

func (w *stockLoad) name() string           { return "stock" }
func (w *stockLoad) history() *History      { return w.hist }
func (w *stockLoad) model() porcupine.Model { return StockModel }
func (w *stockLoad) progress() *Progress    { return &w.prog }

func (w *stockLoad) close() {
	for _, inv := range w.invs {
		_ = inv.Close()
	}
	_ = w.vinv.Close()
}

func (w *stockLoad) setup(ctx context.Context) error {
	for _, g := range stockGroups {
		var in StockIn
		call := w.hist.Now()
		for i := range GroupSize {
			if err := w.vinv.Create(ctx, skuName(g, i), stockInitial); err != nil {
				return err
			}
			in.Qty[i] = stockInitial
		}
		w.hist.Add(Op{Key: g, Input: StockIn{Kind: StockRestock, Qty: in.Qty}, Output: StockOut{OK: true, After: in.Qty}, Call: call, Return: w.hist.Now()})
	}
	return w.vinv.Create(ctx, hotSKU, hotInitial, stock.WithBuckets(hotBuckets), stock.WithBuyerLimit(hotLimit))
}

// stockAnswer reports whether err is an answer rather than a failure to
// get one. A write not yet acknowledged by its replica is no answer: the
// client calls again.
func stockAnswer(err error) bool {
	if err == nil {
		return true
	}
	if errors.Is(err, stock.ErrReplicaAck) || errors.Is(err, stock.ErrUnknownOutcome) {
		return false
	}
	for _, e := range []error{stock.ErrSoldOut, stock.ErrBuyerLimit, stock.ErrConflict, stock.ErrSKUClosed,
		stock.ErrSKUNotFound, stock.ErrInvalid, stock.ErrHoldExpired, stock.ErrCancelled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func answerOf(res stock.Result, err error) string {
	if err != nil {
		for _, e := range []error{stock.ErrSoldOut, stock.ErrBuyerLimit, stock.ErrConflict, stock.ErrSKUClosed, stock.ErrSKUNotFound, stock.ErrInvalid} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		return err.Error()
	}
	return fmt.Sprintf("ok %v", res.Levels)
}

func (w *stockLoad) client(ctx context.Context, c int, rng *rand.Rand, more func(int) bool) {
	inv := w.invs[c%len(w.invs)]
	var mine []*stockRecord // decided operations of this client
	for i := 0; more(i); i++ {
		if ctx.Err() != nil {
			return
		}
		g := stockGroups[rng.IntN(len(stockGroups))]
		id := fmt.Sprintf("c%d-%d", c, i)
		p := rng.IntN(100)
		switch {
		case p < 8 && len(mine) > 0:
			w.replay(ctx, inv, mine[rng.IntN(len(mine))])
			continue
		case p < 15:
			buyer := fmt.Sprintf("b%d", rng.IntN(16))
			r := &stockRecord{kind: "deduct", sku: hotSKU, qty: int64(1 + rng.IntN(2))}
			r.order = stock.Order{ID: id, Buyer: buyer, Items: []stock.Item{{SKU: hotSKU, Qty: r.qty}}}
			w.write(ctx, c, inv, r, "", StockIn{})
			if r.answer != "" {
				mine = append(mine, r)
			}
			continue
		case p < 32:
			w.level(ctx, c, inv, g, rng.IntN(GroupSize))
			continue
		case p < 35:
			mine = append(mine, w.batch(ctx, c, inv, g, id, rng)...)
			continue
		case p < 37:
			r := &stockRecord{kind: "restock", op: id, sku: hotSKU, qty: int64(1 + rng.IntN(3))}
			w.write(ctx, c, inv, r, "", StockIn{})
			continue
		case p < 39:
			var sold *stockRecord
			for _, m := range mine {
				if m.kind == "deduct" && m.sku == hotSKU && len(m.answer) > 1 && m.answer[:2] == "ok" {
					sold = m
				}
			}
			if sold != nil {
				sold.kind = "refunded"
				w.write(ctx, c, inv, &stockRecord{kind: "refund", order: sold.order, sku: hotSKU}, "", StockIn{})
			}
			continue
		}
		var in StockIn
		r := &stockRecord{}
		switch {
		case p < 70:
			r.kind, in.Kind = "deduct", StockDeduct
			r.order = stock.Order{ID: id, Buyer: fmt.Sprintf("u%d", c)}
			first := rng.IntN(GroupSize)
			for _, j := range []int{first, (first + 1 + rng.IntN(GroupSize-1)) % GroupSize}[:1+rng.IntN(2)] {
				q := int64(1 + rng.IntN(3))
				in.Qty[j] = q
				r.order.Items = append(r.order.Items, stock.Item{SKU: skuName(g, j), Qty: q})
			}
		case p < 85:
			j := rng.IntN(GroupSize)
			r.kind, in.Kind, r.op, r.sku, r.qty = "restock", StockRestock, id, skuName(g, j), int64(1+rng.IntN(5))
			in.Qty[j] = r.qty
		case p < 92:
			j := rng.IntN(GroupSize)
			r.kind, in.Kind, r.op, r.sku, r.qty = "writeoff", StockWriteOff, id, skuName(g, j), int64(1+rng.IntN(2))
			in.Qty[j] = r.qty
		default:
			// Refund one of this client's sold orders of group g.
			var sold *stockRecord
			for _, m := range mine {
				if m.kind == "deduct" && m.answer != "" && m.answer[0] == 'o' && groupOf(m.order.Items[0].SKU) == g {
					sold = m
				}
			}
			if sold == nil {
				w.level(ctx, c, inv, g, rng.IntN(GroupSize))
				continue
			}
			sold.kind = "refunded" // not again
			r.kind, in.Kind, r.order = "refund", StockRefund, sold.order
			for _, it := range sold.order.Items {
				in.Qty[skuIndex(it.SKU)] = it.Qty
			}
		}
		w.write(ctx, c, inv, r, g, in)
		if r.answer != "" {
			mine = append(mine, r)
		}
	}
}

// groupOf returns the slot group of a SKU or account: the part before '/'.
func groupOf(s string) string {
	for i := range s {
		if s[i] == '/' {
			return s[:i]
		}
	}
	return s
}

func skuIndex(sku string) int {
	n, _ := strconv.Atoi(sku[len(sku)-1:])
	return n
}

// batch deducts 2 to 4 one-item orders of group g in one DeductBatch, and
// finishes those without an answer one by one.
func (w *stockLoad) batch(ctx context.Context, c int, inv *stock.Inventory, g, id string, rng *rand.Rand) []*stockRecord {
	n := 2 + rng.IntN(3)
	rs := make([]*stockRecord, n)
	ins := make([]StockIn, n)
	orders := make([]stock.Order, n)
	for k := range n {
		j := rng.IntN(GroupSize)
		q := int64(1 + rng.IntN(2))
		orders[k] = stock.Order{ID: fmt.Sprintf("%s-%d", id, k), Buyer: fmt.Sprintf("u%d", c), Items: []stock.Item{{SKU: skuName(g, j), Qty: q}}}
		rs[k] = &stockRecord{kind: "deduct", order: orders[k]}
		ins[k] = StockIn{Kind: StockDeduct}
		ins[k].Qty[j] = q
	}
	call, callT := w.hist.Now(), time.Now()
	results := inv.DeductBatch(ctx, orders)
	var out []*stockRecord
	for k := range n {
		w.finish(ctx, c, inv, rs[k], g, ins[k], call, callT, &results[k])
		if rs[k].answer != "" {
			out = append(out, rs[k])
		}
	}
	return out
}

// call sends r's operation once.
func (w *stockLoad) call(ctx context.Context, inv *stock.Inventory, r *stockRecord) (stock.Result, error) {
	switch r.kind {
	case "deduct":
		return inv.Deduct(ctx, r.order)
	case "restock":
		return inv.Restock(ctx, r.op, r.sku, r.qty)
	case "writeoff":
		return inv.WriteOff(ctx, r.op, r.sku, r.qty)
	default: // refund
		return inv.Refund(ctx, r.order)
	}
}

// write runs r until it has an answer and records it; g is the group of a
// checked operation ("" for the hot SKU).
func (w *stockLoad) write(ctx context.Context, c int, inv *stock.Inventory, r *stockRecord, g string, in StockIn) {
	w.finish(ctx, c, inv, r, g, in, w.hist.Now(), time.Now(), nil)
}

// finish is write for an operation called at call; first, when not nil, is
// the answer to its first call (made in a batch).
func (w *stockLoad) finish(ctx context.Context, c int, inv *stock.Inventory, r *stockRecord, g string, in StockIn, call int64, callT time.Time, first *stock.BatchResult) {
	var res stock.Result
	known, calls, err := settle(ctx, func() error {
		if b := first; b != nil {
			first = nil
			res = b.Result
			return b.Err
		}
		var err error
		res, err = w.call(ctx, inv, r)
		return err
	}, stockAnswer)
	ret := w.hist.Now()
	var out StockOut
	w.mu.Lock()
	w.tally.Ops++
	if calls > 1 {
		w.tally.Retried++
	}
	switch {
	case !known:
		out.Unknown = true
		w.tally.Unknown++
		if errors.Is(err, stock.ErrReplicaAck) {
			w.tally.Unacked++
		}
	case err == nil:
		out.OK = true
		w.tally.Acked++
		for _, it := range r.items() {
			out.After[skuIndex(it.SKU)] = res.Levels[it.SKU].Available
		}
		r.answer = answerOf(res, nil)
	case errors.Is(err, stock.ErrSoldOut) || errors.Is(err, stock.ErrBuyerLimit):
		r.answer = answerOf(res, err)
	default:
		w.tally.problem("stock %s %s: %v", r.kind, r.id(), err)
		r.answer = answerOf(res, err)
	}
	w.records = append(w.records, r)
	w.mu.Unlock()
	if known {
		w.prog.OK(callT)
	}
	if g != "" {
		w.hist.Add(Op{Client: c, Key: g, Input: in, Output: out, Call: call, Return: ret, Unknown: out.Unknown})
	}
}

func (r *stockRecord) items() []stock.Item {
	if r.kind == "restock" || r.kind == "writeoff" {
		return []stock.Item{{SKU: r.sku, Qty: r.qty}}
	}
	return r.order.Items
}

func (r *stockRecord) id() string {
	if r.op != "" {
		return r.op
	}
	return r.order.ID
}

// replay resubmits a decided operation: it must get the first answer.
func (w *stockLoad) replay(ctx context.Context, inv *stock.Inventory, r *stockRecord) {
	kind := r.kind
	if kind == "refunded" {
		kind = "deduct"
	}
	rr := *r
	rr.kind = kind
	var res stock.Result
	known, _, err := settle(ctx, func() error {
		var err error
		res, err = w.call(ctx, inv, &rr)
		return err
	}, stockAnswer)
	if !known {
		return
	}
	got := answerOf(res, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tally.Ops++
	if got != r.answer {
		w.tally.problem("stock %s %s resubmitted: answered %q, first answer %q", kind, r.id(), got, r.answer)
	}
	if err == nil && !res.Replayed {
		w.tally.problem("stock %s %s resubmitted: Result.Replayed is false", kind, r.id())
	}
}

func (w *stockLoad) level(ctx context.Context, c int, inv *stock.Inventory, g string, j int) {
	call, callT := w.hist.Now(), time.Now()
	lv, err := inv.Level(ctx, skuName(g, j))
	ret := w.hist.Now()
	w.mu.Lock()
	w.tally.Ops++
	w.mu.Unlock()
	if err != nil {
		return // a read without an answer tells nothing
	}
	w.prog.OK(callT)
	var out StockOut
	out.After[j] = lv.Available
	w.hist.Add(Op{Client: c, Key: g, Input: StockIn{Kind: StockLevel, SKU: j}, Output: out, Call: call, Return: ret, Read: true})
}

// journal reads every entry of sku, of every bucket.
func (w *stockLoad) journal(ctx context.Context, sku string, buckets int) ([]stock.Entry, error) {
	var out []stock.Entry
	g := groupOf(sku)
	for k := range buckets {
		tag := g
		if k > 0 {
			tag = fmt.Sprintf("%s#%d", g, k)
		}
		key := fmt.Sprintf("%s:stock:v1:{%s}:journal:%s", w.prefix, tag, sku)
		start := "-"
		for {
			msgs, err := w.admin.XRangeN(ctx, key, start, "+", 1000).Result()
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				s := func(f string) string { v, _ := m.Values[f].(string); return v }
				n := func(f string) int64 { x, _ := strconv.ParseInt(s(f), 10, 64); return x }
				out = append(out, stock.Entry{ID: m.ID, Kind: s("kind"), SKU: sku, Op: s("op"), Buyer: s("buyer"), Bucket: k,
					Delta: stock.Levels{Available: n("d_avail"), Reserved: n("d_res"), Sold: n("d_sold"), Refunded: n("d_ref")}})
			}
			if len(msgs) < 1000 {
				break
			}
			start = "(" + msgs[len(msgs)-1].ID
		}
	}
	return out, nil
}

// verify audits every SKU, scans the journals for operations applied twice
// or acknowledged and missing, and counts units sold beyond supply.
func (w *stockLoad) verify(ctx context.Context) Tally {
	// Learn what the unknown operations did: the same call again answers.
	w.mu.Lock()
	records := append([]*stockRecord(nil), w.records...)
	w.mu.Unlock()
	for _, r := range records {
		if r.answer != "" || r.kind == "refunded" {
			continue
		}
		res, err, known := func() (stock.Result, error, bool) {
			var res stock.Result
			known, _, err := settle(ctx, func() error {
				var err error
				res, err = w.call(ctx, w.vinv, r)
				return err
			}, stockAnswer)
			return res, err, known
		}()
		if known {
			w.mu.Lock()
			r.answer = "resolved " + answerOf(res, err)
			w.mu.Unlock()
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tally
	type applied struct{ op, kind, sku string }
	want := map[applied]bool{}     // acknowledged
	resolved := map[applied]bool{} // found applied by a resubmission after the run
	refused := map[applied]bool{}  // refused for certain
	soldAcked := map[string]int64{}
	for _, r := range w.records {
		kind := r.kind
		if kind == "refunded" {
			kind = "deduct"
		}
		for _, it := range r.items() {
			k := applied{r.id(), kind, it.SKU}
			switch {
			case len(r.answer) > 1 && r.answer[:2] == "ok":
				want[k] = true
				if kind == "deduct" {
					soldAcked[it.SKU] += it.Qty
				}
				if kind == "refund" {
					soldAcked[it.SKU] -= it.Qty
				}
			case r.answer == stock.ErrSoldOut.Error() || r.answer == stock.ErrBuyerLimit.Error():
				refused[k] = true
			case len(r.answer) > 11 && r.answer[:11] == "resolved ok":
				resolved[k] = true
			}
		}
	}
	skus := []string{hotSKU}
	for _, g := range stockGroups {
		for i := range GroupSize {
			skus = append(skus, skuName(g, i))
		}
	}
	for _, sku := range skus {
		rep, err := w.vinv.Audit(ctx, sku)
		if err != nil {
			t.problem("stock audit %s: %v", sku, err)
			continue
		}
		for _, p := range rep.Problems {
			t.problem("stock audit %s: %s", sku, p)
		}
		b := 1
		if sku == hotSKU {
			b = hotBuckets
		}
		entries, err := w.journal(ctx, sku, b)
		if err != nil {
			t.problem("stock journal %s: %v", sku, err)
			continue
		}
		seen := map[applied]int{}
		perBuyer := map[string]int64{}
		for _, e := range entries {
			switch e.Kind {
			case stock.KindDeduct, stock.KindRefund, stock.KindRestock, stock.KindWriteOff:
			default:
				continue
			}
			k := applied{e.Op, e.Kind, sku}
			seen[k]++
			if seen[k] == 2 {
				t.Double++
				t.detail("stock %s: %s %s is in the journal more than once", sku, e.Kind, e.Op)
			}
			if refused[k] {
				t.problem("stock %s: %s %s was refused but is in the journal", sku, e.Kind, e.Op)
			}
			if e.Buyer != "" {
				perBuyer[e.Buyer] += e.Delta.Sold - e.Delta.Refunded
			}
		}
		for k := range resolved {
			if k.sku == sku && seen[k] == 0 {
				t.problem("stock %s: %s %s is not in the journal although a resubmission said it was applied", sku, k.kind, k.op)
			}
		}
		for k := range want {
			if k.sku == sku && seen[k] == 0 {
				t.Lost++
				t.detail("stock %s: acknowledged %s %s is not in the journal", sku, k.kind, k.op)
			}
		}
		lv := rep.Levels
		over := max(0, soldAcked[sku]-rep.Supply, -lv.Available, lv.Sold-lv.Refunded-rep.Supply)
		if over > 0 {
			t.Oversell += int(over)
			t.detail("stock %s: oversold by %d (acknowledged net sales %d, supply %d, levels %+v)", sku, over, soldAcked[sku], rep.Supply, lv)
		}
		if sku == hotSKU {
			for b, n := range perBuyer {
				if n > hotLimit {
					t.problem("stock %s: buyer %s holds %d units, limit %d", sku, b, n, hotLimit)
				}
			}
		}
	}
	return t
}
