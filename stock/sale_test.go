package stock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// sale is the record of a flash sale run by runSale.
type sale struct {
	mu        sync.Mutex
	sold      map[string]int64 // order ID -> qty of each successful order
	perBuyer  map[string]int64 // buyer -> units bought
	refused   int
	unknowns  int // ErrUnknownOutcome answers resolved by calling again
	otherErrs []error
	// firstReplayed counts first calls for an order ID that reported
	// Replayed: a module retry finding its own first attempt must not.
	firstReplayed int
}

// runSale lets buyers (concurrency at a time) each place two orders of 1-5
// units of sku. A call that ends in ErrUnknownOutcome is repeated with the
// same order until it gets a definite answer, as the docs tell callers to.
func runSale(t *testing.T, inv *stock.Inventory, sku string, buyers, concurrency int) *sale {
	t.Helper()
	s := &sale{sold: map[string]int64{}, perBuyer: map[string]int64{}}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for b := range work {
				rng := rand.New(rand.NewPCG(uint64(b), 7))
				buyer := fmt.Sprintf("buyer-%d", b)
				for k := range 2 {
					o := stock.Order{ID: fmt.Sprintf("order-%d-%d", b, k), Buyer: buyer,
						Items: []stock.Item{{SKU: sku, Qty: rng.Int64N(5) + 1}}}
					s.place(ctx, inv, o)
				}
			}
		})
	}
	for b := range buyers {
		work <- b
	}
	close(work)
	wg.Wait()
	return s
}

func (s *sale) place(ctx context.Context, inv *stock.Inventory, o stock.Order) {
	for first := true; ; first = false {
		res, err := inv.Deduct(ctx, o)
		s.mu.Lock()
		if first && res.Replayed {
			s.firstReplayed++
		}
		switch {
		case err == nil:
			s.sold[o.ID] = o.Items[0].Qty
			s.perBuyer[o.Buyer] += o.Items[0].Qty
		case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrBuyerLimit):
			s.refused++
		case errors.Is(err, stock.ErrUnknownOutcome) && ctx.Err() == nil:
			s.unknowns++
			s.mu.Unlock()
			continue
		default:
			s.otherErrs = append(s.otherErrs, err)
		}
		s.mu.Unlock()
		return
	}
}

// verify checks the sale against the SKU's levels, its journal and Audit.
func (s *sale) verify(t *testing.T, inv *stock.Inventory, sku string, supply, limit int64) {
	t.Helper()
	ctx := t.Context()
	require.Empty(t, s.otherErrs)
	require.Zero(t, s.firstReplayed, "first calls reported as replayed")
	var units int64
	for _, q := range s.sold {
		units += q
	}
	lv, err := inv.Level(ctx, sku)
	require.NoError(t, err)
	require.LessOrEqual(t, lv.Sold, supply, "oversold")
	require.Equal(t, units, lv.Sold, "units the buyers were told they bought")
	require.Equal(t, supply-units, lv.Available)
	for buyer, n := range s.perBuyer {
		require.LessOrEqual(t, n, limit, "buyer %s passed the limit", buyer)
	}
	// Exactly one journal entry per successful order, none for refusals.
	perOrder := map[string]int{}
	cursor := ""
	for {
		es, next, err := inv.Entries(ctx, sku, cursor, stock.MaxPage)
		require.NoError(t, err)
		for _, e := range es {
			if e.Kind == stock.KindDeduct {
				perOrder[e.Op]++
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, perOrder, len(s.sold))
	for id, n := range perOrder {
		require.Equal(t, 1, n, "journal entries of order %s", id)
		require.Contains(t, s.sold, id, "journal has an order no buyer was told succeeded")
	}
	rep, err := inv.Audit(ctx, sku)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
}

func TestInventory_Deduct_flashSaleConcurrentSafe(t *testing.T) {
	inv, _, _ := newInventory(t)
	require.NoError(t, inv.Create(t.Context(), "sku", 100, stock.WithBuyerLimit(2)))
	s := runSale(t, inv, "sku", 10_000, 64)
	s.verify(t, inv, "sku", 100, 2)
	require.Equal(t, int64(100), sum(s.sold), "demand far exceeds supply: everything sells")
	require.Zero(t, s.unknowns)
}

// Replies held back past the read timeout while go-redis re-sends the
// script on its own (MaxRetries 3 by default) and the module retries too:
// every command that timed out had in fact run. No order may be applied
// twice and every buyer gets a definite answer.
func TestInventory_Deduct_flashSaleHeldRepliesConcurrentSafe(t *testing.T) {
	heldRepliesSale(t, 3_000)
}

// TestChaos_flashSaleHeldReplies is the held-replies sale at full size:
// 10,000 buyers times CHAOS_SCALE.
func TestChaos_flashSaleHeldReplies(t *testing.T) {
	heldRepliesSale(t, 10_000*redistest.Chaos(t))
}

func heldRepliesSale(t *testing.T, buyers int) {
	srv := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 100 * time.Millisecond, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	inv := mustNew(t, rdb)
	t.Cleanup(func() { _ = inv.Close() })
	require.NoError(t, inv.Create(t.Context(), "sku", 100, stock.WithBuyerLimit(2)))

	done := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for {
			px.HoldReplies(250 * time.Millisecond)
			select {
			case <-done:
				px.HoldReplies(0)
				return
			case <-time.After(150 * time.Millisecond):
			}
			px.HoldReplies(0)
			select {
			case <-done:
				return
			case <-time.After(350 * time.Millisecond):
			}
		}
	})
	s := runSale(t, inv, "sku", buyers, 64)
	close(done)
	faults.Wait()
	s.verify(t, inv, "sku", 100, 2)
	require.Equal(t, int64(100), sum(s.sold))
	t.Logf("unknown outcomes resolved by calling again: %d", s.unknowns)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
