package reliability

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// runBulk runs work on r.Workers goroutines while the controller injects
// r.Faults, and returns the injections.
func runBulk(tb testing.TB, r BulkRun, progress *Progress, work func(w int)) ([]Injection, time.Duration) {
	start := time.Now()
	ctl := &controller{
		faults: r.Faults, rng: rand.New(rand.NewPCG(r.Seed, 0xb1)), quiet: r.Quiet,
		clock: func() int64 { return int64(time.Since(start)) }, blur: func(int64, int64) {},
		progress: map[string]*Progress{"bulk": progress},
	}
	injections := ctl.during(tb, r.Workers, work)
	return injections, time.Since(start)
}

func bulkRow(module string, r BulkRun, injections []Injection, t Tally) Row {
	var names []string
	seen := map[string]bool{}
	durable := len(r.Faults) > 0
	for _, f := range r.Faults {
		if !seen[f.Name] {
			names = append(names, f.Name)
			seen[f.Name] = true
		}
		durable = durable && f.Durable
	}
	what := "orders"
	if module == ModuleWallet {
		what = "transfers"
	}
	row := Row{Fault: fmt.Sprintf("%d %s in batches; %s", r.Ops, what, strings.Join(names, "; ")),
		Module: module, Deployment: r.Deploy.Name(), Injections: len(injections), Tally: t, Gated: durable}
	for _, inj := range injections {
		if d, ok := inj.Recovery["bulk"]; ok {
			row.Recovery = max(row.Recovery, d)
		} else if !inj.Cut {
			row.NoRecovery++
		}
	}
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
	r.defaults()
	ctx := tb.Context()
	prefix := fmt.Sprintf("bulk%d-%d", runs.Add(1), r.Seed%1_000_000)
	skus := []string{"bk/0", "bk/1", "bk/2", "bk/3", "bk/4", "bk/5", "bk/6", "bk/7", "bkhot"}
	buckets := func(i int) int {
		if skus[i] == "bkhot" {
			return 8
		}
		return 1
	}
	admin, err := stock.New(r.Deploy.Admin(tb), stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	if err != nil {
		tb.Fatalf("stock.New: %v", err)
	}
	defer admin.Close()
	// Demand averages 1.5 units per order: supply covers about 80% of it,
	// so the last orders meet sold-out SKUs.
	initial := int64(r.Ops) * 3 / 2 * 8 / 10 / int64(len(skus))
	for i, sku := range skus {
		if err := admin.Create(ctx, sku, initial, stock.WithBuckets(buckets(i))); err != nil {
			tb.Fatalf("create %s: %v", sku, err)
		}
	}
	opts := []stock.Option{stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0)}
	if r.Deploy.ReplicaAck() {
		opts = append(opts, stock.WithReplicaAck(1, AckTimeout))
	}
	per := (r.Ops + r.Workers - 1) / r.Workers
	states := make([]*bulkState, r.Workers)
	retried := make([]int, r.Workers)
	var progress Progress
	injections, elapsed := runBulk(tb, r, &progress, func(w int) {
		inv, err := stock.New(r.Deploy.Client(tb), opts...)
		if err != nil {
			tb.Errorf("stock.New: %v", err)
			return
		}
		defer inv.Close()
		rng := rand.New(rand.NewPCG(r.Seed, uint64(w)))
		st := newBulkState(per)
		states[w] = st
		for base := 0; base < per && ctx.Err() == nil; base += bulkBatch {
			n := min(bulkBatch, per-base)
			orders := make([]stock.Order, n)
			for k := range n {
				i := base + k
				st.sku[i], st.amount[i] = uint8(rng.IntN(len(skus))), int32(1+rng.IntN(2))
				orders[k] = stock.Order{ID: fmt.Sprintf("o%d-%d", w, i), Buyer: fmt.Sprintf("u%d", rng.IntN(1000)),
					Items: []stock.Item{{SKU: skus[st.sku[i]], Qty: int64(st.amount[i])}}}
			}
			callT := time.Now()
			results := inv.DeductBatch(ctx, orders)
			for k, res := range results {
				err := res.Err
				if !stockAnswer(err) {
					retried[w]++
					var known bool
					known, _, err = settle(ctx, func() error { _, err := inv.Deduct(ctx, orders[k]); return err }, stockAnswer)
					if !known {
						continue
					}
				}
				switch {
				case err == nil:
					st.status[base+k] = bulkOK
				case errors.Is(err, stock.ErrSoldOut):
					st.status[base+k] = bulkRefused
				default:
					st.status[base+k] = bulkRefused
					tb.Errorf("stock bulk %s: %v", orders[k].ID, err)
				}
			}
			progress.OK(callT)
		}
	})

	var t Tally
	acked := make([]int64, len(skus))
	rdb := r.Deploy.Admin(tb)
	for w, st := range states {
		t.Retried += retried[w]
		if st == nil {
			continue
		}
		for i, s := range st.status {
			t.Ops++
			switch s {
			case bulkOK:
				t.Acked++
				acked[st.sku[i]] += int64(st.amount[i])
			case bulkUnknown:
				t.Unknown++
			}
		}
	}
	for j, sku := range skus {
		rep, err := admin.Audit(ctx, sku)
		if err != nil {
			t.problem("audit %s: %v", sku, err)
			continue
		}
		for _, p := range rep.Problems {
			t.problem("audit %s: %s", sku, p)
		}
		entries, err := stockJournal(ctx, rdb, prefix, sku, buckets(j))
		if err != nil {
			t.problem("journal %s: %v", sku, err)
			continue
		}
		seen := make([][]uint8, r.Workers)
		for w := range seen {
			seen[w] = make([]uint8, per)
		}
		for _, e := range entries {
			if e.Kind != stock.KindDeduct {
				continue
			}
			w, n, ok := parseBulkID(e.Op)
			if !ok || w >= r.Workers || n >= per || int(states[w].sku[n]) != j {
				t.problem("%s: journal entry for an order never placed on it: %q", sku, e.Op)
				continue
			}
			seen[w][n]++
			if seen[w][n] == 2 {
				t.Double++
				t.detail("%s: order %s is in the journal twice", sku, e.Op)
			}
			if states[w].status[n] == bulkRefused {
				t.problem("%s: order %s was refused but is in the journal", sku, e.Op)
			}
		}
		for w, st := range states {
			for i, s := range st.status {
				if s == bulkOK && int(st.sku[i]) == j && seen[w][i] == 0 {
					t.Lost++
					t.detail("%s: acknowledged order o%d-%d is not in the journal", sku, w, i)
				}
			}
		}
		lv := rep.Levels
		if over := max(0, acked[j]-rep.Supply, -lv.Available); over > 0 {
			t.Oversell += int(over)
			t.detail("%s: oversold by %d units (acknowledged %d, supply %d, levels %+v)", sku, over, acked[j], rep.Supply, lv)
		}
	}
	row := bulkRow(ModuleStock, r, injections, t)
	row.report(tb, r.Seed, elapsed)
	return row
}

