package stock_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	inv := mustNew(t, rdb)
	defer inv.Close()
	groups := []string{"rs1", "rs2"}
	const initial = 100000
	for _, g := range groups {
		require.NoError(t, inv.Create(ctx, g+"/sku", initial))
	}
	var tags []string
	for _, g := range groups {
		tags = append(tags, "{"+g+"}")
	}
	stop := c.Reshard(ctx, tags, redistest.MoveOptions{Batch: 10, Pause: 20 * time.Millisecond})
	const workers, orders = 4, 60
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sold = map[string]int64{}
	)
	for w := range workers {
		wg.Go(func() {
			for i := range orders {
				g := groups[(w+i)%len(groups)]
				o := stock.Order{ID: fmt.Sprintf("o-%d-%d", w, i), Buyer: fmt.Sprintf("b%d", w),
					Items: []stock.Item{{SKU: g + "/sku", Qty: 1}}}
				_, err := inv.Deduct(ctx, o)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", o.ID, err))
				} else {
					sold[g]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := stop()
	require.NoError(t, st.Err)
	t.Logf("%d orders while %d slot moves migrated %d keys; %d errors", workers*orders, st.Moves, st.Keys, len(errs))
	require.Positive(t, st.Moves)
	require.Empty(t, errs, "errors returned to the caller")
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
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithReplicaAck(1, time.Second))
	defer inv.Close()
	const sku, initial = "fo/sku", 1_000_000
	require.NoError(t, inv.Create(ctx, sku, initial))

	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": stock.ErrUnknownOutcome, "replica ack not reached": stock.ErrReplicaAck}}
	runCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; runCtx.Err() == nil; i++ {
				o := stock.Order{ID: fmt.Sprintf("f-%d-%d", w, i), Buyer: fmt.Sprintf("b%d", w),
					Items: []stock.Item{{SKU: sku, Qty: 1}}}
				if ok, err := answers.Call(ctx, func(ctx context.Context) error {
					_, err := inv.Deduct(ctx, o)
					return err
				}); !ok {
					t.Errorf("order %s never answered: %v", o.ID, err)
					return
				}
			}
		})
	}
	faults, err := c.FaultRounds(ctx, chaosScale(), 300*time.Millisecond, "{fo}")
	stopLoad()
	wg.Wait()
	require.NoError(t, err)
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
