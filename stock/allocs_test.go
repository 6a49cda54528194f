package stock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redkit-go/redkit/stock"
)

// allocBudgetDeduct is the most heap allocations one Deduct of one item
// may cost, go-redis's own included: 40 (41 with -race) when it was set. A change that needs more must say why in its
// commit, and raise this.
const allocBudgetDeduct = 46

// TestAllocs_deduct keeps the allocations of a Deduct from growing
// (BenchmarkInventory_Deduct_hotSKU reports them per call). Not parallel:
// testing.AllocsPerRun counts every allocation of the process while it
// runs.
func TestAllocs_deduct(t *testing.T) {
	inv, err := stock.New(shared.Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	ctx := context.Background()
	if err := inv.Create(ctx, "allocs", 1_000_000); err != nil {
		t.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // new IDs for each run of the test (-count)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "allocs-" + run + "-" + strconv.Itoa(i)
	}
	items := []stock.Item{{SKU: "allocs", Qty: 1}}
	n := 0
	deduct := func() {
		res, err := inv.Deduct(ctx, stock.Order{ID: ids[n], Buyer: "b", Items: items})
		n++
		if err != nil || res.Replayed {
			t.Fatalf("deduct: %+v, %v", res, err)
		}
	}
	for range 50 { // load the script, fill the pool
		deduct()
	}
	got := testing.AllocsPerRun(300, deduct)
	t.Logf("%.0f allocations per Deduct (budget %d)", got, allocBudgetDeduct)
	if got > allocBudgetDeduct {
		t.Errorf("a Deduct allocates %.0f times, over its budget of %d", got, allocBudgetDeduct)
	}
}
