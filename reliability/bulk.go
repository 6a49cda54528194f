package reliability

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// BulkRun is a long run of one module's batched writes (DeductBatch or
// TransferBatch, 100 per pipeline) by several workers while faults hit the
// deployment, checked afterwards by its O(n) invariants only: every
// acknowledged write is in the journal exactly once, nothing refused is,
// the journals prove the state (stock.Audit, wallet.Verify), and nothing
// was sold beyond supply or created out of nothing.
type BulkRun struct {
	Deploy  Deployment
	Ops     int // orders or transfers, in all
	Workers int // default 8
	Faults  []Fault
	Quiet   [2]time.Duration // between faults (default 1s..3s)
	Seed    uint64
}

func (r *BulkRun) defaults() {
	if r.Workers == 0 {
		r.Workers = 8
	}
	if r.Quiet == [2]time.Duration{} {
		r.Quiet = [2]time.Duration{time.Second, 3 * time.Second}
	}
}

const bulkBatch = 100

// bulkState is what one worker knows of each of its writes.
type bulkState struct {
	status []uint8 // bulkUnknown, bulkOK, bulkRefused
	sku    []uint8 // stock: SKU index; wallet: from<<4 | to
	amount []int32 // stock: quantity; wallet: amount
	group  []uint8 // wallet: group
}

const (
	bulkUnknown = iota
	bulkOK
	bulkRefused
)

func newBulkState(n int) *bulkState {
	return &bulkState{status: make([]uint8, n), sku: make([]uint8, n), amount: make([]int32, n), group: make([]uint8, n)}
}

// ends returns the accounts, from and to, of transfer n.
func (st *bulkState) ends(n int) [2]int { return [2]int{int(st.sku[n] >> 4), int(st.sku[n] & 15)} }

