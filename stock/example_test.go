package stock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

func Example() {
	ctx := context.Background()
	srv, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	inv, err := stock.New(srv.Client())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inv.Close()
	_ = inv.Create(ctx, "shop-7/sku-1", 3, stock.WithBuyerLimit(2))

	o := stock.Order{ID: "order-1", Buyer: "alice", Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: 2}}}
	res, err := inv.Deduct(ctx, o)
	fmt.Println(res.Levels["shop-7/sku-1"].Available, res.Replayed, err)

	// A retry of the same order (say, after a timeout) changes nothing.
	res, err = inv.Deduct(ctx, o)
	fmt.Println(res.Levels["shop-7/sku-1"].Available, res.Replayed, err)

	_, err = inv.Deduct(ctx, stock.Order{ID: "order-2", Buyer: "alice", Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: 1}}})
	fmt.Println(errors.Is(err, stock.ErrBuyerLimit))
	_, err = inv.Deduct(ctx, stock.Order{ID: "order-3", Buyer: "bob", Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: 2}}})
	fmt.Println(errors.Is(err, stock.ErrSoldOut))

	lv, _ := inv.Level(ctx, "shop-7/sku-1")
	fmt.Printf("%+v\n", lv)
	// Output:
	// 1 false <nil>
	// 1 true <nil>
	// true
	// true
	// {Available:1 Reserved:0 Sold:2 Refunded:0}
}

func ExampleInventory_Audit() {
	ctx := context.Background()
	inv, stop := exampleInventory()
	defer stop()

	_ = inv.Create(ctx, "sku-1", 10)
	_, _ = inv.Restock(ctx, "delivery-42", "sku-1", 5)
	_, _ = inv.Deduct(ctx, stock.Order{ID: "order-1", Buyer: "alice", Items: []stock.Item{{SKU: "sku-1", Qty: 4}}})
	_, _ = inv.Checkpoint(ctx, "sku-1")
	_, _ = inv.WriteOff(ctx, "damaged-7", "sku-1", 1)

	rep, _ := inv.Audit(ctx, "sku-1")
	fmt.Println(rep.OK(), rep.Supply, rep.Entries, rep.Levels.Available)
	// Output: true 14 2 10
}

func ExampleInventory_Consume() {
	ctx := context.Background()
	inv, closeAll := exampleInventory()
	defer closeAll()
	_ = inv.Create(ctx, "sku-1", 10)
	_, _ = inv.Deduct(ctx, stock.Order{ID: "order-1", Buyer: "alice", Items: []stock.Item{{SKU: "sku-1", Qty: 4}}})

	// Persist the journal, e.g. into a database; stop when caught up here.
	ctx, stop := context.WithCancel(ctx)
	_ = inv.Consume(ctx, stock.Consumer{Group: "warehouse-db", Name: "worker-1", SKUs: []string{"sku-1"}},
		func(_ context.Context, entries []stock.Entry) error {
			for _, e := range entries {
				fmt.Println(e.Kind, e.Op, e.Delta.Available, e.After.Available)
			}
			stop()
			return nil
		})
	// Output:
	// create  10 10
	// deduct order-1 -4 6
}

func ExampleInventory_Reserve() {
	ctx := context.Background()
	inv, stop := exampleInventory()
	defer stop()
	_ = inv.Create(ctx, "sku-1", 10)

	// Hold 3 units while the buyer pays; sell 2 of them, 1 goes back.
	o := stock.Order{ID: "checkout-9", Buyer: "alice", Items: []stock.Item{{SKU: "sku-1", Qty: 3}}}
	if _, err := inv.Reserve(ctx, o, 15*time.Minute); err != nil {
		fmt.Println(err)
		return
	}
	lv, _ := inv.Level(ctx, "sku-1")
	fmt.Printf("%+v\n", lv)
	res, err := inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "sku-1", Qty: 2}})
	fmt.Printf("%+v %v\n", res.Levels["sku-1"], err)

	// A cancel that overtakes its reserve wins: the late reserve is refused.
	late := stock.Order{ID: "checkout-10", Buyer: "bob", Items: []stock.Item{{SKU: "sku-1", Qty: 1}}}
	_, _ = inv.Cancel(ctx, late)
	_, err = inv.Reserve(ctx, late, 15*time.Minute)
	fmt.Println(errors.Is(err, stock.ErrCancelled))
	// Output:
	// {Available:7 Reserved:3 Sold:0 Refunded:0}
	// {Available:8 Reserved:0 Sold:2 Refunded:0} <nil>
	// true
}

// exampleInventory starts a throwaway redis-server and a Inventory on it, as Example
// does; stop closes both.
func exampleInventory() (inv *stock.Inventory, stop func()) {
	srv, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		panic(err)
	}
	inv, err = stock.New(srv.Client())
	if err != nil {
		srv.Close()
		panic(err)
	}
	return inv, func() { inv.Close(); srv.Close() }
}
