package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

func TestInventory_WithFence_refusesStaleToken(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "shop/a", 10))
	f5 := stock.WithFence(lock.Fence{Name: "restocker", Token: 5})
	f6 := stock.WithFence(lock.Fence{Name: "restocker", Token: 6})

	_, err := inv.Restock(ctx, "r1", "shop/a", 1, f5)
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "r2", "shop/a", 1, f6)
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "r3", "shop/a", 1, f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = inv.Deduct(ctx, order("o1", "u", "shop/a", 1), f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = inv.Reserve(ctx, order("o2", "u", "shop/a", 1), time.Minute, f5)
	require.ErrorIs(t, err, stock.ErrStaleFence)
	_, err = inv.Deduct(ctx, order("o3", "u", "shop/a", 1), f6)
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 11, Sold: 1}, level(t, inv, "shop/a"))

	// The token lives in the group's slot, at lock.FenceKey.
	v, err := rdb.Get(ctx, lock.FenceKey(prefix, "shop", "restocker")).Result()
	require.NoError(t, err)
	require.Equal(t, "6", v)

	_, err = inv.Deduct(ctx, order("o4", "u", "shop/a", 1), stock.WithFence(lock.Fence{Name: "restocker"}))
	require.ErrorIs(t, err, stock.ErrInvalid)
	audited(t, inv, "shop/a")
}

// A write with WithReplicaAck is acknowledged by the replica; with the
// replica stopped, the write still happens and the error says so.
func TestInventory_WithReplicaAck_pair(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	rdb := p.Primary.Client(func(o *redis.Options) { o.ReadTimeout = 5 * time.Second })
	inv := mustNew(t, rdb, stock.WithReplicaAck(1, time.Second), stock.WithRetry(1, 0, 0))
	defer inv.Close()
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10))
	_, err := inv.Deduct(ctx, order("o1", "u", "sku", 1))
	require.NoError(t, err)
	waitFor(t, func() bool {
		v, err := p.Replica.Client().HGet(ctx, "redkit:stock:v1:{sku}:sku:sku", "sold").Result()
		return err == nil && v == "1"
	})

	require.NoError(t, p.Replica.Pause())
	defer func() { _ = p.Replica.Resume() }()
	res, err := inv.Deduct(ctx, order("o2", "u", "sku", 1))
	if !errors.Is(err, stock.ErrReplicaAck) {
		info, _ := rdb.Info(ctx, "replication").Result()
		t.Fatalf("deduct with the replica stopped: %v\n%s", err, info)
	}
	require.Equal(t, int64(2), res.Levels["sku"].Sold, "the write happened")
}

// A refill between the buckets of a hot SKU never goes past a transfer
// step its replicas did not acknowledge: a failover could lose the units in
// flight or create some. The order is not decided (ErrUnknownOutcome), the
// units stay in flight (Audit counts them), and the order sent again
// finishes the transfer once the replicas acknowledge.
func TestInventory_WithReplicaAck_bucketRefillWaitsForEachStep(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	rdb := p.Primary.Client(func(o *redis.Options) { o.ReadTimeout = 5 * time.Second })
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithReplicaAck(1, time.Second), stock.WithReclaimInterval(0))
	defer inv.Close()
	require.NoError(t, inv.Create(ctx, "hot", 10, stock.WithBuckets(2))) // 5 units a bucket
	buyer := buyerOfBucket(1, 2)
	o := order("o-1", buyer, "hot", 7)

	short := mustNew(t, rdb, stock.WithReplicaAck(2, 100*time.Millisecond), stock.WithReclaimInterval(0)) // one replica: never enough
	defer short.Close()
	_, err := short.Deduct(ctx, o)
	require.ErrorIs(t, err, stock.ErrUnknownOutcome)
	require.ErrorIs(t, err, stock.ErrReplicaAck)
	rep, err := inv.Audit(ctx, "hot")
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, int64(5), rep.InFlight, "out of bucket 0, not credited to bucket 1")
	require.Zero(t, rep.Levels.Sold)

	res, err := inv.Deduct(ctx, o) // the same order, with replicas that acknowledge
	require.NoError(t, err)
	require.False(t, res.Replayed, "decided now, not before")
	rep, err = inv.Audit(ctx, "hot")
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, stock.Levels{Available: 3, Sold: 7}, rep.Levels)
	require.Zero(t, rep.InFlight)
}

func TestInventory_WithReplicaAck_cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.ReadTimeout = 5 * time.Second })
	inv := mustNew(t, rdb, stock.WithReplicaAck(1, 2*time.Second))
	defer inv.Close()
	ctx := t.Context()
	for _, g := range []string{"a", "b", "c", "d", "e"} {
		sku := g + "/sku"
		require.NoError(t, inv.Create(ctx, sku, 10))
		_, err := inv.Deduct(ctx, order("o-"+g, "u", sku, 2))
		require.NoError(t, err, sku)
		_, err = inv.Reserve(ctx, order("h-"+g, "u", sku, 1), time.Minute)
		require.NoError(t, err, sku)
		require.Equal(t, stock.Levels{Available: 7, Reserved: 1, Sold: 2}, level(t, inv, sku))
		audited(t, inv, sku)
	}
}

// A Redlock lease's fence works with WithFence as a Mutex's: holder X,
// paused past its lease, writes after Y took the lock over the same three
// masters and wrote; X's write is refused and changes nothing.
func TestInventory_WithFence_redlockHolderPausedPastLease(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "shop/a", 10))
	var masters []redis.UniversalClient
	for range 3 {
		c := redistest.New(t, redistest.Options{}).Client()
		masters = append(masters, c)
	}
	rl, err := lock.NewRedlock(masters, lock.WithTTL(2*time.Second), lock.WithWatchdog(false))
	require.NoError(t, err)
	defer rl.Close()
	m := rl.Mutex("restocker")
	x, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "x1", "shop/a", 1, stock.WithFence(x.Fence()))
	require.NoError(t, err)

	// X pauses; Y waits out its TTL and writes.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	y, err := m.Acquire(wctx)
	require.NoError(t, err)
	require.Greater(t, y.Fence().Token, x.Fence().Token)
	_, err = inv.Restock(ctx, "y1", "shop/a", 1, stock.WithFence(y.Fence()))
	require.NoError(t, err)

	_, err = inv.Deduct(ctx, order("x2", "u", "shop/a", 5), stock.WithFence(x.Fence()))
	require.ErrorIs(t, err, stock.ErrStaleFence, "X's late write is refused")
	require.Equal(t, stock.Levels{Available: 12}, level(t, inv, "shop/a"))
	require.NoError(t, y.Release(ctx))
	audited(t, inv, "shop/a")
}