// parseBulkID splits "<letter><worker>-<n>" into worker and n.
func parseBulkID(id string) (w, n int, ok bool) {
	if len(id) < 2 {
		return 0, 0, false
	}
	ws, ns, found := strings.Cut(id[1:], "-")
	if !found {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(ws)
	n, err2 := strconv.Atoi(ns)
	return w, n, err1 == nil && err2 == nil
}

// bulk is one module's bulk run under way.
type bulk struct {
	BulkRun
	module string
	prefix string // of the run's keys
	what   string // a write: order or transfer
	letter string // the first letter of the write IDs, "<letter><worker>-<n>"
	v      verdicts
	per    int          // writes per worker
	states []*bulkState // by worker
	// retried counts, by worker, the writes sent again alone.
	retried []int
}

// newBulk starts a bulk run of module, whose errors v sorts; refusals are
// the only refusals its writes expect.
func newBulk(r BulkRun, module string, v verdicts, refusals ...error) *bulk {
	r.defaults()
	v.refusals = refusals
	b := &bulk{BulkRun: r, module: module, prefix: fmt.Sprintf("bulk%d-%d", runs.Add(1), r.Seed%1_000_000),
		what: "order", letter: "o", v: v,
		per: (r.Ops + r.Workers - 1) / r.Workers, states: make([]*bulkState, r.Workers), retried: make([]int, r.Workers)}
	if module == ModuleWallet {
		b.what, b.letter = "transfer", "t"
	}
	return b
}

// id returns the ID of write n of worker w.
func (b *bulk) id(w, n int) string { return fmt.Sprintf("%s%d-%d", b.letter, w, n) }

// runBulk has b's workers send their writes in batches while the
// controller injects the faults, and returns the injections and how long
// it took. Each worker opens its client with open; send sends one batch
// of worker w on it: it chooses the writes base to base+n-1 with rng,
// notes them in st, sends them in one pipeline and returns the answer to
// each, and resend, which sends the batch's write k again alone. A write
// without an answer is sent again alone until it has one (settle), and
// its outcome goes into the worker's state.
func runBulk[C io.Closer](tb testing.TB, b *bulk, open func() (C, error),
	send func(ctx context.Context, conn C, w int, rng *rand.Rand, st *bulkState, base, n int) (errs []error, resend func(k int) error),
) ([]Injection, time.Duration) {
	ctx := tb.Context()
	start := time.Now()
	var progress Progress
	ctl := &controller{
		faults: b.Faults, rng: rand.New(rand.NewPCG(b.Seed, 0xb1)), quiet: b.Quiet,
		clock: func() int64 { return int64(time.Since(start)) }, blur: func(int64, int64) {},
		progress: map[string]*Progress{"bulk": &progress},
	}
	injections := ctl.during(tb, b.Workers, func(w int) {
		conn, err := open()
		if err != nil {
			tb.Errorf("%s.New: %v", b.module, err)
			return
		}
		defer conn.Close()
		rng := rand.New(rand.NewPCG(b.Seed, uint64(w)))
		st := newBulkState(b.per)
		b.states[w] = st
		for base := 0; base < b.per && ctx.Err() == nil; base += bulkBatch {
			callT := time.Now()
			errs, resend := send(ctx, conn, w, rng, st, base, min(bulkBatch, b.per-base))
			for k, err := range errs {
				if !b.v.answered(err) {
					b.retried[w]++
					var known bool
					if known, _, err = settle(ctx, func() error { return resend(k) }, b.v.answered); !known {
						continue
					}
				}
				st.status[base+k] = bulkRefused
				switch {
				case err == nil:
					st.status[base+k] = bulkOK
				case !b.v.refusal(err):
					tb.Errorf("%s bulk %s: %v", b.module, b.id(w, base+k), err)
				}
			}
			progress.OK(callT)
		}
	})
	return injections, time.Since(start)
}

// tally counts the writes by outcome; acked, when not nil, is called with
// each acknowledged one (write i of the worker with state st).
func (b *bulk) tally(acked func(st *bulkState, i int)) Tally {
	var t Tally
	for w, st := range b.states {
		t.Retried += b.retried[w]
		if st == nil {
			continue
		}
		for i, s := range st.status {
			t.Ops++
			switch s {
			case bulkOK:
				t.Acked++
				if acked != nil {
					acked(st, i)
				}
			case bulkUnknown:
				t.Unknown++
			}
		}
	}
	return t
}

// bulkSeen counts the entries of one journal by worker, write and side (a
// transfer's out, 0, and in, 1).
type bulkSeen map[[3]int]uint8

// entry counts an entry of the journal of at for side of the write id:
// found twice, it is a double; the entry of a refused write is a problem,
// and so is one of a write no worker made on at (on says whether write n
// of worker w belongs there). It returns the writer and the write.
func (b *bulk) entry(t *Tally, seen bulkSeen, at, id string, side int, on func(st *bulkState, n int) bool) (w, n int, ok bool) {
	w, n, ok = parseBulkID(id)
	if !ok || w >= b.Workers || n >= b.per || !on(b.states[w], n) {
		t.problem("%s: journal entry %q names no %s made on it", at, id, b.what)
		return 0, 0, false
	}
	k := [3]int{w, n, side}
	seen[k]++
	if seen[k] == 2 {
		t.Double++
		t.detail("%s: %s %s is in the journal twice", at, b.what, id)
	}
	if b.states[w].status[n] == bulkRefused {
		t.problem("%s: %s %s was refused but is in the journal", at, b.what, id)
	}
	return w, n, true
}

// lost counts the acknowledged writes missing from the journal of at:
// sides lists the sides of write i of the worker with state st that
// belong there.
func (b *bulk) lost(t *Tally, seen bulkSeen, at string, sides func(st *bulkState, i int) []int) {
	for w, st := range b.states {
		for i, s := range st.status {
			if s != bulkOK {
				continue
			}
			for _, side := range sides(st, i) {
				if seen[[3]int{w, i, side}] == 0 {
					t.Lost++
					t.detail("%s: acknowledged %s %s is not in the journal", at, b.what, b.id(w, i))
				}
			}
		}
	}
}

// row makes the run's row, and fails tb on what it shows.
func (b *bulk) row(tb testing.TB, injections []Injection, elapsed time.Duration, t Tally) Row {
	tb.Helper()
	var names []string
	for _, f := range b.Faults {
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	row := Row{Fault: fmt.Sprintf("%d %ss in batches; %s", b.Ops, b.what, strings.Join(names, "; ")),
		Module: b.module, Deployment: b.Deploy.Name(), Tally: t, Gated: durable(b.Faults)}
	row.recovered(injections, "bulk")
	row.report(tb, b.Seed, elapsed)
	return row
}

// report fails tb on what the run's row shows.
func (row Row) report(tb testing.TB, seed uint64, elapsed time.Duration) {
	tb.Helper()
	tb.Logf("%s on %s, %s: %d operations in %v, %d acknowledged, %d resubmitted, %d unknown; %d faults, recovery ≤ %v",
		row.Module, row.Deployment, row.Fault, row.Ops, elapsed.Round(time.Millisecond), row.Acked, row.Retried, row.Unknown, row.Injections, row.Recovery.Round(time.Millisecond))
	for _, p := range row.Problems {
		tb.Errorf("%s: %s (seed %d)", row.Module, p, seed)
	}
	if row.Mutex+row.Oversell+row.Double > 0 || row.Gated && row.Lost > 0 {
		tb.Errorf("%s: lost acknowledged writes %d, oversold units %d, double charges %d\n  %s\n  seed %d; replay: %s",
			row.Module, row.Lost, row.Oversell, row.Double, strings.Join(row.Details, "\n  "), seed, ReplayHint(tb, seed))
	}
}

// RunStockBulk sells r.Ops orders of one or two units from 8 SKUs and one
// SKU split into 8 buckets, with DeductBatch, and checks the invariants.
func RunStockBulk(tb testing.TB, r BulkRun) Row {
	tb.Helper()
	b := newBulk(r, ModuleStock, stockVerdicts, stock.ErrSoldOut)
	ctx := tb.Context()
	skus := []string{"bk/0", "bk/1", "bk/2", "bk/3", "bk/4", "bk/5", "bk/6", "bk/7", "bkhot"}
	buckets := func(i int) int {
		if skus[i] == "bkhot" {
			return 8
		}
		return 1
	}
	admin, err := stock.New(b.Deploy.Admin(tb), stockOptions(b.prefix, false)...)
	if err != nil {
		tb.Fatalf("stock.New: %v", err)
	}
	defer admin.Close()
	// Demand averages 1.5 units per order: supply covers about 80% of it,
	// so the last orders meet sold-out SKUs.
	initial := int64(b.Ops) * 3 / 2 * 8 / 10 / int64(len(skus))
	for i, sku := range skus {
		if err := admin.Create(ctx, sku, initial, stock.WithBuckets(buckets(i))); err != nil {
			tb.Fatalf("create %s: %v", sku, err)
		}
	}
	injections, elapsed := runBulk(tb, b, func() (*stock.Inventory, error) {
		return stock.New(b.Deploy.Client(tb), stockOptions(b.prefix, b.Deploy.ReplicaAck())...)
	}, func(ctx context.Context, inv *stock.Inventory, w int, rng *rand.Rand, st *bulkState, base, n int) ([]error, func(int) error) {
		orders := make([]stock.Order, n)
		for k := range n {
			i := base + k
			st.sku[i], st.amount[i] = uint8(rng.IntN(len(skus))), int32(1+rng.IntN(2))
			orders[k] = stock.Order{ID: b.id(w, i), Buyer: fmt.Sprintf("u%d", rng.IntN(1000)),
				Items: []stock.Item{{SKU: skus[st.sku[i]], Qty: int64(st.amount[i])}}}
		}
		errs := make([]error, n)
		for k, res := range inv.DeductBatch(ctx, orders) {
			errs[k] = res.Err
		}
		return errs, func(k int) error { _, err := inv.Deduct(ctx, orders[k]); return err }
	})

	acked := make([]int64, len(skus))
	t := b.tally(func(st *bulkState, i int) { acked[st.sku[i]] += int64(st.amount[i]) })
	rdb := b.Deploy.Admin(tb)
	for j, sku := range skus {
		rep, err := admin.Audit(ctx, sku)
		if err != nil {
			t.problem("audit %s: %v", sku, err)
			continue
		}
		for _, p := range rep.Problems {
			t.problem("audit %s: %s", sku, p)
		}
		entries, err := stockJournal(ctx, rdb, b.prefix, sku, buckets(j))
		if err != nil {
			t.problem("journal %s: %v", sku, err)
			continue
		}
		seen := bulkSeen{}
		for _, e := range entries {
			if e.Kind == stock.KindDeduct {
				b.entry(&t, seen, sku, e.Op, 0, func(st *bulkState, n int) bool { return int(st.sku[n]) == j })
			}
		}
		b.lost(&t, seen, sku, func(st *bulkState, i int) []int {
			if int(st.sku[i]) == j {
				return []int{0}
			}
			return nil
		})
		lv := rep.Levels
		if over := max(0, acked[j]-rep.Supply, -lv.Available); over > 0 {
			t.Oversell += int(over)
			t.detail("%s: oversold by %d units (acknowledged %d, supply %d, levels %+v)", sku, over, acked[j], rep.Supply, lv)
		}
	}
	return b.row(tb, injections, elapsed, t)
}

// RunWalletBulk makes r.Ops transfers between the 8 accounts of each of 4
// slot groups, with TransferBatch, and checks the invariants.
func RunWalletBulk(tb testing.TB, r BulkRun) Row {
	tb.Helper()
	b := newBulk(r, ModuleWallet, walletVerdicts, wallet.ErrInsufficientFunds)
	ctx := tb.Context()
	const groups, accounts, initial = 4, 8, 5000
	acct := func(g, a int) string { return fmt.Sprintf("bw%d/%d", g, a) }
	admin, err := wallet.New(b.Deploy.Admin(tb), walletOptions(b.prefix, false)...)
	if err != nil {
		tb.Fatalf("wallet.New: %v", err)
	}
	defer admin.Close()
	for g := range groups {
		for a := range accounts {
			if err := admin.Open(ctx, acct(g, a), wallet.WithCurrency("CNY")); err != nil {
				tb.Fatalf("open: %v", err)
			}
			if _, err := admin.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("init-%d-%d", g, a), Account: acct(g, a), Amount: initial}); err != nil {
				tb.Fatalf("credit: %v", err)
			}
		}
	}
	injections, elapsed := runBulk(tb, b, func() (*wallet.Ledger, error) {
		return wallet.New(b.Deploy.Client(tb), walletOptions(b.prefix, b.Deploy.ReplicaAck())...)
	}, func(ctx context.Context, led *wallet.Ledger, w int, rng *rand.Rand, st *bulkState, base, n int) ([]error, func(int) error) {
		ts := make([]wallet.Transfer, n)
		for k := range n {
			i := base + k
			from := rng.IntN(accounts)
			to := (from + 1 + rng.IntN(accounts-1)) % accounts
			st.group[i], st.sku[i], st.amount[i] = uint8(rng.IntN(groups)), uint8(from<<4|to), int32(1+rng.IntN(200))
			ts[k] = wallet.Transfer{ID: b.id(w, i), From: acct(int(st.group[i]), from), To: acct(int(st.group[i]), to), Amount: int64(st.amount[i])}
		}
		errs := make([]error, n)
		for k, res := range led.TransferBatch(ctx, ts) {
			errs[k] = res.Err
		}
		return errs, func(k int) error { _, err := led.Transfer(ctx, ts[k]); return err }
	})

	t := b.tally(nil)
	for g := range groups {
		var names []string
		for a := range accounts {
			name := acct(g, a)
			names = append(names, name)
			if err := admin.Verify(ctx, name); err != nil {
				t.problem("verify %s: %v", name, err)
			}
			es, err := walletEntries(ctx, admin, name)
			if err != nil {
				t.problem("entries %s: %v", name, err)
				continue
			}
			seen := bulkSeen{}
			inGroup := func(st *bulkState, n int) bool { return int(st.group[n]) == g }
			for _, e := range es {
				if e.Kind != wallet.KindTransferOut && e.Kind != wallet.KindTransferIn {
					continue
				}
				side := 0
				if e.Kind == wallet.KindTransferIn {
					side = 1
				}
				if w, n, ok := b.entry(&t, seen, name, e.TxID, side, inGroup); ok {
					if want := b.states[w].ends(n)[side]; want != a {
						t.problem("%s: %s %s belongs to account %d", name, e.Kind, e.TxID, want)
					}
				}
			}
			b.lost(&t, seen, name, func(st *bulkState, i int) []int {
				var sides []int
				for side, who := range st.ends(i) {
					if who == a && inGroup(st, i) {
						sides = append(sides, side)
					}
				}
				return sides
			})
		}
		tr, err := admin.TrialBalance(ctx, names...)
		switch {
		case err != nil:
			t.problem("trial balance %d: %v", g, err)
		case !tr.Balanced() || tr.NetTransfers() != 0 || tr.Posted != initial*accounts:
			t.problem("group %d: money created or destroyed: %+v", g, tr)
		}
	}
	return b.row(tb, injections, elapsed, t)
}
