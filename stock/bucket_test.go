package stock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// allEntries reads every bucket's journal of sku through Consume.
func allEntries(t *testing.T, inv *stock.Inventory, sku string, want int) []stock.Entry {
	t.Helper()
	return consumeN(t, inv, stock.Consumer{Group: "audit", Name: "t", SKUs: []string{sku}, Batch: 1000}, want)
}

// buyerOfBucket returns a buyer ID whose home is bucket k of b.
func buyerOfBucket(k, b int) string {
	for i := 0; ; i++ {
		if buyer := fmt.Sprintf("b-%d", i); stock.HomeForTest(buyer, b) == k {
			return buyer
		}
	}
}

// verifyBuckets checks a sale on a SKU split into buckets: everything sold
// (demand exceeds supply, so refills must drain every bucket), no order
// twice, the limit held, the books balance.
func verifyBuckets(t *testing.T, inv *stock.Inventory, s *sale, sku string, supply, limit int64) {
	t.Helper()
	require.Empty(t, s.otherErrs)
	require.Zero(t, s.firstReplayed)
	require.Equal(t, supply, sum(s.sold), "sold out while a bucket still had units")
	require.Equal(t, stock.Levels{Sold: supply}, level(t, inv, sku))
	for buyer, n := range s.perBuyer {
		require.LessOrEqual(t, n, limit, buyer)
	}
	rep, err := inv.Audit(t.Context(), sku)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Zero(t, rep.InFlight)
	require.Equal(t, supply, rep.Supply)

	var deducts int
	for _, e := range allEntries(t, inv, sku, rep.Entries) {
		if e.Kind == stock.KindDeduct {
			deducts++
			require.Contains(t, s.sold, e.Op)
		}
	}
	require.Equal(t, len(s.sold), deducts, "one journal entry per successful order")
}

func TestInventory_buckets_flashSaleConcurrentSafe(t *testing.T) {
	creator, rdb, prefix := newInventory(t)
	require.NoError(t, creator.Create(t.Context(), "hot", 100, stock.WithBuyerLimit(2), stock.WithBuckets(4)))
	// A process that has never seen the SKU learns its bucket count from the
	// scripts' refusal of a wrongly routed call.
	inv := mustNew(t, rdb, stock.WithKeyPrefix(prefix))
	defer inv.Close()
	s := runSale(t, inv, "hot", 2_000, 32)
	verifyBuckets(t, inv, s, "hot", 100, 2)
	keys := keysUnder(t, rdb, prefix)
	for k := 1; k < 4; k++ {
		require.Contains(t, keys, fmt.Sprintf("%s:stock:v1:{hot#%d}:sku:hot", prefix, k))
	}
}

func TestInventory_buckets_cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.PoolSize = 16 })
	inv := mustNew(t, rdb)
	defer inv.Close()
	require.NoError(t, inv.Create(t.Context(), "shop/hot", 60, stock.WithBuyerLimit(2), stock.WithBuckets(6)))
	s := runSale(t, inv, "shop/hot", 600, 16)
	verifyBuckets(t, inv, s, "shop/hot", 60, 2)
}

// A refill interrupted between taking units out of one bucket and putting
// them into another leaves them in flight: Audit counts them, and the next
// refill finishes the transfer before the SKU can be called sold out.
func TestInventory_buckets_transferInFlight(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 8, stock.WithBuckets(2)))
	// Each bucket has 4. Crash a transfer of bucket 1's 4 units to bucket 0.
	x, err := inv.TransferOutForTest(ctx, "sku", 1, 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(4), x)
	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Equal(t, int64(4), rep.InFlight)
	require.Equal(t, stock.Levels{Available: 4}, level(t, inv, "sku"))

	// A buyer of bucket 1 needs 5: bucket 1 is empty, bucket 0 has 4 and the
	// 4 in flight belong to bucket 0 once finished.
	buyer := buyerOfBucket(1, 2)
	res, err := inv.Deduct(ctx, order("o1", buyer, "sku", 5))
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Levels["sku"].Sold)
	rep, err = inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Zero(t, rep.InFlight)
	require.Equal(t, stock.Levels{Available: 3, Sold: 5}, rep.Levels)

	_, err = inv.Deduct(ctx, order("o2", buyer, "sku", 4))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Deduct(ctx, order("o3", buyer, "sku", 3))
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Sold: 8}, level(t, inv, "sku"))
	for _, k := range []string{prefix + ":stock:v1:{sku#1}:transfers:sku", prefix + ":stock:v1:{sku}:transfers:sku"} {
		fields, err := rdb.HKeys(ctx, k).Result()
		require.NoError(t, err)
		for _, f := range fields {
			require.Regexp(t, `^next:`, f, "finished transfers leave no out-record")
		}
	}
}

