package stock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// opOfBucket returns an operation ID whose bucket is k of b.
func opOfBucket(prefix string, k, b int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); stock.HomeForTest(id, b) == k {
			return id
		}
	}
}

// A decided operation answers its replay whatever fence the replay
// carries: the stored decision comes before the fence is judged, so a lease
// that applied an operation and lost the reply learns it was applied even
// after its successor wrote.
func TestFence_replayAnswersBeforeFence(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "shop/a", 10))
	f5 := stock.WithFence(lock.Fence{Name: "seller", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "seller", Token: 6})

	_, err := inv.Deduct(ctx, order("d1", "u", "shop/a", 1), f5)
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "r1", "shop/a", 1, f5)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("h1", "u", "shop/a", 1), time.Minute, f5)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("h2", "u", "shop/a", 1), time.Minute, f5)
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("h1", "u", "shop/a", 1), f5)
	require.NoError(t, err)
	_, err = inv.Cancel(ctx, order("h2", "u", "shop/a", 1), f5)
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("d1", "u", "shop/a", 1), f5)
	require.NoError(t, err)

	// The successor writes.
	_, err = inv.Restock(ctx, "r2", "shop/a", 1, f6)
	require.NoError(t, err)

	for name, call := range map[string]func() (stock.Result, error){
		"deduct":  func() (stock.Result, error) { return inv.Deduct(ctx, order("d1", "u", "shop/a", 1), f5) },
		"restock": func() (stock.Result, error) { return inv.Restock(ctx, "r1", "shop/a", 1, f5) },
		"reserve": func() (stock.Result, error) {
			return inv.Reserve(ctx, order("h1", "u", "shop/a", 1), time.Minute, f5)
		},
		"confirm": func() (stock.Result, error) { return inv.Confirm(ctx, order("h1", "u", "shop/a", 1), f5) },
		"cancel":  func() (stock.Result, error) { return inv.Cancel(ctx, order("h2", "u", "shop/a", 1), f5) },
		"refund":  func() (stock.Result, error) { return inv.Refund(ctx, order("d1", "u", "shop/a", 1), f5) },
	} {
		res, err := call()
		require.NoError(t, err, name)
		require.True(t, res.Replayed, name)
	}
	// New operations with the old token are refused, and change nothing.
	before := level(t, inv, "shop/a")
	_, err = inv.Deduct(ctx, order("d2", "u", "shop/a", 1), f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = inv.Cancel(ctx, order("h3", "u", "shop/a", 1), f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = inv.Restock(ctx, "r3", "shop/a", 1, f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	require.Equal(t, before, level(t, inv, "shop/a"))
	// The refused Cancel left no tombstone: the order can still be reserved.
	_, err = inv.Reserve(ctx, order("h3", "u", "shop/a", 1), time.Minute, f6)
	require.NoError(t, err)
	audited(t, inv, "shop/a")
}

// On a SKU split into buckets, a token accepted through any bucket makes
// lower tokens stale through every bucket.
func TestFence_bucketsShareOneFence(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const b = 4
	require.NoError(t, inv.Create(ctx, "shop/hot", 40, stock.WithBuckets(b)))
	f5 := stock.WithFence(lock.Fence{Name: "ops", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "ops", Token: 6})

	_, err := inv.Restock(ctx, opOfBucket("r", 0, b), "shop/hot", 1, f6)
	require.NoError(t, err)
	before := level(t, inv, "shop/hot")
	for k := range b {
		_, err = inv.WriteOff(ctx, opOfBucket("w", k, b), "shop/hot", 1, f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "write-off through bucket %d", k)
		_, err = inv.Deduct(ctx, order(fmt.Sprintf("o-%d", k), buyerOfBucket(k, b), "shop/hot", 1), f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "order through bucket %d", k)
		_, err = inv.Reserve(ctx, order(fmt.Sprintf("h-%d", k), buyerOfBucket(k, b), "shop/hot", 1), time.Minute, f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "reservation through bucket %d", k)
	}
	require.Equal(t, before, level(t, inv, "shop/hot"))

	// Another process, which learns the bucket count on its first call.
	other := mustNew(t, shared.Client(), stock.WithKeyPrefix(prefixOf(t, inv)), stock.WithReclaimInterval(0))
	defer other.Close()
	_, err = other.Deduct(ctx, order("late", buyerOfBucket(3, b), "shop/hot", 1), f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = other.Deduct(ctx, order("new", buyerOfBucket(2, b), "shop/hot", 1), f6)
	require.NoError(t, err)

	// A fresh process whose first fenced call lands in bucket 0, and a
	// batch: token 7 accepted through bucket 0 makes 6 stale everywhere.
	fresh := mustNew(t, shared.Client(), stock.WithKeyPrefix(prefixOf(t, inv)), stock.WithReclaimInterval(0))
	defer fresh.Close()
	f7 := stock.WithFence(lock.Fence{Name: "ops", Token: 7})
	_, err = fresh.Restock(ctx, opOfBucket("r7", 0, b), "shop/hot", 1, f7)
	require.NoError(t, err)
	before = level(t, inv, "shop/hot")
	for k := range b {
		_, err = inv.WriteOff(ctx, opOfBucket("w6", k, b), "shop/hot", 1, f6)
		require.ErrorIs(t, err, stock.ErrStaleFence, "write-off through bucket %d", k)
		rs := inv.DeductBatch(ctx, []stock.Order{order(fmt.Sprintf("batch-%d", k), buyerOfBucket(k, b), "shop/hot", 1)}, f6)
		require.ErrorIs(t, rs[0].Err, stock.ErrStaleFence, "batch order through bucket %d", k)
	}
	require.Equal(t, before, level(t, inv, "shop/hot"))
	audited(t, inv, "shop/hot")
}

// prefixes of the inventories newInventory made, for a second Inventory
// on the same keys.
var prefixOfInv sync.Map

func prefixOf(t *testing.T, inv *stock.Inventory) string {
	t.Helper()
	p, ok := prefixOfInv.Load(inv)
	require.True(t, ok)
	return p.(string)
}

// More than 64 expired holds wait (the reclaimer is off): a buyer whose own
// hold expired is not refused for the limit, and nothing is stored on the
// partial sweep.
func TestBuyerLimit_partialSweepStoresNoRefusal(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	for _, sku := range []string{"d", "r"} {
		require.NoError(t, inv.Create(ctx, sku, 1000, stock.WithBuyerLimit(1)))
	}
	var last stock.Result
	for i := range 70 {
		for _, sku := range []string{"d", "r"} {
			res, err := inv.Reserve(ctx, order(fmt.Sprintf("h-%s-%d", sku, i), fmt.Sprintf("u-%d", i), sku, 1), time.Second)
			require.NoError(t, err)
			last = res
		}
	}
	waitPast(t, rdb, last.Deadline)
	_, err := inv.Deduct(ctx, order("d-69", "u-69", "d", 1))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("r-69", "u-69", "r", 1), time.Minute)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 999, Sold: 1}, level(t, inv, "d"))
	require.Equal(t, stock.Levels{Available: 999, Reserved: 1}, level(t, inv, "r"))
	audited(t, inv, "d", "r")
}

