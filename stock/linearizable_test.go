package stock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

type counterOp struct {
	kind string // "deduct", "restock", "level"
	qty  int64
}

type counterOut struct {
	ok    bool  // deduct: sold; restock: always true
	level int64 // level: available
}

// counterModel is a stock counter with a floor of zero: a deduction
// succeeds exactly when enough units are available.
func counterModel(initial int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return initial },
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(int64), input.(counterOp), output.(counterOut)
			switch in.kind {
			case "deduct":
				if st >= in.qty {
					return out.ok, st - in.qty
				}
				return !out.ok, st
			case "restock":
				return out.ok, st + in.qty
			default:
				return out.level == st, st
			}
		},
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%v -> %v", input, output)
		},
	}
}

// Deduct, Restock and Level histories from concurrent clients are
// linearizable against a counter that never goes below zero.
func TestInventory_linearizableConcurrentSafe(t *testing.T) {
	inv, _, _ := newInventory(t)
	const initial, clients, opsPerClient = 20, 8, 1000
	require.NoError(t, inv.Create(t.Context(), "sku", initial))
	history := counterHistory(t, inv, "sku", clients, opsPerClient, 1)
	require.Len(t, history, clients*opsPerClient)
	res := porcupine.CheckOperationsTimeout(counterModel(initial), history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history is not linearizable (or the check timed out)")
}

// counterHistory runs clients goroutines that each make ops random calls of
// Deduct, Restock and Level on sku, and returns their history for
// counterModel. A call that fails (other than ErrSoldOut) fails the test
// and ends its client.
func counterHistory(t *testing.T, inv *stock.Inventory, sku string, clients, ops int, seed uint64) []porcupine.Operation {
	ctx := t.Context()
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), seed))
			for i := range ops {
				id := fmt.Sprintf("c%d-%d", c, i)
				in := counterOp{qty: rng.Int64N(3) + 1}
				var out counterOut
				var err error
				call := time.Since(start).Nanoseconds()
				switch p := rng.IntN(4); {
				case p < 2:
					in.kind = "deduct"
					_, err = inv.Deduct(ctx, order(id, "u", sku, int(in.qty)))
					out.ok = err == nil
					if errors.Is(err, stock.ErrSoldOut) {
						err = nil
					}
				case p == 2:
					in.kind = "restock"
					_, err = inv.Restock(ctx, id, sku, in.qty)
					out.ok = err == nil
				default:
					in.kind, in.qty = "level", 0
					var lv stock.Levels
					lv, err = inv.Level(ctx, sku)
					out.level = lv.Available
				}
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					t.Errorf("%s %s: %v", in.kind, id, err)
					return
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}
