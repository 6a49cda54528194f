package idgen_test

import (
	"context"
	"testing"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// allocBudgetNext is the most heap allocations one Sequence.Next may cost,
// go-redis's own included: 11 when it was set. A change that needs more must say why in its commit, and raise this.
const allocBudgetNext = 13

// TestAllocs_sequenceNext keeps the allocations of a Sequence.Next from
// growing (BenchmarkSequence reports them per call). Not parallel:
// testing.AllocsPerRun counts every allocation of the process while it
// runs.
func TestAllocs_sequenceNext(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	seq, err := idgen.NewSequence(s.Client(), "allocs")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	next := func() {
		if _, err := seq.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // load the script, fill the pool
		next()
	}
	got := testing.AllocsPerRun(300, next)
	t.Logf("%.0f allocations per Next (budget %d)", got, allocBudgetNext)
	if got > allocBudgetNext {
		t.Errorf("a Next allocates %.0f times, over its budget of %d", got, allocBudgetNext)
	}
}
