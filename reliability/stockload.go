package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

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

func (r *stockRecord) about() (kind, id string, answer *string) { return r.kind, r.id(), &r.answer }

type stockLoad struct {
	journaled[*stock.Inventory, *stockRecord, stock.Result]
}

func newStockLoad(tb testing.TB, d Deployment, prefix string, hist *History) *stockLoad {
	w := &stockLoad{journaled[*stock.Inventory, *stockRecord, stock.Result]{
		module: ModuleStock, check: StockModel, prefix: prefix, hist: hist,
		send:     stockSend,
		verdicts: stockVerdicts, replicaAck: stock.ErrReplicaAck,
		okText:   func(res stock.Result) string { return fmt.Sprintf("ok %v", res.Levels) },
		replayed: func(res stock.Result) bool { return res.Replayed },
		output: func(r *stockRecord, res stock.Result, known bool, err error) any {
			out := StockOut{Unknown: !known, OK: known && err == nil}
			if out.OK {
				for _, it := range r.items() {
					out.After[skuIndex(it.SKU)] = res.Levels[it.SKU].Available
				}
			}
			return out
		},
	}}
	w.open(tb, d, func(rdb redis.UniversalClient, ack bool) (*stock.Inventory, error) {
		return stock.New(rdb, stockOptions(prefix, ack)...)
	})
	return w
}

// stockOptions are the options of the workloads' Inventories: keys under
// prefix, no reclaimer, and with ack, writes that wait for a replica.
func stockOptions(prefix string, ack bool) []stock.Option {
	opts := []stock.Option{stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0)}
	if ack {
		opts = append(opts, stock.WithReplicaAck(1, AckTimeout))
	}
	return opts
}

func (w *stockLoad) setup(ctx context.Context) error {
	for _, g := range stockGroups {
		var in StockIn
		call := w.hist.Now()
		for i := range GroupSize {
			if err := w.verifier.Create(ctx, skuName(g, i), stockInitial); err != nil {
				return err
			}
			in.Qty[i] = stockInitial
		}
		w.hist.Add(Op{Key: g, Input: StockIn{Kind: StockRestock, Qty: in.Qty}, Output: StockOut{OK: true, After: in.Qty}, Call: call, Return: w.hist.Now()})
	}
	return w.verifier.Create(ctx, hotSKU, hotInitial, stock.WithBuckets(hotBuckets), stock.WithBuyerLimit(hotLimit))
}

// stockVerdicts: a write not yet acknowledged by its replica is no
// answer, and the client calls again.
var stockVerdicts = verdicts{
	pending: []error{stock.ErrReplicaAck, stock.ErrUnknownOutcome},
	decisions: []error{stock.ErrSoldOut, stock.ErrBuyerLimit, stock.ErrConflict, stock.ErrSKUClosed,
		stock.ErrSKUNotFound, stock.ErrInvalid, stock.ErrHoldExpired, stock.ErrCancelled},
	refusals: []error{stock.ErrSoldOut, stock.ErrBuyerLimit},
}

func (w *stockLoad) client(ctx context.Context, c int, rng *rand.Rand, more func(int) bool) {
	inv := w.conns[c%len(w.conns)]
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
	ins := make([]any, n)
	orders := make([]stock.Order, n)
	for k := range n {
		j := rng.IntN(GroupSize)
		q := int64(1 + rng.IntN(2))
		orders[k] = stock.Order{ID: fmt.Sprintf("%s-%d", id, k), Buyer: fmt.Sprintf("u%d", c), Items: []stock.Item{{SKU: skuName(g, j), Qty: q}}}
		rs[k] = &stockRecord{kind: "deduct", order: orders[k]}
		in := StockIn{Kind: StockDeduct}
		in.Qty[j] = q
		ins[k] = in
	}
	return w.journaled.batch(ctx, c, inv, g, rs, ins, func() func(int) (stock.Result, error) {
		results := inv.DeductBatch(ctx, orders)
		return func(k int) (stock.Result, error) { return results[k].Result, results[k].Err }
	})
}

// stockSend sends r's operation once.
func stockSend(ctx context.Context, inv *stock.Inventory, r *stockRecord) (stock.Result, error) {
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

// replay resubmits a decided operation (a refunded order as its deduct):
// it must get the first answer.
func (w *stockLoad) replay(ctx context.Context, inv *stock.Inventory, r *stockRecord) {
	rr := *r
	if rr.kind == "refunded" {
		rr.kind = "deduct"
	}
	w.journaled.replay(ctx, inv, &rr)
}

func (w *stockLoad) level(ctx context.Context, c int, inv *stock.Inventory, g string, j int) {
	w.read(c, g, StockIn{Kind: StockLevel, SKU: j}, func() (any, error) {
		lv, err := inv.Level(ctx, skuName(g, j))
		var out StockOut
		out.After[j] = lv.Available
		return out, err
	})
}

// stockJournal reads every entry of sku, of every bucket, under prefix.
func stockJournal(ctx context.Context, admin redis.UniversalClient, prefix, sku string, buckets int) ([]stock.Entry, error) {
	var out []stock.Entry
	g := groupOf(sku)
	for k := range buckets {
		tag := g
		if k > 0 {
			tag = fmt.Sprintf("%s#%d", g, k)
		}
		key := fmt.Sprintf("%s:stock:v1:{%s}:journal:%s", prefix, tag, sku)
		start := "-"
		for {
			msgs, err := admin.XRangeN(ctx, key, start, "+", 1000).Result()
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
	w.resolveUnknown(ctx)

	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tally
	kindOf := func(r *stockRecord) string {
		if r.kind == "refunded" {
			return "deduct"
		}
		return r.kind
	}
	exp := w.expect(func(r *stockRecord) []applied {
		var out []applied
		for _, it := range r.items() {
			out = append(out, applied{r.id(), kindOf(r), it.SKU})
		}
		return out
	})
	soldAcked := map[string]int64{}
	for _, r := range w.records {
		if !strings.HasPrefix(r.answer, "ok") {
			continue
		}
		for _, it := range r.items() {
			switch kindOf(r) {
			case "deduct":
				soldAcked[it.SKU] += it.Qty
			case "refund":
				soldAcked[it.SKU] -= it.Qty
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
		rep, err := w.verifier.Audit(ctx, sku)
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
		entries, err := stockJournal(ctx, w.admin, w.prefix, sku, b)
		if err != nil {
			t.problem("stock journal %s: %v", sku, err)
			continue
		}
		var journal []applied
		perBuyer := map[string]int64{}
		for _, e := range entries {
			switch e.Kind {
			case stock.KindDeduct, stock.KindRefund, stock.KindRestock, stock.KindWriteOff:
			default:
				continue
			}
			journal = append(journal, applied{e.Op, e.Kind, sku})
			if e.Buyer != "" {
				perBuyer[e.Buyer] += e.Delta.Sold - e.Delta.Refunded
			}
		}
		exp.compare(&t, ModuleStock, sku, journal)
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
