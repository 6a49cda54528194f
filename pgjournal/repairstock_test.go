package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// A failover to a replica that missed two acknowledged orders, one on a
// single SKU and one across two SKUs of a slot group: the reconciler
// reports both SKUs; RepairStock of the first gives both orders back once,
// whole, from the caller's order records, which ends the second SKU's
// drift too (nothing left to repair there); a client's retry is answered
// from the restored marker; a lost order the caller does not know, and one
// whose units went to other buyers meanwhile (ErrSoldOut), are skipped and
// reported, and their SKUs' drift stays.
func TestRepairStock_lostOrders(t *testing.T) {
	pair := redistest.NewPair(t, redistest.Options{})
	f := newFixture(t, sharedPG, pair.Primary)
	ctx := t.Context()
	skus := []string{"rs/a", "rs/b", "rs/c", "rs/d"}
	stockWork(t, f.inv, "rs", 20, skus...)
	replica, promote := detachReplica(t, pair)
	orders := map[string]stock.Order{
		"rs-lost":  {ID: "rs-lost", Buyer: "z1", Items: []stock.Item{{SKU: "rs/a", Qty: 2}}},
		"rs-multi": {ID: "rs-multi", Buyer: "z2", Items: []stock.Item{{SKU: "rs/a", Qty: 1}, {SKU: "rs/b", Qty: 3}}},
		"rs-sold":  {ID: "rs-sold", Buyer: "z4", Items: []stock.Item{{SKU: "rs/d", Qty: 1}}},
	}
	for _, id := range []string{"rs-lost", "rs-multi", "rs-sold"} {
		if _, err := f.inv.Deduct(ctx, orders[id]); err != nil {
			t.Fatal(err)
		}
	}
	unknown := stock.Order{ID: "rs-unknown", Buyer: "z3", Items: []stock.Item{{SKU: "rs/c", Qty: 1}}}
	if _, err := f.inv.Deduct(ctx, unknown); err != nil {
		t.Fatal(err)
	}

	f.catchUp(skus, nil)

	// Failover: the replica becomes the primary; the service reconnects.
	promote()
	inv, err := stock.New(replica, stock.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	f.inv = inv
	if keys := driftKeys(f.reconcileStock(skus...)); !slices.Equal(keys, skus) {
		t.Fatalf("drift on %v, want %v", keys, skus)
	}
	// On the new primary, rs/d's last units go to other buyers.
	lv, err := inv.Level(ctx, "rs/d")
	if err != nil {
		t.Fatal(err)
	}
	for i := range lv.Available {
		o := stock.Order{ID: fmt.Sprint("rs-other", i), Buyer: fmt.Sprint("w", i), Items: []stock.Item{{SKU: "rs/d", Qty: 1}}}
		if _, err := inv.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	known := func(_ context.Context, id string) (stock.Order, bool, error) {
		o, ok := orders[id]
		return o, ok, nil
	}
	rs, err := f.book.RepairStock(ctx, inv, "rs/d", known)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"rs-sold skipped"}; !slices.Equal(got, want) || !errors.Is(rs[0].Err, stock.ErrSoldOut) {
		t.Fatalf("repair of rs/d: %v (%+v), want %v with ErrSoldOut", got, rs, want)
	}
	rs, err = f.book.RepairStock(ctx, inv, "rs/a", known)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"rs-lost applied", "rs-multi applied"}; !slices.Equal(got, want) {
		t.Fatalf("repair of rs/a: %v, want %v", got, want)
	}
	if rs, err = f.book.RepairStock(ctx, inv, "rs/b", known); err != nil || len(rs) != 0 {
		t.Fatalf("repair of rs/b: %+v, %v; want nothing left to repair", rs, err)
	}
	rs, err = f.book.RepairStock(ctx, inv, "rs/c", known)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"rs-unknown skipped"}; !slices.Equal(got, want) || !errors.Is(rs[0].Err, pgjournal.ErrUnrepairable) {
		t.Fatalf("repair of rs/c: %v (%v), want %v", got, rs, want)
	}
	// The client retries within the window: answered from the marker.
	if res, err := inv.Deduct(ctx, orders["rs-multi"]); err != nil || !res.Replayed {
		t.Fatalf("client retry: %+v, %v; want the stored answer", res, err)
	}
	f.catchUp(skus, nil)
	if n := f.int("SELECT count(*) FROM $S.stock_entries WHERE op IN ('rs-lost', 'rs-multi')"); n != 3 {
		t.Errorf("entries of the two orders booked: %d, want 3", n)
	}
	if keys := driftKeys(f.reconcileStock(skus...)); !slices.Equal(keys, []string{"rs/c", "rs/d"}) {
		t.Fatalf("drift after repair on %v, want only rs/c and rs/d (their orders were not given back)", keys)
	}
	if _, err := f.book.RepairStock(ctx, inv, "rs/a", nil); !errors.Is(err, pgjournal.ErrInvalid) {
		t.Fatalf("nil order function: %v, want ErrInvalid", err)
	}
}

// outcomes lists "<op> <outcome>" for each repair.
func outcomes(rs []pgjournal.Repair) []string {
	var got []string
	for _, r := range rs {
		got = append(got, r.Op+" "+r.Outcome)
	}
	return got
}