// A transfer credited but not yet cleaned up (a crash between its steps) is
// finished without a second credit.
func TestInventory_buckets_transferCreditedOnce(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 8, stock.WithBuckets(2)))
	x, err := inv.TransferOutForTest(ctx, "sku", 1, 0, 4)
	require.NoError(t, err)
	require.Equal(t, int64(4), x)
	require.NoError(t, inv.TransferInOnlyForTest(ctx, "sku", 1, 0, 4))
	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Zero(t, rep.InFlight, "credited, so no longer in flight")

	// A buyer of the empty bucket 1 triggers a refill, which finishes the
	// old transfer first: the receiver's record of the transfers it applied
	// stops a second credit.
	buyer := buyerOfBucket(1, 2)
	_, err = inv.Deduct(ctx, order("o1", buyer, "sku", 8))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", buyer, "sku", 1))
	require.ErrorIs(t, err, stock.ErrSoldOut)
	require.Equal(t, stock.Levels{Sold: 8}, level(t, inv, "sku"))
	audited(t, inv, "sku")
}

func TestInventory_buckets_lifecycle(t *testing.T) {
	inv, rdb, prefix := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/sku", 30, stock.WithBuyerLimit(3), stock.WithBuckets(3)))
	require.NoError(t, inv.Create(ctx, "g/other", 30))
	require.NoError(t, inv.Create(ctx, "g/sku", 30, stock.WithBuyerLimit(3), stock.WithBuckets(3)))
	var ce *stock.ConflictError
	require.ErrorAs(t, inv.Create(ctx, "g/sku", 30, stock.WithBuyerLimit(3), stock.WithBuckets(2)), &ce)
	require.Equal(t, "buckets", ce.Field)

	_, err := inv.Deduct(ctx, order("multi", "u", "g/sku", 1, "g/other", 1))
	require.ErrorIs(t, err, stock.ErrInvalid)

	for i := range 6 {
		_, err := inv.Restock(ctx, fmt.Sprintf("r%d", i), "g/sku", 1)
		require.NoError(t, err)
	}
	o := order("h1", "alice", "g/sku", 3)
	_, err = inv.Reserve(ctx, o, time.Minute)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "alice", "g/sku", 1))
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	_, err = inv.ConfirmPartial(ctx, o, []stock.Item{{SKU: "g/sku", Qty: 2}})
	require.NoError(t, err)
	_, err = inv.Refund(ctx, o)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 36, Sold: 2, Refunded: 2}, level(t, inv, "g/sku"))
	_, err = inv.Checkpoint(ctx, "g/sku")
	require.NoError(t, err)
	_, err = inv.Trim(ctx, "g/sku")
	require.NoError(t, err)
	audited(t, inv, "g/sku")

	// A batch from a process that does not know the bucket count yet.
	fresh := mustNew(t, rdb, stock.WithKeyPrefix(prefix))
	defer fresh.Close()
	var batch []stock.Order
	for i := range 20 {
		batch = append(batch, order(fmt.Sprintf("b%d", i), fmt.Sprintf("buyer-%d", i), "g/sku", 1))
	}
	for _, r := range fresh.DeductBatch(ctx, batch) {
		require.NoError(t, r.Err)
	}
	require.Equal(t, stock.Levels{Available: 16, Sold: 22, Refunded: 2}, level(t, inv, "g/sku"))
	audited(t, inv, "g/sku")

	require.NoError(t, inv.CloseSKU(ctx, "g/sku"))
	for i := range 5 {
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("c%d", i), fmt.Sprintf("buyer-%d", i), "g/sku", 1))
		require.ErrorIs(t, err, stock.ErrSKUClosed)
	}
}
