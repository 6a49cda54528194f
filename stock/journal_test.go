package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

func TestInventory_Journal_recordsEveryChange(t *testing.T) {
	inv, _, _ := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10, stock.WithBuyerLimit(5)))
	_, err := inv.Deduct(ctx, order("o1", "u1", "sku", 3))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o1", "u1", "sku", 3)) // replay: no entry
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("o2", "u1", "sku", 30)) // refusal: no entry
	require.Error(t, err)
	_, err = inv.Restock(ctx, "r1", "sku", 4)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, "w1", "sku", 2)
	require.NoError(t, err)
	require.NoError(t, inv.CloseSKU(ctx, "sku"))

	es, _, err := inv.Entries(ctx, "sku", "", 100)
	require.NoError(t, err)
	require.Len(t, es, 5)
	kinds := []string{stock.KindCreate, stock.KindDeduct, stock.KindRestock, stock.KindWriteOff, stock.KindClose}
	for i, e := range es {
		require.Equal(t, kinds[i], e.Kind)
		require.Equal(t, "sku", e.SKU)
	}
	require.Equal(t, stock.Entry{ID: es[1].ID, Kind: stock.KindDeduct, SKU: "sku", Op: "o1", Buyer: "u1",
		Delta: stock.Levels{Available: -3, Sold: 3}, After: stock.Levels{Available: 7, Sold: 3}, Supply: 10,
		Time: es[1].Time}, es[1])
	require.WithinDuration(t, time.Now(), es[1].Time, time.Minute, "the entry's time is the server's, from its ID")
	require.Equal(t, stock.Levels{Available: 9, Sold: 3}, es[4].After)
	require.Equal(t, int64(12), es[4].Supply)

	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Equal(t, 5, rep.Entries)
	require.Equal(t, int64(12), rep.Supply)
}

func TestInventory_Audit_detectsTampering(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "sku", 10))
	_, err := inv.Deduct(ctx, order("o1", "u1", "sku", 3))
	require.NoError(t, err)

	// A blind write outside the scripts (the blog pattern's DECRBY).
	key := prefix + ":stock:v1:{sku}:sku:sku"
	require.NoError(t, rdb.HIncrBy(ctx, key, "available", -1).Err())
	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Len(t, rep.Problems, 2, rep.Problems) // identity and journal end both differ

	// Repaired levels but a journal entry that does not add up.
	require.NoError(t, rdb.HIncrBy(ctx, key, "available", 1).Err())
	rep, err = inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + ":stock:v1:{sku}:journal:sku",
		Values: []string{"kind", "deduct", "sku", "sku", "op", "forged", "d_avail", "-1", "d_sold", "1",
			"avail", "6", "res", "0", "sold", "4", "ref", "0", "supply", "10"}}).Err())
	rep, err = inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.False(t, rep.OK())
}

func TestInventory_CheckpointTrim(t *testing.T) {
	inv := stocked(t, "sku", 100)
	ctx := t.Context()
	n, err := inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Zero(t, n) // no checkpoint yet: nothing may go
	for i := range 5 {
		_, err := inv.Deduct(ctx, order(opID("a", i), "u", "sku", 1))
		require.NoError(t, err)
	}
	ck, err := inv.Checkpoint(ctx, "sku")
	require.NoError(t, err)
	for i := range 3 {
		_, err := inv.Deduct(ctx, order(opID("b", i), "u", "sku", 1))
		require.NoError(t, err)
	}
	n, err = inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, int64(6), n)
	es, _, err := inv.Entries(ctx, "sku", "", 100)
	require.NoError(t, err)
	require.Len(t, es, 4)
	require.Equal(t, ck, es[0].ID)
	require.Equal(t, stock.Levels{Available: 95, Sold: 5}, es[0].After)

	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	require.Equal(t, ck, rep.Checkpoint)
	require.Equal(t, 4, rep.Entries)
	require.Equal(t, stock.Levels{Available: 92, Sold: 8}, rep.Levels)

	_, err = inv.Checkpoint(ctx, "missing")
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
}

