package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Module names, for Scenario.Modules.
const (
	ModuleLock   = "lock"
	ModuleStock  = "stock"
	ModuleWallet = "wallet"
)

// Scenario is one run: workloads of N clients against a deployment while a
// controller injects faults, one at a time.
type Scenario struct {
	// Name labels the run in the report (by default the faults' names).
	Name   string
	Deploy Deployment
	// Faults are injected one at a time in random order, each followed by
	// a quiet period, until the workloads are done.
	Faults []Fault
	// Modules lists the workloads (default: lock, stock and wallet).
	Modules []string
	// Clients per workload (default 8) and operations per client (default
	// 1,000).
	Clients, Ops int
	// Quiet bounds the pause between faults (default 200ms..600ms).
	Quiet [2]time.Duration
	// MaxFaults, when positive, stops injecting after that many faults.
	MaxFaults int
	// MinFaults keeps the clients going past Ops until that many faults
	// have been injected and recovered from.
	MinFaults int
	// Seed drives every random choice (see Seed).
	Seed uint64
	// Stall adds the lock workload's stall fault to Faults: the next client
	// that takes a lock stops, renewals included, past its lease before its
	// write, as a frozen process would.
	Stall bool
	// Measure reports violations instead of failing on them (split brain).
	Measure bool
}

// Row is one line of the report: what one workload saw under a scenario.
type Row struct {
	Fault, Module string
	Deployment    string
	Injections    int
	Tally
	// Gated says lost acknowledged writes fail the run (every fault of the
	// scenario promises durability).
	Gated bool
	// Recovery is the longest time, over the injections, from the end of a
	// fault to the first successful operation issued after it; NoRecovery
	// counts injections after which none succeeded before the next.
	Recovery   time.Duration
	NoRecovery int
	// Checked is the number of operations porcupine checked.
	Checked int
}

var runs atomic.Int64

// Run runs sc, checks every history and invariant, fails tb on a violation
// the modules promise cannot happen, and returns one Row per workload.
func Run(tb testing.TB, sc Scenario) []Row {
	tb.Helper()
	ctx := tb.Context()
	if sc.Clients == 0 {
		sc.Clients = 8
	}
	if sc.Ops == 0 {
		sc.Ops = 1000
	}
	if sc.Quiet == [2]time.Duration{} {
		sc.Quiet = [2]time.Duration{200 * time.Millisecond, 600 * time.Millisecond}
	}
	if len(sc.Modules) == 0 {
		sc.Modules = []string{ModuleLock, ModuleStock, ModuleWallet}
	}
	start := time.Now()
	prefix := fmt.Sprintf("rel%d-%d", runs.Add(1), sc.Seed%1_000_000)
	var loads []workload
	for _, m := range sc.Modules {
		h := NewHistory(start)
		switch m {
		case ModuleLock:
			lw := newLockLoad(tb, sc.Deploy, prefix, h)
			for _, f := range sc.Faults {
				lw.maxHold = max(lw.maxHold, f.Hold)
			}
			if sc.Stall {
				sc.Faults = append(sc.Faults, lw.Stall())
			}
			loads = append(loads, lw)
		case ModuleStock:
			loads = append(loads, newStockLoad(tb, sc.Deploy, prefix, h))
		case ModuleWallet:
			loads = append(loads, newWalletLoad(tb, sc.Deploy, prefix, h))
		default:
			tb.Fatalf("unknown module %q", m)
		}
	}
	defer func() {
		for _, w := range loads {
			w.close()
		}
	}()
	if sc.Name == "" {
		var names []string
		for _, f := range sc.Faults {
			names = append(names, f.Name)
		}
		sc.Name = strings.Join(names, "; ")
	}
	for _, w := range loads {
		if err := w.setup(ctx); err != nil {
			tb.Fatalf("%s setup: %v", w.name(), err)
		}
	}
	if s, ok := sc.Deploy.(interface{ Sync(context.Context) error }); ok {
		if err := s.Sync(ctx); err != nil {
			tb.Fatalf("setup: %v", err)
		}
	}

	ctl := &controller{
		faults: sc.Faults, rng: rand.New(rand.NewPCG(sc.Seed, 0xfa)), quiet: sc.Quiet, limit: sc.MaxFaults,
		clock:    func() int64 { return int64(time.Since(start)) },
		progress: map[string]*Progress{},
		blur: func(from, to int64) {
			for _, w := range loads {
				w.history().Blur(from, to)
			}
		},
	}
	for _, w := range loads {
		ctl.progress[w.name()] = w.progress()
	}
	if len(sc.Faults) == 0 {
		ctl.finished.Store(true)
	}
	more := func(done int) bool { return done < sc.Ops || ctl.waiting(sc.MinFaults) }
	injections := ctl.during(tb, len(loads)*sc.Clients, func(i int) {
		k, c := i/sc.Clients, i%sc.Clients
		rng := rand.New(rand.NewPCG(sc.Seed, uint64(k*1000+c)))
		loads[k].client(ctx, c, rng, more)
	})
	ran := time.Since(start)

	gated := !sc.Measure && durable(sc.Faults)
	rows := make([]Row, len(loads))
	var checks sync.WaitGroup
	for i, w := range loads {
		rows[i] = Row{Fault: sc.Name, Module: w.name(), Deployment: sc.Deploy.Name(), Gated: gated}
		rows[i].recovered(injections, w.name())
		rows[i].Tally = w.verify(ctx)
		if sc.Measure {
			continue // a history with writes lost on purpose is not linearizable
		}
		checks.Go(func() {
			rows[i].Checked = CheckLinearizable(tb, w.name(), w.model(), w.history(), sc.Seed)
		})
	}
	checks.Wait()
	for _, r := range rows {
		tb.Logf("%s on %s, %s: %d operations in %v (%d checked by porcupine), %d acknowledged, %d resubmitted, %d unknown, %d unacknowledged by the replica; %d faults, recovery ≤ %v",
			r.Module, r.Deployment, r.Fault, r.Ops, ran.Round(time.Millisecond), r.Checked, r.Acked, r.Retried, r.Unknown, r.Unacked, r.Injections, r.Recovery.Round(time.Millisecond))
		for _, p := range r.Problems {
			if sc.Measure { // consequences of writes lost on purpose
				tb.Logf("%s: %s", r.Module, p)
				continue
			}
			tb.Errorf("%s: %s (seed %d)", r.Module, p, sc.Seed)
		}
		bad := r.Mutex+r.Oversell+r.Double > 0 || r.Gated && r.Lost > 0
		switch {
		case bad && !sc.Measure:
			tb.Errorf("%s under %q: lost acknowledged writes %d (gated: %v), mutual-exclusion violations %d, oversold units %d, double charges %d\n  %s\n  seed %d; replay: %s",
				r.Module, r.Fault, r.Lost, r.Gated, r.Mutex, r.Oversell, r.Double, strings.Join(r.Details, "\n  "), sc.Seed, ReplayHint(tb, sc.Seed))
		case len(r.Details) > 0:
			tb.Logf("%s under %q (reported, not gated):\n  %s", r.Module, r.Fault, strings.Join(r.Details, "\n  "))
		}
	}
	return rows
}