// On a SKU split into buckets, one order ID is one order: another buyer's
// call with it conflicts, whichever buckets the two buyers' homes are.
func TestBuckets_orderIDWithAnotherBuyerConflicts(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const b = 4
	require.NoError(t, inv.Create(ctx, "g/hot", 40, stock.WithBuckets(b)))
	for _, pair := range [][2]int{{1, 2}, {0, 3}, {2, 0}} {
		id := fmt.Sprintf("o-%d-%d", pair[0], pair[1])
		_, err := inv.Deduct(ctx, order(id, buyerOfBucket(pair[0], b), "g/hot", 1))
		require.NoError(t, err)
		_, err = inv.Deduct(ctx, order(id, buyerOfBucket(pair[1], b), "g/hot", 1))
		require.ErrorIs(t, err, stock.ErrConflict, "%s", id)
		_, err = inv.Reserve(ctx, order(id, buyerOfBucket(pair[1], b), "g/hot", 1), time.Minute)
		require.ErrorIs(t, err, stock.ErrConflict, "%s", id)
		_, err = inv.Cancel(ctx, order(id, buyerOfBucket(pair[1], b), "g/hot", 1))
		require.ErrorIs(t, err, stock.ErrConflict, "%s", id)
		_, err = inv.Refund(ctx, order(id, buyerOfBucket(pair[1], b), "g/hot", 1))
		require.ErrorIs(t, err, stock.ErrConflict, "%s", id)
	}
	// The same through DeductBatch.
	_, err := inv.Deduct(ctx, order("b-1", buyerOfBucket(1, b), "g/hot", 1))
	require.NoError(t, err)
	rs := inv.DeductBatch(ctx, []stock.Order{order("b-1", buyerOfBucket(2, b), "g/hot", 1),
		order("b-1", buyerOfBucket(0, b), "g/hot", 1)})
	require.ErrorIs(t, rs[0].Err, stock.ErrConflict)
	require.ErrorIs(t, rs[1].Err, stock.ErrConflict)
	// A reservation, and the same ID's Deduct by another buyer.
	_, err = inv.Reserve(ctx, order("r-1", buyerOfBucket(1, b), "g/hot", 1), time.Minute)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("r-1", buyerOfBucket(1, b), "g/hot", 1))
	require.ErrorIs(t, err, stock.ErrConflict)
	// A Cancel first: its tombstone refuses the late Reserve, and another
	// buyer's Reserve conflicts.
	_, err = inv.Cancel(ctx, order("c-1", buyerOfBucket(3, b), "g/hot", 1))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("c-1", buyerOfBucket(3, b), "g/hot", 1), time.Minute)
	require.ErrorIs(t, err, stock.ErrCancelled)
	_, err = inv.Reserve(ctx, order("c-1", buyerOfBucket(1, b), "g/hot", 1), time.Minute)
	require.ErrorIs(t, err, stock.ErrConflict)

	require.Equal(t, stock.Levels{Available: 35, Reserved: 1, Sold: 4}, level(t, inv, "g/hot"))
	audited(t, inv, "g/hot")
}

