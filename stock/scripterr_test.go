package stock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// No script fails after its first write: each stock script is driven to
// each of its errors (bad input, bounds at 2^53-1, state conflicts, wrong
// routing, refusals it does not store) and no key changes.
func TestScripts_errorsWriteNothing(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	defer rdb.Close()
	ctx := t.Context()
	inv := mustNew(t, rdb, stock.WithKeyPrefix("e"), stock.WithReclaimInterval(0))
	defer inv.Close()
	const maxUnits = 1<<53 - 1
	const big = "9007199254740992" // 2^53

	// The books the scripts are run against.
	require.NoError(t, inv.Create(ctx, "a", 10, stock.WithBuyerLimit(3)))
	_, err := inv.Deduct(ctx, order("o1", "u", "a", 1))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("h1", "u", "a", 1), time.Hour)
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("c1", "u", "a", 1), time.Hour)
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("c1", "u", "a", 1))
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("lim", "u", "a", 5))
	require.ErrorIs(t, err, stock.ErrBuyerLimit) // a stored refusal
	require.NoError(t, inv.Create(ctx, "hi", maxUnits))
	_, err = inv.Deduct(ctx, order("hb", "u", "hi", maxUnits))
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("hb", "u", "hi", maxUnits))
	require.NoError(t, err) // available, sold and refunded all at 2^53-1
	require.NoError(t, inv.Create(ctx, "bk", 0, stock.WithBuckets(2)))
	b1 := buyerOfBucket(1, 2)
	_, err = inv.Deduct(ctx, order("cx", b1, "bk", 1)) // claims cx in {bk}
	require.ErrorIs(t, err, stock.ErrSoldOut)
	// Restocks stop at a bucket's share of 2^53-1; xfer.lua's own bound is
	// reached by setting bucket 0's levels to 2^53-1 directly.
	require.NoError(t, rdb.HSet(ctx, "e:stock:v1:{bk}:sku:bk", "available", maxUnits, "supply", maxUnits).Err())
	require.NoError(t, inv.Create(ctx, "closed", 1))
	require.NoError(t, inv.CloseSKU(ctx, "closed"))
	_, err = inv.Reserve(ctx, order("hk", "w", "a", 2), time.Hour)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, "e:stock:v1:{a}:op:hk").Err()) // a hold whose marker is gone

	key := func(tag, kind, name string) string { return "e:stock:v1:{" + tag + "}:" + kind + ":" + name }
	order4 := func(tag, sku, id string) []string {
		return []string{key(tag, "op", id), key(tag, "sku", sku), key(tag, "buyers", sku), key(tag, "journal", sku), key(tag, "holds", sku)}
	}
	adj := func(tag, sku, id string) []string {
		return []string{key(tag, "op", id), key(tag, "sku", sku), key(tag, "journal", sku)}
	}
	two := func(tag, sku string) []string { return []string{key(tag, "sku", sku), key(tag, "journal", sku)} }
	xout := func(tag, sku string) []string {
		return []string{key(tag, "sku", sku), key(tag, "journal", sku), key(tag, "transfers", sku)}
	}
	aKeys := append(order4("a", "a", "o1"), key("a", "sku", "hi"), key("a", "buyers", "hi"), key("a", "journal", "hi"), key("a", "holds", "hi"))
	w := "60000"

	cases := []struct {
		name, script string
		keys         []string
		args         []any
		want         string // in the error, or in the reply
	}{
		// create.lua
		{"create: initial not a number", "create.lua", two("a", "n"), []any{"n", "x", 0, 1, 0}, "invalid initial"},
		{"create: initial 2^53", "create.lua", two("a", "n"), []any{"n", big, 0, 1, 0}, "invalid initial"},
		{"create: limit negative", "create.lua", two("a", "n"), []any{"n", 1, -1, 1, 0}, "invalid limit"},
		{"create: 65 buckets", "create.lua", two("a", "n"), []any{"n", 1, 0, 65, 0}, "invalid buckets"},
		{"create: bucket past the count", "create.lua", two("a", "n"), []any{"n", 1, 0, 2, 2}, "invalid bucket"},
		{"create: other initial", "create.lua", two("a", "a"), []any{"a", 11, 3, 1, 0}, "conflict initial"},
		{"create: other limit", "create.lua", two("a", "a"), []any{"a", 10, 4, 1, 0}, "conflict limit"},
		{"create: other bucket count", "create.lua", two("a", "a"), []any{"a", 10, 3, 2, 0}, "conflict buckets"},
		{"create: exists", "create.lua", two("a", "a"), []any{"a", 10, 3, 1, 0}, "exists"},
		// adjust.lua
		{"adjust: kind", "adjust.lua", adj("a", "a", "n1"), []any{"n1", "a", "steal", 1, "x", w}, "invalid 0 kind"},
		{"adjust: quantity 0", "adjust.lua", adj("a", "a", "n1"), []any{"n1", "a", "restock", 0, "x", w}, "invalid 0 quantity"},
		{"adjust: quantity 2^53", "adjust.lua", adj("a", "a", "n1"), []any{"n1", "a", "restock", big, "x", w}, "invalid 0 quantity"},
		{"adjust: window", "adjust.lua", adj("a", "a", "n1"), []any{"n1", "a", "restock", 1, "x", "0"}, "invalid 0 window"},
		{"adjust: ID of an order", "adjust.lua", adj("a", "a", "o1"), []any{"o1", "a", "restock", 1, "x", w}, "conflict 0 kind"},
		{"adjust: restock past 2^53-1", "adjust.lua", adj("hi", "hi", "n2"), []any{"n2", "hi", "restock", 1, "x", w}, "overflow"},
		{"adjust: wrong bucket", "adjust.lua", adj("bk", "bk", opOfBucket("n", 1, 2)), []any{opOfBucket("n", 1, 2), "bk", "restock", 1, "x", w}, "buckets 0 2"},
		// deduct.lua
		{"deduct: key count", "deduct.lua", order4("a", "a", "n3")[:4], []any{"n3", "u", "x", w, 0, "a", 1}, "invalid 0 key or argument count"},
		{"deduct: argument count", "deduct.lua", order4("a", "a", "n3"), []any{"n3", "u", "x", w, 0, "a"}, "invalid 0 key or argument count"},
		{"deduct: window", "deduct.lua", order4("a", "a", "n3"), []any{"n3", "u", "x", "0", 0, "a", 1}, "invalid 0 window"},
		{"deduct: hold ttl", "deduct.lua", order4("a", "a", "n3"), []any{"n3", "u", "x", w, -1, "a", 1}, "invalid 0 hold ttl"},
		{"deduct: quantity 0", "deduct.lua", order4("a", "a", "n3"), []any{"n3", "u", "x", w, 0, "a", 0}, "quantity of item 1"},
		{"deduct: quantity 2^53", "deduct.lua", order4("a", "a", "n3"), []any{"n3", "u", "x", w, 0, "a", big}, "quantity of item 1"},
		{"deduct: duplicate SKU", "deduct.lua", append(order4("a", "a", "n3"), order4("a", "a", "n3")[1:]...), []any{"n3", "u", "x", w, 0, "a", 1, "a", 1}, "duplicate sku"},
		{"deduct: other buyer", "deduct.lua", order4("a", "a", "o1"), []any{"o1", "v", "x", w, 0, "a", 1}, "conflict 0 buyer"},
		{"deduct: other items", "deduct.lua", order4("a", "a", "o1"), []any{"o1", "u", "x", w, 0, "a", 2}, "conflict 0 items"},
		{"deduct: other kind", "deduct.lua", order4("a", "a", "o1"), []any{"o1", "u", "x", w, 1000, "a", 1}, "conflict 0 kind"},
		{"deduct: sold past 2^53-1", "deduct.lua", order4("hi", "hi", "n4"), []any{"n4", "u", "x", w, 0, "hi", 1}, "overflow"},
		{"deduct: two items, one bucketed", "deduct.lua", append(order4("bk", "bk", "n5"), order4("bk", "bk2", "n5")[1:]...), []any{"n5", buyerOfBucket(0, 2), "x", w, 0, "bk", 1, "bk2", 1}, "must be alone"},
		{"deduct: wrong bucket", "deduct.lua", order4("bk", "bk", "n5"), []any{"n5", b1, "x", w, 0, "bk", 1}, "buckets 0 2"},
		{"deduct: claimed by another buyer", "deduct.lua", order4("bk", "bk", "cx"), []any{"cx", buyerOfBucket(0, 2), "x", w, 0, "bk", 1}, "conflict 0 buyer"},
		{"deduct: a hold still indexed", "deduct.lua", order4("a", "a", "hk"), []any{"hk", "w", "x", w, 60000, "a", 2}, "conflict 0 hold"},
		// hold.lua
		{"hold: key count", "hold.lua", order4("a", "a", "h1")[:3], []any{"h1", "u", "x", w, "cancel", "a", 1}, "invalid 0 key count"},
		{"hold: argument count", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", w, "confirm", "a", 1}, "invalid 0 argument count"},
		{"hold: action", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", w, "steal", "a", 1}, "invalid 0 action"},
		{"hold: window", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", "0", "cancel", "a", 1}, "invalid 0 window"},
		{"hold: quantity", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", w, "cancel", "a", big}, "quantity of item 1"},
		{"hold: confirm more than held", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", w, "confirm", "a", 1, 2}, "confirmed quantity"},
		{"hold: other buyer", "hold.lua", order4("a", "a", "h1"), []any{"h1", "v", "x", w, "cancel", "a", 1}, "conflict 0 buyer"},
		{"hold: other items", "hold.lua", order4("a", "a", "h1"), []any{"h1", "u", "x", w, "cancel", "a", 2}, "conflict 0 items"},
		{"hold: confirm of a Deduct order", "hold.lua", order4("a", "a", "o1"), []any{"o1", "u", "x", w, "confirm", "a", 1, 1}, "conflict 0 kind"},
		{"hold: cancel of a confirmed order", "hold.lua", order4("a", "a", "c1"), []any{"c1", "u", "x", w, "cancel", "a", 1}, "state 0 confirmed"},
		{"hold: confirm of no order", "hold.lua", order4("a", "a", "none"), []any{"none", "u", "x", w, "confirm", "a", 1, 1}, "no_order"},
		{"hold: refund of a refused order", "hold.lua", order4("a", "a", "lim"), []any{"lim", "u", "x", w, "refund", "a", 5}, "refused 0 limit"},
		{"hold: wrong bucket", "hold.lua", order4("bk", "bk", "cx"), []any{"cx", b1, "x", w, "cancel", "bk", 1}, "buckets 0 2"},
		{"hold: claimed by another buyer", "hold.lua", order4("bk", "bk", "cx"), []any{"cx", buyerOfBucket(0, 2), "x", w, "cancel", "bk", 1}, "conflict 0 buyer"},
		// xfer.lua
		{"xfer: quantity", "xfer.lua", xout("bk", "bk"), []any{"out", "bk", "t1", 0, 1, 5}, "ERR quantity"},
		{"xfer: no bucket", "xfer.lua", xout("bk", "nope"), []any{"out", "nope", "t1", 1, 1, 5}, "ERR no such bucket"},
		{"xfer: room", "xfer.lua", xout("bk", "bk"), []any{"out", "bk", "t1", 1, 1, -1}, "ERR room"},
		{"xfer: receiving bucket", "xfer.lua", xout("bk", "bk"), []any{"out", "bk", "t1", 1, "x", 5}, "ERR bucket"},
		{"xfer: action", "xfer.lua", xout("bk", "bk"), []any{"steal", "bk", "t1", 1, 1, 5}, "ERR action"},
		{"xfer: seq", "xfer.lua", two("bk", "bk"), []any{"in", "bk", "t1", 1, 1, 0}, "ERR seq"},
		{"xfer: in past 2^53-1", "xfer.lua", two("bk", "bk"), []any{"in", "bk", "t1", 1, 1, 1}, "ERR overflow"},
		{"xfer: in out of order", "xfer.lua", two("bk", "bk"), []any{"in", "bk", "t1", 1, 1, 2}, "[-1]"},
		// claim.lua
		{"claim: mode", "claim.lua", []string{key("bk", "op", "cx")}, []any{b1, "bk 1", "deduct", "steal", w}, "invalid mode"},
		{"claim: kind", "claim.lua", []string{key("bk", "op", "cx")}, []any{b1, "bk 1", "steal", "claim", w}, "invalid kind"},
		{"claim: keep", "claim.lua", []string{key("bk", "op", "cx")}, []any{b1, "bk 1", "deduct", "claim", "0"}, "invalid keep"},
		{"claim: other buyer", "claim.lua", []string{key("bk", "op", "cx")}, []any{"v", "bk 1", "deduct", "claim", w}, "conflict buyer"},
		{"claim: other items", "claim.lua", []string{key("bk", "op", "cx")}, []any{b1, "bk 2", "deduct", "claim", w}, "conflict items"},
		{"claim: other kind", "claim.lua", []string{key("bk", "op", "cx")}, []any{b1, "bk 1", "reserve", "claim", w}, "conflict kind"},
		{"claim: check of nothing", "claim.lua", []string{key("bk", "op", "free")}, []any{b1, "bk 1", "", "check", w}, "ok"},
		// close, checkpoint, reclaim, trim
		{"close: no SKU", "close.lua", two("a", "nope"), []any{"nope"}, "not_found"},
		{"close: closed", "close.lua", two("closed", "closed"), []any{"closed"}, "already"},
		{"checkpoint: no SKU", "checkpoint.lua", two("a", "nope"), []any{"nope"}, "redis: nil"},
		{"reclaim: batch", "reclaim.lua", aKeys[1:5], []any{"a", 0}, "ERR batch"},
		{"reclaim: nothing due", "reclaim.lua", aKeys[1:5], []any{"a", 10}, "[0 0 0]"},
		{"trim: no checkpoint", "trim.lua", two("a", "a"), []any{"a"}, "0"},
		{"trim: holdback", "trim.lua", two("a", "a"), []any{"a", "0"}, "ERR holdback"},
		{"forget: idle", "forget.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "0"}, "ERR idle"},
		{"forget: no group", "forget.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "1"}, "0"},
		{"consume: batch", "consume.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "0", "1"}, "ERR batch"},
		{"consume: batch past 1000", "consume.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "1001", "1"}, "ERR batch"},
		{"consume: idle", "consume.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "1", "0"}, "ERR idle"},
		{"consume: no group", "consume.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "1", "1"}, "NOGROUP"},
		{"consumed: no IDs", "consumed.lua", []string{key("a", "journal", "a")}, []any{"g", "c"}, "0"},
		{"consumed: no group", "consumed.lua", []string{key("a", "journal", "a")}, []any{"g", "c", "1-0"}, "NOGROUP"},
	}
	src := stock.Scripts()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ok := src[c.script]
			require.True(t, ok, c.script)
			before := redistest.Capture(t, rdb, "e:*")
			v, err := redis.NewScript(s).Run(ctx, rdb, c.keys, c.args...).Result()
			got := fmt.Sprint(v)
			if err != nil {
				got = err.Error()
			}
			require.True(t, strings.Contains(got, c.want), "reply %q, want %q", got, c.want)
			before.RequireUnchanged(t, rdb, c.name)
		})
	}

	// A checkpoint over levels the journal does not explain.
	require.NoError(t, rdb.HSet(ctx, key("a", "sku", "a"), "sold", "1", "available", "7").Err())
	before := redistest.Capture(t, rdb, "e:*")
	err = redis.NewScript(src["checkpoint.lua"]).Run(ctx, rdb, two("a", "a"), "a").Err()
	require.ErrorContains(t, err, "DRIFT")
	before.RequireUnchanged(t, rdb, "checkpoint over drift")
}
