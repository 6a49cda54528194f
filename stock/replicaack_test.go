package stock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// WithReplicaAck covers the writes that run outside an order too: with the
// replica cut off (frozen, its link dropped), Reclaim returning expired units,
// Checkpoint and a Trim that deletes entries each report ErrReplicaAck next
// to their result, which did happen on the primary.
func TestReplicaAck_reclaimCheckpointTrimWait(t *testing.T) {
	for _, b := range []int{1, 2} {
		t.Run(map[int]string{1: "one bucket", 2: "two buckets"}[b], func(t *testing.T) {
			p := redistest.NewPair(t, redistest.Options{})
			ctx := t.Context()
			rdb := p.Primary.Client()
			defer rdb.Close()
			inv := mustNew(t, rdb, stock.WithKeyPrefix("bg"), stock.WithReclaimInterval(0),
				stock.WithReplicaAck(1, 300*time.Millisecond))
			defer inv.Close()
			const sku = "shop/tv"
			waitFor(t, func() bool { return inv.Create(ctx, sku, 10, stock.WithBuckets(b)) == nil }) // the replica is in sync
			res, err := inv.Reserve(ctx, order("hold-1", buyerOfBucket(b-1, b), sku, 4), time.Second)
			require.NoError(t, err)
			_, err = inv.Checkpoint(ctx, sku)
			require.NoError(t, err, "acknowledged while the replica runs")
			time.Sleep(time.Until(res.Deadline) + 50*time.Millisecond) // the hold expires

			require.NoError(t, p.Replica.Pause())
			defer func() { _ = p.Replica.Resume() }()
			require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())

			rr, err := inv.Reclaim(ctx, sku)
			assert.ErrorIs(t, err, stock.ErrReplicaAck, "Reclaim returned units the replica does not have")
			require.Equal(t, 1, rr.Reclaimed, "the reclaim happened")
			require.Equal(t, stock.Levels{Available: 10}, level(t, inv, sku))

			id, err := inv.Checkpoint(ctx, sku) // over the levels the reclaim left
			assert.ErrorIs(t, err, stock.ErrReplicaAck, "Checkpoint")
			require.NotEmpty(t, id, "the checkpoint was written")

			n, err := inv.Trim(ctx, sku)
			assert.ErrorIs(t, err, stock.ErrReplicaAck, "Trim")
			require.Positive(t, n, "the trim happened")

			// Nothing left to reclaim or trim: nothing was written, nothing waited for.
			rr, err = inv.Reclaim(ctx, sku)
			require.NoError(t, err)
			require.Zero(t, rr.Reclaimed)
			n, err = inv.Trim(ctx, sku)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}