// 2 buckets of 1 unit; a hold in bucket 1 expires; bucket 0 sells its unit,
// then the unit of the expired hold.
func TestBuckets_expiredHoldInAnotherBucketIsFound(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "x", 2, stock.WithBuckets(2)))
	res, err := inv.Reserve(ctx, order("h", buyerOfBucket(1, 2), "x", 1), time.Second)
	require.NoError(t, err)
	waitPast(t, rdb, res.Deadline)
	_, err = inv.Deduct(ctx, order("o1", buyerOfBucket(0, 2), "x", 1))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", buyerOfBucket(0, 2), "x", 1))
	require.NoError(t, err, "sold out while the expired hold's unit was free")
	require.Equal(t, stock.Levels{Sold: 2}, level(t, inv, "x"))
	audited(t, inv, "x")
}

// 3 buckets; a crashed caller left 4 units in flight from bucket 1 toward
// bucket 2; a bucket-0 buyer finds them.
func TestBuckets_transferInFlightToThirdBucketIsFound(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const b = 3
	require.NoError(t, inv.Create(ctx, "y", 12, stock.WithBuckets(b)))
	_, err := inv.WriteOff(ctx, opOfBucket("w", 0, b), "y", 4)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, opOfBucket("w", 2, b), "y", 4)
	require.NoError(t, err)
	n, err := inv.TransferOutForTest(ctx, "y", 1, 2, 4)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	for i := range 4 {
		_, err = inv.Deduct(ctx, order(fmt.Sprintf("o-%d", i), buyerOfBucket(0, b), "y", 1))
		if i == 0 {
			require.NoError(t, err, "sold out with 4 units in flight")
		}
	}
	rep, err := inv.Audit(ctx, "y")
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	require.Zero(t, rep.InFlight)
}

