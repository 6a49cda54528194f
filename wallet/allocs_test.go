package wallet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
)

// allocBudgetDebit is the most heap allocations one Debit may cost,
// go-redis's own included: 57 (58 with -race) when it was set, a dozen of
// them go-redis reading the script's reply. A change that needs more must
// say why in its commit, and raise this.
const allocBudgetDebit = 62

// TestAllocs_debit keeps the allocations of a Debit from growing
// (BenchmarkLedger_Debit_hotAccount reports them per call). Not parallel:
// testing.AllocsPerRun counts every allocation of the process while it
// runs.
func TestAllocs_debit(t *testing.T) {
	l := mustNew(t, shared.Client())
	ctx := context.Background()
	if err := l.Open(ctx, "allocs", wallet.WithCurrency("CNY"), wallet.WithOverdraft(1<<53-1)); err != nil {
		t.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // new IDs for each run of the test (-count)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "allocs-" + run + "-" + strconv.Itoa(i)
	}
	n := 0
	debit := func() {
		res, err := l.Debit(ctx, wallet.Tx{ID: ids[n], Account: "allocs", Amount: 1})
		n++
		if err != nil || res.Replayed {
			t.Fatalf("debit: %+v, %v", res, err)
		}
	}
	for range 50 { // load the script, fill the pool
		debit()
	}
	got := testing.AllocsPerRun(300, debit)
	t.Logf("%.0f allocations per Debit (budget %d)", got, allocBudgetDebit)
	if got > allocBudgetDebit {
		t.Errorf("a Debit allocates %.0f times, over its budget of %d", got, allocBudgetDebit)
	}
}