// RunWalletBulk makes r.Ops transfers between the 8 accounts of each of 4
// slot groups, with TransferBatch, and checks the invariants.
func RunWalletBulk(tb testing.TB, r BulkRun) Row {
	tb.Helper()
	r.defaults()
	ctx := tb.Context()
	prefix := fmt.Sprintf("bulk%d-%d", runs.Add(1), r.Seed%1_000_000)
	const groups, accounts, initial = 4, 8, 5000
	acct := func(g, a int) string { return fmt.Sprintf("bw%d/%d", g, a) }
	admin, err := wallet.New(r.Deploy.Admin(tb), wallet.WithKeyPrefix(prefix))
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
	opts := []wallet.Option{wallet.WithKeyPrefix(prefix)}
	if r.Deploy.ReplicaAck() {
		opts = append(opts, wallet.WithReplicaAck(1, AckTimeout))
	}
	per := (r.Ops + r.Workers - 1) / r.Workers
	states := make([]*bulkState, r.Workers)
	retried := make([]int, r.Workers)
	var progress Progress
	injections, elapsed := runBulk(tb, r, &progress, func(w int) {
		led, err := wallet.New(r.Deploy.Client(tb), opts...)
		if err != nil {
			tb.Errorf("wallet.New: %v", err)
			return
		}
		defer led.Close()
		rng := rand.New(rand.NewPCG(r.Seed, uint64(w)))
		st := newBulkState(per)
		states[w] = st
		for base := 0; base < per && ctx.Err() == nil; base += bulkBatch {
			n := min(bulkBatch, per-base)
			ts := make([]wallet.Transfer, n)
			for k := range n {
				i := base + k
				from := rng.IntN(accounts)
				to := (from + 1 + rng.IntN(accounts-1)) % accounts
				st.group[i], st.sku[i], st.amount[i] = uint8(rng.IntN(groups)), uint8(from<<4|to), int32(1+rng.IntN(200))
				ts[k] = wallet.Transfer{ID: fmt.Sprintf("t%d-%d", w, i), From: acct(int(st.group[i]), from), To: acct(int(st.group[i]), to), Amount: int64(st.amount[i])}
			}
			callT := time.Now()
			results := led.TransferBatch(ctx, ts)
			for k, res := range results {
				err := res.Err
				if !walletAnswer(err) {
					retried[w]++
					var known bool
					known, _, err = settle(ctx, func() error { _, err := led.Transfer(ctx, ts[k]); return err }, walletAnswer)
					if !known {
						continue
					}
				}
				switch {
				case err == nil:
					st.status[base+k] = bulkOK
				case errors.Is(err, wallet.ErrInsufficientFunds):
					st.status[base+k] = bulkRefused
				default:
					st.status[base+k] = bulkRefused
					tb.Errorf("wallet bulk %s: %v", ts[k].ID, err)
				}
			}
			progress.OK(callT)
		}
	})

	var t Tally
	for w, st := range states {
		t.Retried += retried[w]
		if st == nil {
			continue
		}
		for _, s := range st.status {
			t.Ops++
			switch s {
			case bulkOK:
				t.Acked++
			case bulkUnknown:
				t.Unknown++
			}
		}
	}
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
			seen := map[[3]int]uint8{} // worker, n, out(0)/in(1)
			for _, e := range es {
				if e.Kind != wallet.KindTransferOut && e.Kind != wallet.KindTransferIn {
					continue
				}
				w, n, ok := parseBulkID(e.TxID)
				if !ok || w >= r.Workers || n >= per || int(states[w].group[n]) != g {
					t.problem("%s: journal entry for a transfer never made on it: %q", name, e.TxID)
					continue
				}
				side, want := 0, int(states[w].sku[n]>>4)
				if e.Kind == wallet.KindTransferIn {
					side, want = 1, int(states[w].sku[n]&15)
				}
				if want != a {
					t.problem("%s: %s %s belongs to account %d", name, e.Kind, e.TxID, want)
				}
				k := [3]int{w, n, side}
				seen[k]++
				if seen[k] == 2 {
					t.Double++
					t.detail("%s: %s %s is in the journal twice", name, e.Kind, e.TxID)
				}
				if states[w].status[n] == bulkRefused {
					t.problem("%s: transfer %s was refused but is in the journal", name, e.TxID)
				}
			}
			for w, st := range states {
				for i, s := range st.status {
					if s != bulkOK || int(st.group[i]) != g {
						continue
					}
					for side, who := range []int{int(st.sku[i] >> 4), int(st.sku[i] & 15)} {
						if who == a && seen[[3]int{w, i, side}] == 0 {
							t.Lost++
							t.detail("%s: acknowledged transfer t%d-%d is not in the journal", name, w, i)
						}
					}
				}
			}
		}
		tr, err := admin.TrialBalance(ctx, names...)
		switch {
		case err != nil:
			t.problem("trial balance %d: %v", g, err)
		case !tr.Balanced() || tr.NetTransfers() != 0 || tr.Posted != initial*accounts:
			t.problem("group %d: money created or destroyed: %+v", g, tr)
		}
	}
	row := bulkRow(ModuleWallet, r, injections, t)
	row.report(tb, r.Seed, elapsed)
	return row
}