// A bucket filled up to its share of 2^53-1 (2^52 for bucket 0 of 2) sells
// it all, and later refills go on.
func TestBuckets_transferNear2p53StrandsNothing(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const maxUnits = 1 << 52 // bucket 0's share
	require.NoError(t, inv.Create(ctx, "z", 2, stock.WithBuckets(2)))
	b0, b1 := buyerOfBucket(0, 2), buyerOfBucket(1, 2)
	_, err := inv.Restock(ctx, opOfBucket("r", 0, 2), "z", maxUnits-1)
	require.NoError(t, err)
	_, err = inv.Restock(ctx, opOfBucket("r", 1, 2), "z", 5)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("big", b0, "z", maxUnits-1)) // bucket 0: one unit left
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o1", b0, "z", 1))
	require.NoError(t, err)
	for i := range 5 {
		_, err = inv.Deduct(ctx, order(fmt.Sprintf("p-%d", i), b1, "z", 1))
		require.NoError(t, err)
	}
	rep, err := inv.Audit(ctx, "z")
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	require.Zero(t, rep.InFlight)
	require.Equal(t, stock.Levels{Available: 1, Sold: maxUnits + 5}, rep.Levels)
}

// Consume started before a SKU split into buckets is created delivers the
// journals of every bucket.
func TestConsume_startedBeforeBucketedCreate(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const b = 4
	var mu sync.Mutex
	got := map[string]int{} // op -> entries
	done := make(chan error, 1)
	go func() {
		done <- inv.Consume(ctx, stock.Consumer{Group: "g", Name: "c", SKUs: []string{"late"}, Poll: time.Millisecond},
			func(_ context.Context, es []stock.Entry) error {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range es {
					got[e.Op]++
				}
				return nil
			})
	}()
	// Consume has created its group on bucket 0's journal before Create.
	waitFor(t, func() bool { return len(keysUnder(t, shared.Client(), prefixOf(t, inv))) > 0 })
	require.NoError(t, inv.Create(ctx, "late", 120, stock.WithBuckets(b)))
	for i := range 12 {
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("o-%d", i), fmt.Sprintf("u-%d", i), "late", 1))
		require.NoError(t, err)
	}
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for i := range 12 {
			n += got[fmt.Sprintf("o-%d", i)]
		}
		return n >= 12
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// A Reserve re-sent after its window, its old hold never reclaimed (more
// than one sweep's worth of expired holds came before it), does not count
// its units twice; once every hold expired and was reclaimed, nothing stays
// reserved. The marker's expiry at the end of the window (window + hold TTL,
// a minute at least) is stood in for by deleting it.
func TestReserve_resentAfterWindowCountsOnce(t *testing.T) {
	inv, rdb, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "r", 100))
	for i := range 65 {
		_, err := inv.Reserve(ctx, order(fmt.Sprintf("e-%d", i), fmt.Sprintf("u-%d", i), "r", 1), time.Second)
		require.NoError(t, err)
	}
	o := order("h", "u", "r", 3)
	res, err := inv.Reserve(ctx, o, time.Second)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, opKeyOf(t, inv, "r", "h")).Err())
	waitPast(t, rdb, res.Deadline)
	res, err = inv.Reserve(ctx, o, time.Second)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 97, Reserved: 3}, level(t, inv, "r"))
	audited(t, inv, "r")
	waitPast(t, rdb, res.Deadline)
	for {
		r, err := inv.Reclaim(ctx, "r")
		require.NoError(t, err)
		if r.Remaining == 0 {
			break
		}
	}
	require.Equal(t, stock.Levels{Available: 100}, level(t, inv, "r"))
	audited(t, inv, "r")

	// A hold still running whose marker is gone: the Reserve is refused as a
	// conflict, stored nowhere, and changes no level.
	res, err = inv.Reserve(ctx, order("k", "u", "r", 2), time.Minute)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, opKeyOf(t, inv, "r", "k")).Err())
	_, err = inv.Reserve(ctx, order("k", "u", "r", 2), time.Minute)
	require.ErrorIs(t, err, stock.ErrConflict)
	require.Equal(t, stock.Levels{Available: 98, Reserved: 2}, level(t, inv, "r"))
	require.Zero(t, rdb.Exists(ctx, opKeyOf(t, inv, "r", "k")).Val())
	audited(t, inv, "r")
}

