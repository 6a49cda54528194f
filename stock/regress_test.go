package stock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	inv := stocked(t, "shop/a", 10)
	ctx := t.Context()
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
	require.ErrorIs(t, err, stock.ErrMismatch)
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

// One fence token is judged per slot group: token 6 accepted through a SKU
// of group "shop" without buckets makes token 5 stale through every bucket
// of a SKU of the same group split into buckets, for orders and restocks.
func TestFence_groupTokenStaleThroughEveryBucket(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const b = 2
	require.NoError(t, inv.Create(ctx, "shop/cold", 10))
	require.NoError(t, inv.Create(ctx, "shop/hot", 10, stock.WithBuckets(b)))
	f5 := stock.WithFence(lock.Fence{Name: "ops", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "ops", Token: 6})
	_, err := inv.Deduct(ctx, order("o-new", "alice", "shop/cold", 1), f6)
	require.NoError(t, err)
	before := level(t, inv, "shop/hot")
	for k := range b {
		buyer := buyerOfBucket(k, b)
		_, err := inv.Deduct(ctx, order("o-stale-"+buyer, buyer, "shop/hot", 1), f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "deduct through bucket %d", k)
		_, err = inv.Restock(ctx, opOfBucket("r-stale", k, b), "shop/hot", 3, f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "restock through bucket %d", k)
	}
	require.Equal(t, before, level(t, inv, "shop/hot"))
}

// The same with only SKUs split into buckets: token 6 accepted through a
// SKU of 2 buckets makes token 5 stale through buckets 2 and 3 of a SKU of
// 4 buckets, whose fence keys the first never touched.
func TestFence_groupTokenStaleThroughWiderSKU(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "shop/a", 10, stock.WithBuckets(2)))
	require.NoError(t, inv.Create(ctx, "shop/b", 40, stock.WithBuckets(4)))
	f5 := stock.WithFence(lock.Fence{Name: "ops", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "ops", Token: 6})
	_, err := inv.Restock(ctx, "r-new", "shop/a", 1, f6)
	require.NoError(t, err)
	for k := range 4 {
		buyer := buyerOfBucket(k, 4)
		_, err := inv.Deduct(ctx, order("o-stale-"+buyer, buyer, "shop/b", 1), f5)
		require.ErrorIs(t, err, stock.ErrStaleFence, "deduct through bucket %d", k)
	}
	require.Equal(t, stock.Levels{Available: 40}, level(t, inv, "shop/b"))
}

// CloseSKU is a write: with WithReplicaAck it waits for the replicas, and
// with the replica cut off (frozen, its link dropped) it reports
// ErrReplicaAck rather than nil.
func TestReplicaAck_closeSKUWaits(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	rdb := p.Primary.Client()
	defer rdb.Close()
	inv := mustNew(t, rdb, stock.WithKeyPrefix("cl"), stock.WithReclaimInterval(0),
		stock.WithReplicaAck(1, 300*time.Millisecond))
	defer inv.Close()
	const sku = "shop/tv"
	waitFor(t, func() bool { return inv.Create(ctx, sku, 10) == nil }) // acknowledged once the replica is in sync
	require.NoError(t, p.Replica.Pause())
	defer func() { _ = p.Replica.Resume() }()
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	err := inv.CloseSKU(ctx, sku)
	require.ErrorIs(t, err, stock.ErrReplicaAck)
	// The close did happen on the primary.
	_, err = inv.Deduct(ctx, order("after-close", "u", sku, 1))
	require.ErrorIs(t, err, stock.ErrSKUClosed)
}

// On a Cluster the claim of an order's ID in {g} and the order in the
// buyer's home bucket {g#k} live on different shards. With WithReplicaAck
// the claim is acknowledged like every write: with {g}'s replica cut off
// (frozen, its link dropped) the order, acknowledged in {g#k}, still
// returns ErrReplicaAck alongside its result, since a failover of {g}'s
// shard would lose the claim and let the same ID be sold again to another
// buyer in another bucket.
func TestReplicaAck_clusterClaimAcknowledged(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2, Replicas: 1})
	ctx := t.Context()
	rdb := c.Client(func(o *redis.ClusterOptions) { o.ReadTimeout = 2 * time.Second })
	inv := mustNew(t, rdb, stock.WithKeyPrefix("ack"), stock.WithReclaimInterval(0),
		stock.WithReplicaAck(1, 500*time.Millisecond))
	t.Cleanup(func() { _ = inv.Close() })
	const b, sku = 4, "g/hot"
	waitFor(t, func() bool { return inv.Create(ctx, sku, 100, stock.WithBuckets(b)) == nil }) // replicas in sync
	nodes := c.Nodes()                                                                        // masters 0, 1; node 2 replicates 0, node 3 replicates 1
	owner := func(tag string) int {
		m, err := rdb.MasterForKey(ctx, "{"+tag+"}")
		require.NoError(t, err)
		for i := range 2 {
			if nodes[i].Addr() == m.Options().Addr {
				return i
			}
		}
		t.Fatalf("no master for %s", tag)
		return -1
	}
	g, k := owner("g"), -1
	for q := 1; q < b && k < 0; q++ {
		if owner(fmt.Sprintf("g#%d", q)) != g {
			k = q
		}
	}
	if k < 0 {
		t.Skip("bucket tags do not spread over both shards")
	}
	replica := nodes[2+g]
	require.NoError(t, replica.Pause())
	defer func() { _ = replica.Resume() }()
	mc := nodes[g].Client()
	defer mc.Close()
	require.NoError(t, mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	res, err := inv.Deduct(ctx, order("order-1", buyerOfBucket(k, b), sku, 1))
	require.ErrorIs(t, err, stock.ErrReplicaAck, "the claim in {g} was not acknowledged")
	require.Equal(t, int64(1), res.Levels[sku].Sold, "the order itself happened")
}

