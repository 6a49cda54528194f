package stock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

var fuzzSeq int

// fuzzInventory returns an Inventory on a fresh key prefix of rdb.
func fuzzInventory(t *testing.T, rdb *redis.Client) (*stock.Inventory, string) {
	fuzzSeq++
	prefix := fmt.Sprintf("fz%d-%d", fuzzSeq, time.Now().UnixNano())
	inv := mustNew(t, rdb, stock.WithKeyPrefix(prefix))
	t.Cleanup(func() {
		_ = inv.Close()
		if ks, _ := rdb.Keys(t.Context(), prefix+":*").Result(); len(ks) > 0 {
			rdb.Del(t.Context(), ks...)
		}
	})
	return inv, prefix
}

// requireTagged fails unless every key under prefix carries exactly one hash
// tag: the slot group g, or g#k for bucket k < buckets of a hot SKU.
func requireTagged(t *testing.T, rdb *redis.Client, prefix, g string, buckets int) {
	t.Helper()
	ks, err := rdb.Keys(t.Context(), prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		tag := redistest.HashTag(k)
		if err := redistest.CheckKeyTag(k, tag); err != nil {
			t.Fatal(err)
		}
		if tag != g {
			n, err := strconv.Atoi(strings.TrimPrefix(tag, g+"#"))
			if !strings.HasPrefix(tag, g+"#") || err != nil || n < 1 || n >= buckets {
				t.Fatalf("key %q is outside the slot group %s and its %d buckets", k, g, buckets)
			}
		}
	}
}

// FuzzCreate feeds SKU names, initial stock, buyer limits and bucket counts
// to Create: invalid input is ErrInvalid and writes nothing; valid input
// creates the SKU with exactly the initial stock, in the SKU's slot group.
func FuzzCreate(f *testing.F) {
	f.Add("shop-7/sku-1", int64(100), int64(2), 1)
	f.Add("sku", int64(0), int64(0), 0)
	f.Add("hot", int64(1<<53-1), int64(1), 8)
	f.Add("{sku}", int64(1), int64(0), 1)
	rdb := shared.Client()
	f.Cleanup(func() { _ = rdb.Close() })
	f.Fuzz(func(t *testing.T, sku string, initial, limit int64, buckets int) {
		inv, prefix := fuzzInventory(t, rdb)
		ctx := t.Context()
		want := redistest.ValidName(sku) && (initial == 0 || redistest.ValidAmount(initial)) &&
			(limit == 0 || redistest.ValidAmount(limit)) && buckets >= 0 && buckets <= stock.MaxBuckets
		before := redistest.Capture(t, rdb, prefix+":*")
		err := inv.Create(ctx, sku, initial, stock.WithBuyerLimit(limit), stock.WithBuckets(buckets))
		if !want {
			if !errors.Is(err, stock.ErrInvalid) {
				t.Fatalf("Create(%q, %d, limit %d, buckets %d) = %v, want ErrInvalid", sku, initial, limit, buckets, err)
			}
			before.RequireUnchanged(t, rdb, "a refused create")
			return
		}
		if err != nil {
			t.Fatalf("Create(%q, %d, limit %d, buckets %d): %v", sku, initial, limit, buckets, err)
		}
		lv, err := inv.Level(ctx, sku)
		if err != nil {
			t.Fatalf("Level(%q): %v", sku, err)
		}
		if lv != (stock.Levels{Available: initial}) {
			t.Fatalf("Level(%q) = %+v after creating %d", sku, lv, initial)
		}
		requireTagged(t, rdb, prefix, redistest.Tag(sku), max(buckets, 1))
	})
}

// FuzzDeduct feeds order IDs, buyers, SKUs, quantities and hold TTLs to
// Deduct and Reserve against a SKU with 10 units: invalid input is
// ErrInvalid and changes nothing; a valid order takes exactly its quantity
// (or is sold out), a repeat is a replay with the same levels, and every key
// stays in the SKU's slot group.
func FuzzDeduct(f *testing.F) {
	f.Add("order-1", "buyer-1", "shop-7/sku-1", int64(1), int64(time.Minute))
	f.Add("o", "u", "sku", int64(11), int64(time.Second))
	f.Add("o{1}", "u", "sku", int64(1), int64(time.Second))
	f.Add("o", "u", "sku", int64(1<<53), int64(0))
	rdb := shared.Client()
	f.Cleanup(func() { _ = rdb.Close() })
	const supply = 10
	f.Fuzz(func(t *testing.T, orderID, buyer, sku string, qty, ttl int64) {
		inv, prefix := fuzzInventory(t, rdb)
		ctx := t.Context()
		names := redistest.ValidName(orderID) && redistest.ValidName(buyer) && redistest.ValidName(sku)
		if redistest.ValidName(sku) {
			if err := inv.Create(ctx, sku, supply); err != nil {
				t.Fatalf("Create(%q): %v", sku, err)
			}
		}
		o := stock.Order{ID: orderID, Buyer: buyer, Items: []stock.Item{{SKU: sku, Qty: qty}}}
		before := redistest.Capture(t, rdb, prefix+":*")
		res, err := inv.Deduct(ctx, o)
		switch {
		case !names || !redistest.ValidAmount(qty):
			if !errors.Is(err, stock.ErrInvalid) {
				t.Fatalf("Deduct(%+v) = %v, want ErrInvalid", o, err)
			}
			before.RequireUnchanged(t, rdb, "a refused deduct")
		case qty > supply:
			if !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("Deduct(%+v) = %v, want ErrSoldOut", o, err)
			}
		default:
			if err != nil {
				t.Fatalf("Deduct(%+v): %v", o, err)
			}
			want := stock.Levels{Available: supply - qty, Sold: qty}
			if res.Replayed || res.Levels[sku] != want {
				t.Fatalf("Deduct(%+v) = %+v, want levels %+v", o, res, want)
			}
			again, err := inv.Deduct(ctx, o)
			if err != nil || !again.Replayed || again.Levels[sku] != want {
				t.Fatalf("repeated Deduct(%+v) = %+v, %v; want a replay with %+v", o, again, err, want)
			}
		}

		r := stock.Order{ID: "r-" + buyer, Buyer: buyer, Items: []stock.Item{{SKU: sku, Qty: 1}}}
		before = redistest.Capture(t, rdb, prefix+":*")
		d := time.Duration(ttl)
		_, err = inv.Reserve(ctx, r, d)
		switch {
		case !redistest.ValidName(r.ID) || !redistest.ValidName(buyer) || !redistest.ValidName(sku) || d < time.Second || d > 7*24*time.Hour:
			if !errors.Is(err, stock.ErrInvalid) {
				t.Fatalf("Reserve(%+v, %v) = %v, want ErrInvalid", r, d, err)
			}
			before.RequireUnchanged(t, rdb, "a refused reserve")
		case err != nil && !errors.Is(err, stock.ErrSoldOut) && !errors.As(err, new(*stock.ConflictError)):
			// A conflict: the fuzzer chose orderID == r.ID.
			t.Fatalf("Reserve(%+v, %v): %v", r, d, err)
		}
		if redistest.ValidName(sku) {
			requireTagged(t, rdb, prefix, redistest.Tag(sku), 1)
		}
	})
}
