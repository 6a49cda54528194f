package stock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// TestDeduct_Cluster_underResharding: Deduct on an ordinary ClusterClient
// while the slots of the SKUs' groups are moved again and again, ten keys
// per MIGRATE with a pause between batches (a slot whose keys are split
// answers TRYAGAIN to every multi-key script, and a stale map meets MOVED
// and ASK). No error reaches the caller, and the levels count every
// confirmed order exactly once.
func TestDeduct_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c, inv := reshardedInventory(t)
	groups := []string{"rs1", "rs2"}
	const initial = 100000
	for _, g := range groups {
		require.NoError(t, inv.Create(ctx, g+"/sku", initial))
	}
	var tags []string
	for _, g := range groups {
		tags = append(tags, "{"+g+"}")
	}
	const workers, orders = 4, 60
	var (
		mu   sync.Mutex
		sold = map[string]int64{}
	)
	c.WhileResharding(t, ctx, tags, redistest.MoveOptions{Batch: 10, Pause: 20 * time.Millisecond}, workers,
		func(w int, fail func(string, ...any)) {
			for i := range orders {
				g := groups[(w+i)%len(groups)]
				o := stock.Order{ID: fmt.Sprintf("o-%d-%d", w, i), Buyer: fmt.Sprintf("b%d", w),
					Items: []stock.Item{{SKU: g + "/sku", Qty: 1}}}
				if _, err := inv.Deduct(ctx, o); err != nil {
					fail("%s: %w", o.ID, err)
					continue
				}
				mu.Lock()
				sold[g]++
				mu.Unlock()
			}
		})
	for _, g := range groups {
		lv, err := inv.Level(ctx, g+"/sku")
		require.NoError(t, err)
		require.Equal(t, sold[g], lv.Sold, g)
		require.Equal(t, initial-sold[g], lv.Available, g)
	}
}

// TestChaos_Cluster_failover: Deduct with replica acknowledgement on an
// ordinary ClusterClient while the SKUs' shards are failed over again and
// again (CLUSTER FAILOVER plain, FORCE and TAKEOVER, a master killed with
// kill -9 and its replica promoted, the slot migrated). A caller that gets
// an error calls again with the same order ID until it is answered: every
// order is answered in the end, and Sold counts each answered order once
// (no acknowledged order lost, none applied twice).
func TestChaos_Cluster_failover(t *testing.T) {
	scale := redistest.Chaos(t)
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithReplicaAck(1, time.Second))
	defer inv.Close()
	const sku, initial = "fo/sku", 1_000_000
	require.NoError(t, inv.Create(ctx, sku, initial))

	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": stock.ErrUnknownOutcome, "replica ack not reached": stock.ErrReplicaAck}}
	faults := c.WhileFailingOver(t, ctx, scale, 300*time.Millisecond, []string{"{fo}"}, 4, func(w, i int) bool {
		o := stock.Order{ID: fmt.Sprintf("f-%d-%d", w, i), Buyer: fmt.Sprintf("b%d", w),
			Items: []stock.Item{{SKU: sku, Qty: 1}}}
		ok, err := answers.Call(ctx, func(ctx context.Context) error {
			_, err := inv.Deduct(ctx, o)
			return err
		})
		if !ok {
			t.Errorf("order %s never answered: %v", o.ID, err)
		}
		return ok
	})
	lv, err := inv.Level(ctx, sku)
	require.NoError(t, err)
	answered := int64(answers.Answered())
	t.Logf("%d faults: %d orders answered, %d calls failed and were called again; first errors: %s",
		faults, answered, answers.Retried(), answers.FirstErrors())
	broken := 0
	if answered != lv.Sold || initial-answered != lv.Available {
		broken++
	}
	t.Logf("chaos table | stock Deduct | %d | %d | %d | %d", answered, faults, answers.Retried(), broken)
	require.EqualValues(t, answered, lv.Sold, "every answered order sold once")
	require.EqualValues(t, initial-answered, lv.Available)
}