// A Cancel that reaches a SKU before it exists leaves its tombstone in the
// group's tag {g}; once the SKU is created split into buckets, the late
// Reserve, whose buyer's home is another bucket, is still refused with
// ErrCancelled and holds nothing.
func TestBuckets_tombstoneBeforeCreateRefusesReserve(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const b, sku = 2, "g/hot"
	o := order("order-1", buyerOfBucket(1, b), sku, 1)
	_, err := inv.Cancel(ctx, o)
	require.NoError(t, err)
	require.NoError(t, inv.Create(ctx, sku, 10, stock.WithBuckets(b)))
	_, err = inv.Reserve(ctx, o, time.Minute)
	require.ErrorIs(t, err, stock.ErrCancelled)
	require.Equal(t, stock.Levels{Available: 10}, level(t, inv, sku))
}

// A refusal stored before the SKU existed (ErrSKUNotFound) stays the answer to
// the same operation once the SKU is created split into buckets, for an
// order whose buyer's home is another bucket and for restocks and
// write-offs whose ID's bucket is another one.
func TestBuckets_refusalBeforeCreateStaysRefused(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const b, sku = 2, "g/hot"
	o := order("order-1", buyerOfBucket(1, b), sku, 1)
	restock, writeoff := opOfBucket("r", 1, b), opOfBucket("w", 1, b)
	for range 2 {
		_, err := inv.Deduct(ctx, o)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
		_, err = inv.Restock(ctx, restock, sku, 5)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
		_, err = inv.WriteOff(ctx, writeoff, sku, 1)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
	}
	require.NoError(t, inv.Create(ctx, sku, 10, stock.WithBuckets(b)))
	res, err := inv.Deduct(ctx, o)
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
	require.True(t, res.Replayed)
	_, err = inv.Restock(ctx, restock, sku, 5)
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
	_, err = inv.WriteOff(ctx, writeoff, sku, 1)
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
	require.Equal(t, stock.Levels{Available: 10}, level(t, inv, sku))
}

// Consumer "a" of group "db" reads the journal and dies before
// acknowledging (its handler fails); more orders are placed; consumer "b"
// takes over. b is handed the abandoned entries (after MinIdle) before the
// newer ones: each journal in order.
func TestConsume_takeoverKeepsJournalOrder(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const sku = "j/sku"
	require.NoError(t, inv.Create(ctx, sku, 100))
	for i := range 3 {
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("early-%d", i), "u", sku, 1))
		require.NoError(t, err)
	}
	died := errors.New("consumer a died")
	err := inv.Consume(ctx, stock.Consumer{Group: "db", Name: "a", SKUs: []string{sku}, Batch: 100},
		func(context.Context, []stock.Entry) error { return died })
	require.ErrorIs(t, err, died)
	for i := range 3 {
		_, err := inv.Deduct(ctx, order(fmt.Sprintf("late-%d", i), "u", sku, 1))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var seen []stock.Entry
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = inv.Consume(cctx, stock.Consumer{Group: "db", Name: "b", SKUs: []string{sku}, Batch: 100,
		MinIdle: 300 * time.Millisecond, Poll: 20 * time.Millisecond},
		func(_ context.Context, es []stock.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, es...)
			if len(seen) >= 7 {
				cancel()
			}
			return nil
		})
	require.ErrorIs(t, err, context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	var ops []string
	for _, e := range seen {
		ops = append(ops, e.Kind+" "+e.Op)
	}
	require.Equal(t, []string{"create ", "deduct early-0", "deduct early-1", "deduct early-2",
		"deduct late-0", "deduct late-1", "deduct late-2"}, ops)
}