// opKeyOf is the key of operation id's marker for a SKU without buckets.
func opKeyOf(t *testing.T, inv *stock.Inventory, sku, id string) string {
	t.Helper()
	return prefixOf(t, inv) + ":stock:v1:{" + sku + "}:op:" + id
}

// Checkpoint does not launder drift: it refuses, and Audit keeps reporting.
func TestCheckpoint_refusesOverDrift(t *testing.T) {
	inv, rdb, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "c", 10))
	for i := range 2 {
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("o-%d", i), "u", "c", 2))
		require.NoError(t, err)
	}
	key := prefixOf(t, inv) + ":stock:v1:{c}:sku:c"
	require.NoError(t, rdb.HSet(ctx, key, "sold", "2", "available", "8").Err())
	rep, err := inv.Audit(ctx, "c")
	require.NoError(t, err)
	require.False(t, rep.OK())
	_, err = inv.Checkpoint(ctx, "c")
	require.ErrorIs(t, err, stock.ErrDrift)
	rep, err = inv.Audit(ctx, "c")
	require.NoError(t, err)
	require.False(t, rep.OK(), "drift laundered by a checkpoint")
}

// On a SKU split into buckets, an order ID and a restock or write-off ID
// share one scope per slot group, as they do without buckets.
func TestBuckets_adjustIDSharesTheOrderScope(t *testing.T) {
	inv, _, _ := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const b = 4
	require.NoError(t, inv.Create(ctx, "g/a", 40, stock.WithBuckets(b)))
	require.NoError(t, inv.Create(ctx, "g/c", 40, stock.WithBuckets(2)))
	id := opOfBucket("x", 3, b)
	_, err := inv.Deduct(ctx, order(id, buyerOfBucket(1, b), "g/a", 1))
	require.NoError(t, err)
	_, err = inv.Restock(ctx, id, "g/a", 1)
	require.ErrorIs(t, err, stock.ErrConflict)
	_, err = inv.WriteOff(ctx, id, "g/c", 1)
	require.ErrorIs(t, err, stock.ErrConflict)
	id2 := opOfBucket("y", 2, b)
	_, err = inv.Restock(ctx, id2, "g/a", 5)
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order(id2, buyerOfBucket(1, b), "g/a", 1))
	require.ErrorIs(t, err, stock.ErrConflict)
	_, err = inv.Deduct(ctx, order(id2, buyerOfBucket(0, b), "g/a", 1))
	require.ErrorIs(t, err, stock.ErrConflict)
	res, err := inv.Restock(ctx, id2, "g/a", 5)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 44, Sold: 1}, level(t, inv, "g/a"))
	require.Equal(t, stock.Levels{Available: 40}, level(t, inv, "g/c"))
	audited(t, inv, "g/a", "g/c")
}

// An order applied on the first attempt whose reply was lost while the
// lock's successor wrote with a higher token: the module's own retry
// answers the stored decision, not ErrStaleFence.
func TestFence_lostReplyThenSuccessorWrites(t *testing.T) {
	_, direct, prefix := newInventory(t)
	px := redistest.NewProxy(t, shared.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithKeyPrefix(prefix))
	defer inv.Close()
	successor := mustNew(t, direct, stock.WithKeyPrefix(prefix))
	defer successor.Close()
	require.NoError(t, inv.Create(ctx, "f", 10))
	f5 := stock.WithFence(lock.Fence{Name: "seller", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "seller", Token: 6})
	// The fenced script is loaded, so the lost reply is the order's own.
	_, err := inv.Deduct(ctx, order("o0", "u", "f", 1), f5)
	require.NoError(t, err)

	var res stock.Result
	err = redistest.LostReply(t, px, func() error {
		var err error
		res, err = inv.Deduct(ctx, order("o1", "u", "f", 1), f5)
		return err
	}, func() {
		_, err := successor.Restock(ctx, "r1", "f", 1, f6)
		require.NoError(t, err)
	})
	require.NoError(t, err, "an applied order reported as not applied")
	require.False(t, res.Replayed)
	require.Equal(t, stock.Levels{Available: 9, Sold: 2}, level(t, successor, "f"))
}