// TestWritePaths_Cluster_underResharding: every other write path on an
// ordinary ClusterClient while the slots of every key involved are moved
// again and again, key by key with a pause (a split slot answers TRYAGAIN,
// a stale map meets MOVED and ASK): Reserve then Confirm or Cancel on a
// SKU with a buyer limit, Deduct and Restock on a SKU split into buckets
// (whose units move between bucket slots), and DeductBatch across both. No
// error reaches the caller, the levels count every answered operation
// exactly once, and Audit finds nothing.
func TestWritePaths_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c, inv := reshardedInventory(t)
	const plain, hot, initial, buckets = "rr/sku", "rh/sku", 100000, 4
	require.NoError(t, inv.Create(ctx, plain, initial, stock.WithBuyerLimit(1000)))
	require.NoError(t, inv.Create(ctx, hot, initial, stock.WithBuckets(buckets)))
	tags := []string{"{rr}", "{rh}"}
	for k := 1; k < buckets; k++ {
		tags = append(tags, fmt.Sprintf("{rh#%d}", k))
	}
	// Keys of an application in the same slots make each move last.
	c.Fill(t, ctx, tags, 10)
	const workers, rounds = 4, 25
	var (
		mu                                  sync.Mutex
		confirmed, hotSold, restocked, held int64
	)
	c.WhileResharding(t, ctx, tags, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond}, workers,
		func(w int, fail func(string, ...any)) {
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				buyer := fmt.Sprintf("b%d", w)
				switch i % 4 {
				case 0, 1: // reserve, then confirm (even) or cancel (odd)
					o := stock.Order{ID: "r-" + id, Buyer: buyer, Items: []stock.Item{{SKU: plain, Qty: 2}}}
					if _, err := inv.Reserve(ctx, o, time.Minute); err != nil {
						fail("reserve %s: %w", o.ID, err)
						continue
					}
					settle, what := inv.Confirm, "confirm"
					if i%4 == 1 {
						settle, what = inv.Cancel, "cancel"
					}
					if _, err := settle(ctx, o); err != nil {
						fail("%s %s: %w", what, o.ID, err)
						mu.Lock()
						held += 2
						mu.Unlock()
						continue
					}
					if what == "confirm" {
						mu.Lock()
						confirmed += 2
						mu.Unlock()
					}
				case 2: // the bucketed SKU: deduct, and now and then restock
					o := stock.Order{ID: "d-" + id, Buyer: buyer, Items: []stock.Item{{SKU: hot, Qty: 3}}}
					if _, err := inv.Deduct(ctx, o); err != nil {
						fail("deduct %s: %w", o.ID, err)
						continue
					}
					mu.Lock()
					hotSold += 3
					mu.Unlock()
					if _, err := inv.Restock(ctx, "s-"+id, hot, 5); err != nil {
						fail("restock %s: %w", id, err)
						continue
					}
					mu.Lock()
					restocked += 5
					mu.Unlock()
				case 3: // one pipeline across both SKUs
					orders := []stock.Order{
						{ID: "b1-" + id, Buyer: buyer, Items: []stock.Item{{SKU: plain, Qty: 1}}},
						{ID: "b2-" + id, Buyer: buyer, Items: []stock.Item{{SKU: hot, Qty: 1}}},
					}
					for k, r := range inv.DeductBatch(ctx, orders) {
						if r.Err != nil {
							fail("batch %s: %w", orders[k].ID, r.Err)
							continue
						}
						mu.Lock()
						if k == 0 {
							confirmed++
						} else {
							hotSold++
						}
						mu.Unlock()
					}
				}
			}
		})

	lv, err := inv.Level(ctx, plain)
	require.NoError(t, err)
	require.Equal(t, confirmed, lv.Sold, plain)
	require.Zero(t, lv.Reserved+held, plain)
	require.Equal(t, initial-confirmed, lv.Available, plain)
	lv, err = inv.Level(ctx, hot)
	require.NoError(t, err)
	require.Equal(t, hotSold, lv.Sold, hot)
	require.Equal(t, initial+restocked-hotSold, lv.Available, hot)
	for _, sku := range []string{plain, hot} {
		rep, err := inv.Audit(ctx, sku)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%s: %v", sku, rep.Problems)
	}
}

// TestLinearizable_Cluster_underResharding: Deduct, Restock and Level from
// concurrent clients on an ordinary ClusterClient while the SKU's slot is
// moved again and again, 10 keys per MIGRATE 5 ms apart: no error reaches
// a caller, and the history is linearizable against a counter that never
// goes below zero (porcupine), so no re-sent call was applied twice or
// lost. Every order
// leaves a marker in the slot, so each move takes longer than the last;
// moved key by key 10 ms apart, a move soon outlasts WithClusterBudget's
// default, and while a slot migrates a script creating a key meets
// TRYAGAIN throughout (see the README's reshard cost).
func TestLinearizable_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	// The history is the point here, not the latency: a budget beyond any
	// migration of this slot on a loaded machine (the slot moves back to
	// back, and every operation adds a marker to it), so no call gives up.
	// What the default budget absorbs is TestWritePaths_Cluster_underResharding's.
	c, inv := reshardedInventory(t, stock.WithClusterBudget(time.Minute))
	const sku, initial, clients, ops = "lz/sku", 20, 4, 100
	require.NoError(t, inv.Create(ctx, sku, initial))
	c.Fill(t, ctx, []string{"{lz}"}, 10)
	var history []porcupine.Operation
	c.WhileResharding(t, ctx, []string{"{lz}"}, redistest.MoveOptions{Batch: 10, Pause: 5 * time.Millisecond}, 1,
		func(int, func(string, ...any)) { history = counterHistory(t, inv, sku, clients, ops, 7) })
	require.Len(t, history, clients*ops)
	res := porcupine.CheckOperationsTimeout(counterModel(initial), history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history is not linearizable (or the check timed out)")
}

// reshardedInventory starts a Cluster of 3 masters and a Inventory on an ordinary
// ClusterClient: one the Cluster does not refresh after a move, so it meets
// MOVED and ASK as an application's would.
func reshardedInventory(t *testing.T, opts ...stock.Option) (*redistest.Cluster, *stock.Inventory) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	inv := mustNew(t, rdb, opts...)
	t.Cleanup(func() { inv.Close() })
	return c, inv
}