// A consumer waits for a SKU not created yet; the SKU is created split into
// two buckets and sells through bucket 1; a Checkpoint and a Trim run before
// the consumer's next round. The Trim keeps bucket 1's entries for the
// group, so the consumer is handed bucket 1's journal from its first entry.
func TestConsume_waitingSKUNotTrimmedBeforeFollowed(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	const b, sku = 2, "w/hot"
	var mu sync.Mutex
	var got []string
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- inv.Consume(cctx, stock.Consumer{Group: "db", Name: "c1", SKUs: []string{sku}, Poll: 2 * time.Second},
			func(_ context.Context, es []stock.Entry) error {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range es {
					got = append(got, fmt.Sprintf("bucket %d %s %s", e.Bucket, e.Kind, e.Op))
				}
				return nil
			})
	}()
	j0 := prefix + ":stock:v1:{w}:journal:" + sku
	waitFor(t, func() bool { return rdb.XInfoGroups(ctx, j0).Err() == nil }) // the consumer waits, idle

	require.NoError(t, inv.Create(ctx, sku, 10, stock.WithBuckets(b)))
	_, err := inv.Deduct(ctx, order("o1", buyerOfBucket(1, b), sku, 2))
	require.NoError(t, err)
	_, err = inv.Checkpoint(ctx, sku)
	require.NoError(t, err)
	_, err = inv.Trim(ctx, sku)
	require.NoError(t, err)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, "bucket 1 checkpoint ")
	})
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var bucket1 []string
	for _, s := range got {
		if strings.HasPrefix(s, "bucket 1 ") {
			bucket1 = append(bucket1, s)
		}
	}
	require.Equal(t, []string{"bucket 1 create ", "bucket 1 deduct o1", "bucket 1 checkpoint "}, bucket1)
}

// The claim of an order's ID in {g} outlives the order's marker in the
// buyer's bucket, also when the reply comes late: over a link whose replies
// take 600ms (the claim's lifetime starts a round trip before the
// marker's), for orders, restocks and reservations, and over one whose
// replies take 1.5s (the order decided more than the claim's slack after
// the claim was sent: the claim is lengthened again).
func TestBuckets_claimOutlivesMarker(t *testing.T) {
	for _, lat := range []time.Duration{600 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(lat.String(), func(t *testing.T) {
			s := redistest.New(t, redistest.Options{})
			ctx := t.Context()
			rdb := s.Client()
			defer rdb.Close()
			inv := mustNew(t, rdb, stock.WithKeyPrefix("ttl"), stock.WithReclaimInterval(0))
			defer inv.Close()
			const b, sku = 2, "g/hot"
			require.NoError(t, inv.Create(ctx, sku, 100, stock.WithBuckets(b)))
			px := redistest.NewProxy(t, s.Addr())
			slow := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
			defer slow.Close()
			slowInv := mustNew(t, slow, stock.WithKeyPrefix("ttl"), stock.WithReclaimInterval(0))
			defer slowInv.Close()
			_, err := slowInv.Level(ctx, sku) // connects, learns the bucket count
			require.NoError(t, err)
			ids := []string{"order-1"}
			px.SetLatency(lat)
			_, err = slowInv.Deduct(ctx, order("order-1", buyerOfBucket(1, b), sku, 1))
			require.NoError(t, err)
			if lat < time.Second {
				restock := opOfBucket("r", 1, b)
				_, err = slowInv.Restock(ctx, restock, sku, 1)
				require.NoError(t, err)
				_, err = slowInv.Reserve(ctx, order("hold-1", buyerOfBucket(1, b), sku, 1), time.Minute)
				require.NoError(t, err)
				ids = append(ids, restock, "hold-1")
			}
			px.SetLatency(0)
			for _, id := range ids {
				claim := rdb.PTTL(ctx, "ttl:stock:v1:{g}:op:"+id).Val()
				marker := rdb.PTTL(ctx, "ttl:stock:v1:{g#1}:op:"+id).Val()
				require.Positive(t, marker, id)
				require.GreaterOrEqual(t, claim, marker, "%s: the claim expires before the marker", id)
			}
		})
	}
}

