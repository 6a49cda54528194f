package stock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// The error contract (internal/retry's doc): a write whose reply was lost
// ends in nil or ErrUnknownOutcome whatever the client meets afterwards, and
// calling again with the same ID returns the first decision. redistest's
// Contract runs the checks (the same for every module) on these writes.

// contractWrite is one write of stock, called with an operation ID.
type contractWrite struct {
	name string
	// prepare runs before the call for each ID (the warm-up's and the one
	// under test): a reservation to confirm, an order to refund.
	prepare func(ctx context.Context, inv *stock.Inventory, sku, id string) error
	call    func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error)
	// check asserts the state after the warm-up and the call under test,
	// each applied once.
	check   func(t *testing.T, inv *stock.Inventory, sku string)
	replays bool // a repeated call reports Result.Replayed
	// skip is how many commands the call sends before its write (a read
	// of a SKU it has not seen yet): their replies pass.
	skip int
}

const contractInitial = 100

func contractOrder(id, sku string, qty int64) stock.Order {
	return stock.Order{ID: id, Buyer: "b-" + id, Items: []stock.Item{{SKU: sku, Qty: qty}}}
}

func requireLevels(t *testing.T, inv *stock.Inventory, sku string, want stock.Levels) {
	t.Helper()
	lv, err := inv.Level(context.Background(), sku)
	require.NoError(t, err)
	require.Equal(t, want, lv, "applied exactly once")
}

func levels(want stock.Levels) func(*testing.T, *stock.Inventory, string) {
	return func(t *testing.T, inv *stock.Inventory, sku string) { requireLevels(t, inv, sku, want) }
}

// fence is a lock.Fence the fenced writes carry; its token is recorded in
// the SKU's group on first use and stays current.
var fence = lock.Fence{Name: "contract", Token: 7}

func contractWrites() []contractWrite {
	none := func(context.Context, *stock.Inventory, string, string) error { return nil }
	return []contractWrite{
		{name: "Create", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return stock.Result{}, inv.Create(ctx, sku+"."+id, 7)
			},
			check: func(t *testing.T, inv *stock.Inventory, sku string) {
				requireLevels(t, inv, sku+".x1", stock.Levels{Available: 7})
			}, skip: 1},
		{name: "Restock", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Restock(ctx, id, sku, 5)
			},
			check: levels(stock.Levels{Available: contractInitial + 10}), replays: true},
		{name: "WriteOff", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.WriteOff(ctx, id, sku, 3)
			},
			check: levels(stock.Levels{Available: contractInitial - 6}), replays: true},
		{name: "Restock/fenced", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Restock(ctx, id, sku, 5, stock.WithFence(fence))
			},
			check: levels(stock.Levels{Available: contractInitial + 10}), replays: true},
		{name: "Deduct", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Deduct(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "Deduct/fenced", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Deduct(ctx, contractOrder(id, sku, 2), stock.WithFence(fence))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "DeductBatch", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				r := inv.DeductBatch(ctx, []stock.Order{contractOrder(id, sku, 2)})
				return r[0].Result, r[0].Err
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "Reserve", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Reserved: 4}), replays: true},
		{name: "Confirm",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Confirm(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "ConfirmPartial",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.ConfirmPartial(ctx, contractOrder(id, sku, 2), []stock.Item{{SKU: sku, Qty: 1}})
			},
			check: levels(stock.Levels{Available: contractInitial - 2, Sold: 2}), replays: true},
		{name: "Cancel",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Cancel(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial})},
		{name: "Refund",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Deduct(ctx, contractOrder(id, sku, 2))
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Refund(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial, Sold: 4, Refunded: 4}), replays: true},
		{name: "CloseSKU",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				return inv.Create(ctx, sku+"."+id, 1)
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return stock.Result{}, inv.CloseSKU(ctx, sku+"."+id)
			},
			check: func(t *testing.T, inv *stock.Inventory, sku string) {
				_, err := inv.Deduct(context.Background(), contractOrder("after-close", sku+".x1", 1))
				require.ErrorIs(t, err, stock.ErrSKUClosed)
			}},
	}
}

// contract is stock's writes under redistest's error-contract checks;
// each write gets a fresh Inventory and SKU.
func contract() redistest.Contract {
	var ws []redistest.ContractWrite
	for _, w := range contractWrites() {
		ws = append(ws, redistest.ContractWrite{Name: w.name, Skip: w.skip, Replays: w.replays,
			Start: func(t *testing.T, rdb redis.UniversalClient, attempts int) redistest.ContractCall {
				ctx := t.Context()
				n := contractSKUs.Add(1)
				sku := fmt.Sprintf("c%d/sku", n)
				inv := mustNew(t, rdb, stock.WithKeyPrefix(fmt.Sprintf("contract%d", n)),
					stock.WithReclaimInterval(0), stock.WithRetry(attempts, 50*time.Millisecond, 100*time.Millisecond))
				t.Cleanup(func() { require.NoError(t, inv.Close()) })
				require.NoError(t, inv.Create(ctx, sku, contractInitial))
				for _, id := range []string{"warm", "x1"} {
					require.NoError(t, w.prepare(ctx, inv, sku, id))
				}
				return redistest.ContractCall{Tag: redistest.Tag(sku),
					Call: func(ctx context.Context, id string) (bool, error) {
						res, err := w.call(ctx, inv, sku, id)
						return res.Replayed, err
					},
					Check: func(t *testing.T) { w.check(t, inv, sku) }}
			}})
	}
	return redistest.Contract{Writes: ws, Unknown: stock.ErrUnknownOutcome,
		Core:  map[string]bool{"Deduct": true, "Restock/fenced": true},
		Moved: map[string]bool{"Create": true, "DeductBatch": true}}
}

var contractSKUs atomic.Int64

func TestContract(t *testing.T) { contract().Run(t) }

// TestChaos_contractEveryWrite: every write under every fault (about three
// minutes; make chaos).
func TestChaos_contractEveryWrite(t *testing.T) { contract().RunChaos(t) }