// recovered fills the row's injections and recovery from those of the
// run, for the workload called name.
func (row *Row) recovered(injections []Injection, name string) {
	row.Injections = len(injections)
	for _, inj := range injections {
		if d, ok := inj.Recovery[name]; ok {
			row.Recovery = max(row.Recovery, d)
		} else if !inj.Cut {
			row.NoRecovery++
		}
	}
}

// durable reports whether there are faults and every one promises
// durability: then lost acknowledged writes fail the run.
func durable(faults []Fault) bool {
	for _, f := range faults {
		if !f.Durable {
			return false
		}
	}
	return len(faults) > 0
}

// FormatTable renders rows as a Markdown table with the columns of the
// long tier's report.
func FormatTable(rows []Row) string {
	var b strings.Builder
	b.WriteString("| fault | deployment | module | faults | operations | unknown | lost acknowledged writes | mutual-exclusion violations | oversell | double charges (idgen: duplicate IDs) | recovery |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		lost := fmt.Sprint(r.Lost)
		if !r.Gated {
			lost += " (reported)"
		}
		rec := "–"
		if r.Injections > 0 {
			rec = "≤ " + r.Recovery.Round(time.Millisecond).String()
			if r.NoRecovery > 0 {
				rec += fmt.Sprintf(" (%d without)", r.NoRecovery)
			}
		}
		mutex := "–"
		if r.Module == ModuleLock {
			mutex = fmt.Sprint(r.Mutex)
		}
		over := "–"
		if r.Module == ModuleStock {
			over = fmt.Sprint(r.Oversell)
		}
		double := "–"
		if r.Module != ModuleLock {
			double = fmt.Sprint(r.Double)
		}
		if r.Module == "idgen" {
			lost = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s |\n",
			r.Fault, r.Deployment, r.Module, r.Injections, r.Ops, r.Unknown, lost, mutex, over, double, rec)
	}
	return b.String()
}

// GroupKeys returns one key in each slot group the workloads use, for
// faults that pick a shard by key.
func GroupKeys() []string {
	out := []string{"{lock-a}", "{lock-b}", "{res-a}", "{res-b}", "{" + hotSKU + "}"}
	for _, g := range stockGroups {
		out = append(out, "{"+g+"}")
	}
	for _, g := range walletGroups {
		out = append(out, "{"+g+"}")
	}
	return out
}