// A buyer's home bucket is empty, the other bucket holds 1000 units. The
// buyer's link is slow (replies take 100ms) and rival buyers of the same
// home bucket take whatever a refill brings before the slow buyer's next
// try. The slow order is never refused as sold out (a refusal stored for
// good) while the other bucket still holds units: it keeps trying, asking
// more each time, until it buys or the units are gone.
func TestBuckets_noSoldOutWhileAnotherBucketHoldsUnits(t *testing.T) {
	inv, rdb, prefix := newInventory(t, stock.WithReclaimInterval(0))
	ctx := t.Context()
	const b, sku = 2, "g/hot"
	require.NoError(t, inv.Create(ctx, sku, 2000, stock.WithBuckets(b)))
	_, err := inv.Deduct(ctx, order("first", buyerOfBucket(0, b), sku, 1000)) // empties bucket 0
	require.NoError(t, err)

	px := redistest.NewProxy(t, shared.Addr())
	slow := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 2 * time.Second})
	defer slow.Close()
	slowInv := mustNew(t, slow, stock.WithKeyPrefix(prefix), stock.WithReclaimInterval(0))
	defer slowInv.Close()
	require.NoError(t, slow.Ping(ctx).Err())
	px.SetLatency(100 * time.Millisecond)

	bucket0 := prefix + ":stock:v1:{g}:sku:" + sku
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			a, err := rdb.HGet(context.Background(), bucket0, "available").Int64()
			if err == nil && a > 0 {
				buyer := opOfBucket(fmt.Sprintf("rival%d", i), 0, b)
				_, _ = inv.Deduct(context.Background(), order("rival-"+buyer, buyer, sku, int(a)))
			}
		}
	}()
	victim := buyerOfBucket(0, b)
	_, err = slowInv.Deduct(ctx, order("victim-order", victim, sku, 1))
	close(stop)
	wg.Wait()
	px.SetLatency(0)
	lv := level(t, inv, sku)
	if errors.Is(err, stock.ErrSoldOut) {
		require.Zero(t, lv.Available, "refused as sold out while units were left")
	} else {
		require.NoError(t, err)
	}
	audited(t, inv, sku)
}

// Restocks through several buckets never take a SKU's total past 2^53-1:
// each bucket takes units up to its own share of it.
func TestBuckets_restocksStayWithin2p53(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	const maxAmount = 1<<53 - 1
	for _, b := range []int{2, 3, 64} {
		sku := fmt.Sprintf("big/sku%d", b)
		require.NoError(t, inv.Create(ctx, sku, 0, stock.WithBuckets(b)))
		for k := range b {
			// Over the bucket's share: refused, nothing written.
			_, err := inv.Restock(ctx, opOfBucket(fmt.Sprintf("over%d", b), k, b), sku, maxAmount/int64(b)+2)
			require.ErrorIs(t, err, stock.ErrInvalid, "bucket %d of %d", k, b)
			// Up to the bucket's share: accepted.
			_, err = inv.Restock(ctx, opOfBucket(fmt.Sprintf("fill%d", b), k, b), sku, maxAmount/int64(b))
			require.NoError(t, err, "bucket %d of %d", k, b)
		}
		rep, err := inv.Audit(ctx, sku)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%+v", rep)
		require.LessOrEqual(t, rep.Supply, int64(maxAmount))
		require.LessOrEqual(t, level(t, inv, sku).Available, int64(maxAmount))
	}
}

// On a SKU split into buckets, an order decided in the slot group before the
// SKU existed (a Reserve refused as not found, a Cancel's tombstone) is
// answered from that decision by Confirm, Refund and Cancel for a buyer of
// any bucket, as on a SKU that is not split.
func TestBuckets_holdActionsAnswerADecisionStoredBeforeTheSKU(t *testing.T) {
	away := func(b int) string { // a buyer whose home bucket is not 0
		for i := 0; ; i++ {
			if u := fmt.Sprintf("u%d", i); stock.HomeForTest(u, b) != 0 {
				return u
			}
		}
	}
	t.Run("refused", func(t *testing.T) {
		inv, _, _ := newInventory(t)
		ctx := t.Context()
		o := order("o1", away(4), "g/s", 1)
		_, err := inv.Reserve(ctx, o, time.Minute)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
		require.NoError(t, inv.Create(ctx, "g/s", 10, stock.WithBuckets(4)))
		_, err = inv.Confirm(ctx, o)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
		_, err = inv.Refund(ctx, o)
		require.ErrorIs(t, err, stock.ErrSKUNotFound)
		audited(t, inv, "g/s")
	})
	t.Run("tombstone", func(t *testing.T) {
		inv, _, _ := newInventory(t)
		ctx := t.Context()
		o := order("o1", away(4), "g/s", 1)
		_, err := inv.Cancel(ctx, o)
		require.NoError(t, err)
		require.NoError(t, inv.Create(ctx, "g/s", 10, stock.WithBuckets(4)))
		_, err = inv.Reserve(ctx, o, time.Minute)
		require.ErrorIs(t, err, stock.ErrCancelled)
		_, err = inv.Confirm(ctx, o)
		require.ErrorIs(t, err, stock.ErrCancelled)
		res, err := inv.Cancel(ctx, o)
		require.NoError(t, err)
		require.True(t, res.Replayed)
		audited(t, inv, "g/s")
		lv, err := inv.Level(ctx, "g/s")
		require.NoError(t, err)
		require.Equal(t, stock.Levels{Available: 10}, lv)
	})
}
