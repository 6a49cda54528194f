package reliability

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/idgen"
)

// ID generator kinds, for IDRun.Kind.
const (
	IDSegment   = "segment"
	IDSnowflake = "snowflake"
	IDSequence  = "sequence"
)

// IDRun has several generators of one kind share one name, each with its
// own client (as separate processes would), while faults hit the
// deployment, and checks that no ID was handed out twice.
type IDRun struct {
	Deploy     Deployment
	Kind       string
	Generators int // default 4
	// PerGenerator is how many IDs each generator hands out, spread evenly
	// over Duration so that the faults meet them.
	PerGenerator int
	Duration     time.Duration
	Faults       []Fault
	Quiet        [2]time.Duration // between faults (default 200ms..600ms)
	Seed         uint64
	// Measure reports duplicates instead of failing on them.
	Measure bool
}

// IDReport is what an IDRun saw.
type IDReport struct {
	Kind       string
	Generated  int
	Duplicates int
	// OutOfOrder counts Sequence values not above a value returned before
	// they were requested (Sequence promises global order).
	OutOfOrder int
	// Refused counts Next calls that failed (Redis unreachable and the
	// runway spent, lease lost); the generator was asked again.
	Refused    int
	Injections int
	// Recovery is the longest time from the end of a fault to the first
	// ID handed out after it.
	Recovery time.Duration
	Elapsed  time.Duration
}

type seqCall struct {
	call, ret int64
	id        int64
}

// RunIDs runs r and fails tb on a duplicate (or a Sequence value out of
// order) unless r.Measure is set.
func RunIDs(tb testing.TB, r IDRun) IDReport {
	tb.Helper()
	ctx := tb.Context()
	if r.Generators == 0 {
		r.Generators = 4
	}
	if r.Quiet == [2]time.Duration{} {
		r.Quiet = [2]time.Duration{200 * time.Millisecond, 600 * time.Millisecond}
	}
	name := fmt.Sprintf("ids%d-%d", runs.Add(1), r.Seed%1_000_000)
	start := time.Now()
	clock := func() int64 { return int64(time.Since(start)) }
	gens := make([]idgen.Generator, r.Generators)
	var closers []func() error
	for g := range r.Generators {
		rdb := r.Deploy.Client(tb)
		var err error
		switch r.Kind {
		case IDSegment:
			var s *idgen.Segment
			s, err = idgen.NewSegment(rdb, name, idgen.WithMinStep(100), idgen.WithMaxStep(20_000), idgen.WithReplicaAckTimeout(AckTimeout))
			gens[g], closers = s, append(closers, s.Close)
		case IDSequence:
			gens[g], err = idgen.NewSequence(rdb, name, idgen.WithReplicaAckTimeout(AckTimeout))
		case IDSnowflake:
			var s *idgen.Snowflake
			for range 100 { // the first lease may meet the faults' predecessors; ask again
				if s, err = idgen.NewLeasedSnowflake(ctx, rdb, name, idgen.WithLeaseTTL(time.Second)); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err == nil {
				gens[g], closers = s, append(closers, s.Close)
			}
		default:
			err = fmt.Errorf("unknown generator kind %q", r.Kind)
		}
		if err != nil {
			tb.Fatalf("%s generator: %v", r.Kind, err)
		}
	}
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()

	progress := &Progress{}
	ctl := &controller{
		faults: r.Faults, rng: rand.New(rand.NewPCG(r.Seed, 0x1d)), quiet: r.Quiet, clock: clock,
		blur: func(int64, int64) {}, progress: map[string]*Progress{"idgen": progress},
	}
	ids := make([][]int64, r.Generators)
	calls := make([][]seqCall, r.Generators)
	refused := make([]int, r.Generators)
	generate := func(g int) {
		ids[g] = make([]int64, 0, r.PerGenerator)
		began := time.Now()
		for len(ids[g]) < r.PerGenerator && ctx.Err() == nil {
			if n := len(ids[g]); n%1000 == 0 && r.Duration > 0 {
				due := began.Add(time.Duration(int64(r.Duration) * int64(n) / int64(r.PerGenerator)))
				time.Sleep(time.Until(due))
			}
			call, callT := clock(), time.Now()
			id, err := gens[g].Next(ctx)
			if err != nil {
				refused[g]++
				if errors.Is(err, idgen.ErrClosed) {
					return
				}
				time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
				continue
			}
			ids[g] = append(ids[g], int64(id))
			if r.Kind == IDSequence {
				calls[g] = append(calls[g], seqCall{call: call, ret: clock(), id: int64(id)})
			}
			if len(ids[g])%64 == 0 || r.Kind == IDSequence {
				progress.OK(callT)
			}
		}
	}
	injections := ctl.during(tb, r.Generators, generate)
	rep := IDReport{Kind: r.Kind, Injections: len(injections), Elapsed: time.Since(start)}
	for _, inj := range injections {
		rep.Recovery = max(rep.Recovery, inj.Recovery["idgen"])
	}
	var all []int64
	for g := range r.Generators {
		rep.Generated += len(ids[g])
		rep.Refused += refused[g]
		all = append(all, ids[g]...)
		ids[g] = nil
	}
	slices.Sort(all)
	var dups []int64
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			rep.Duplicates++
			if len(dups) < 10 {
				dups = append(dups, all[i])
			}
		}
	}
	if r.Kind == IDSequence {
		rep.OutOfOrder = outOfOrder(slices.Concat(calls...))
	}
	tb.Logf("%s: %d IDs from %d generators in %v, %d refused calls, %d faults: %d duplicates %v, %d out of order",
		r.Kind, rep.Generated, r.Generators, rep.Elapsed.Round(time.Millisecond), rep.Refused, rep.Injections, rep.Duplicates, dups, rep.OutOfOrder)
	if !r.Measure && rep.Duplicates+rep.OutOfOrder > 0 {
		tb.Errorf("%s: %d duplicate IDs (first: %v), %d Sequence values out of order; seed %d; replay: %s",
			r.Kind, rep.Duplicates, dups, rep.OutOfOrder, r.Seed, ReplayHint(tb, r.Seed))
	}
	return rep
}

// outOfOrder counts calls whose value is not above the value of every call
// that returned before they were made.
func outOfOrder(cs []seqCall) int {
	byRet := slices.Clone(cs)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	sort.Slice(cs, func(i, j int) bool { return cs[i].call < cs[j].call })
	n, k := 0, 0
	var highest int64
	for _, c := range cs {
		for k < len(byRet) && byRet[k].ret < c.call {
			highest = max(highest, byRet[k].id)
			k++
		}
		if c.id <= highest {
			n++
		}
	}
	return n
}

// IDRow is the report row of an ID run: duplicates go in the double
// charges column.
func IDRow(rep IDReport, d Deployment, faults []Fault) Row {
	var names []string
	for _, f := range faults {
		names = append(names, f.Name)
	}
	return Row{
		Fault:      fmt.Sprintf("%d %s IDs; %s", rep.Generated, rep.Kind, strings.Join(names, "; ")),
		Module:     "idgen",
		Deployment: d.Name(),
		Injections: rep.Injections,
		Gated:      durable(faults),
		Recovery:   rep.Recovery,
		Tally:      Tally{Ops: rep.Generated, Acked: rep.Generated, Double: rep.Duplicates, Retried: rep.Refused},
	}
}