// A SKU's journal is found while the journal exists, even with the SKU's
// hash gone: a page past its end is empty, not ErrSKUNotFound; with both
// gone the SKU is not found.
func TestInventory_Entries_journalWithoutHash(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/s", 10))
	_, err := inv.Deduct(ctx, order("o", "u", "g/s", 1))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, prefix+":stock:v1:{g}:sku:g/s").Err())
	es, _, err := inv.Entries(ctx, "g/s", "", 10)
	require.NoError(t, err)
	require.Len(t, es, 2)
	es, next, err := inv.Entries(ctx, "g/s", es[1].ID, 10)
	require.NoError(t, err)
	require.Empty(t, es)
	require.Empty(t, next)
	require.NoError(t, rdb.Del(ctx, prefix+":stock:v1:{g}:journal:g/s").Err())
	_, _, err = inv.Entries(ctx, "g/s", "", 10)
	require.ErrorIs(t, err, stock.ErrSKUNotFound)
}

// Trim keeps what a consumer group has not acknowledged yet.
func TestInventory_Trim_keepsUnconsumed(t *testing.T) {
	inv := stocked(t, "sku", 100)
	ctx := t.Context()
	consumeN(t, inv, stock.Consumer{Group: "db", Name: "c1", SKUs: []string{"sku"}}, 1) // create entry
	for i := range 4 {
		_, err := inv.Deduct(ctx, order(opID("a", i), "u", "sku", 1))
		require.NoError(t, err)
	}
	_, err := inv.Checkpoint(ctx, "sku")
	require.NoError(t, err)
	n, err := inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, int64(0), n) // the create entry was the last delivered: it stays, the rest was not delivered
	got := consumeN(t, inv, stock.Consumer{Group: "db", Name: "c1", SKUs: []string{"sku"}}, 5)
	require.Equal(t, stock.KindCheckpoint, got[4].Kind)
	n, err = inv.Trim(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
}

// consumeN runs Consume until it has handled want entries.
func consumeN(t *testing.T, inv *stock.Inventory, c stock.Consumer, want int) []stock.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got []stock.Entry
	c.Poll = 10 * time.Millisecond
	err := inv.Consume(ctx, c, func(_ context.Context, es []stock.Entry) error {
		got = append(got, es...)
		if len(got) >= want {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, got, want)
	return got
}

func TestInventory_Consume_redeliversFailedAndAbandoned(t *testing.T) {
	inv := stocked(t, "g/a", 10, "g/b", 10)
	ctx := t.Context()
	_, err := inv.Deduct(ctx, order("o1", "u", "g/a", 1, "g/b", 2))
	require.NoError(t, err)

	// c1 fails on its first batch: nothing is acknowledged.
	boom := errors.New("db down")
	err = inv.Consume(ctx, stock.Consumer{Group: "db", Name: "c1", SKUs: []string{"g/a", "g/b"}},
		func(context.Context, []stock.Entry) error { return boom })
	require.ErrorIs(t, err, boom)

	// c2 takes over c1's entries once they are idle for MinIdle, and reads
	// the rest itself; every entry is handled exactly once by c2.
	var mu sync.Mutex
	seen := map[string]int{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = inv.Consume(cctx, stock.Consumer{Group: "db", Name: "c2", SKUs: []string{"g/a", "g/b"},
		MinIdle: 50 * time.Millisecond, Poll: 10 * time.Millisecond},
		func(_ context.Context, es []stock.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range es {
				seen[e.SKU+" "+e.ID]++
			}
			if len(seen) == 4 {
				cancel()
			}
			return nil
		})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, seen, 4) // two creates, two deduct entries
	for id, n := range seen {
		require.Equal(t, 1, n, id)
	}
}

func TestInventory_Consume_badInput(t *testing.T) {
	inv, _, _ := newInventory(t)
	handle := func(context.Context, []stock.Entry) error { return nil }
	for _, c := range []stock.Consumer{
		{Group: "", Name: "c", SKUs: []string{"sku"}},
		{Group: "g", Name: "c c", SKUs: []string{"sku"}},
		{Group: "g", Name: "c"},
		{Group: "g", Name: "c", SKUs: []string{"{sku}"}},
	} {
		require.ErrorIs(t, inv.Consume(t.Context(), c, handle), stock.ErrInvalid, c)
	}
}
