package stock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

// Audit catches tampering of each kind: one row per kind, each on books
// that audited clean just before.
func TestAudit_catchesTamperingOfEachKind(t *testing.T) {
	type books struct {
		inv                 *stock.Inventory
		rdb                 *redis.Client
		sku, journal, holds string
	}
	rows := []struct {
		name   string
		tamper func(ctx context.Context, t *testing.T, b books)
		want   string // a problem Audit must report
	}{
		{"a level changed", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "available", 1).Err())
		}, "available + reserved + sold - refunded"},
		{"levels changed consistently with the supply", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "available", 5).Err())
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "supply", 5).Err())
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "restocked", 5).Err())
		}, "journal ends at levels"},
		{"a journal entry added", func(ctx context.Context, t *testing.T, b books) {
			last := b.rdb.XRevRangeN(ctx, b.journal, "+", "-", 1).Val()[0].Values
			require.NoError(t, b.rdb.XAdd(ctx, &redis.XAddArgs{Stream: b.journal, Values: []any{
				"op", "forged", "kind", "restock", "sku", "s", "d_avail", "1", "d_supply", "1",
				"avail", bump(last["avail"]), "res", last["res"], "sold", last["sold"], "ref", last["ref"],
				"supply", bump(last["supply"])}}).Err())
		}, "journal ends at levels"},
		{"a journal entry removed", func(ctx context.Context, t *testing.T, b books) {
			msgs := b.rdb.XRange(ctx, b.journal, "-", "+").Val()
			require.NoError(t, b.rdb.XDel(ctx, b.journal, msgs[2].ID).Err())
		}, "replay gives"},
		{"the last journal entry removed", func(ctx context.Context, t *testing.T, b books) {
			msgs := b.rdb.XRevRangeN(ctx, b.journal, "+", "-", 1).Val()
			require.NoError(t, b.rdb.XDel(ctx, b.journal, msgs[0].ID).Err())
		}, "journal ends at levels"},
		{"the SKU hash rolled back to an older copy", func(ctx context.Context, t *testing.T, b books) {
			old := b.rdb.Dump(ctx, b.sku).Val()
			_, err := b.inv.Deduct(ctx, order("after-dump", "u2", "s", 2))
			require.NoError(t, err)
			require.NoError(t, b.rdb.RestoreReplace(ctx, b.sku, 0, old).Err())
		}, "journal ends at levels"},
		{"a checkpoint written over drift", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.HSet(ctx, b.sku, "sold", "0", "available", "12").Err())
			_, err := b.inv.Checkpoint(ctx, "s")
			require.ErrorIs(t, err, stock.ErrMismatch)
			// The script run on its own refuses too.
			err = redis.NewScript(stock.Scripts()["checkpoint.lua"]).Run(ctx, b.rdb, []string{b.sku, b.journal}, "s").Err()
			require.ErrorContains(t, err, "DRIFT")
		}, "journal ends at levels"},
		{"the last checkpoint's entry removed", func(ctx context.Context, t *testing.T, b books) {
			ckpt, err := b.inv.Checkpoint(ctx, "s")
			require.NoError(t, err)
			_, err = b.inv.Deduct(ctx, order("after-ckpt", "u2", "s", 1))
			require.NoError(t, err)
			require.NoError(t, b.rdb.XDel(ctx, b.journal, ckpt).Err())
		}, "not with checkpoint"},
		{"a hold removed, its units still reserved", func(ctx context.Context, t *testing.T, b books) {
			m := b.rdb.ZRange(ctx, b.holds, 0, 0).Val()
			require.NoError(t, b.rdb.ZRem(ctx, b.holds, m[0]).Err())
		}, "holds add up to"},
		{"a level that is not a number (scripts would fail on it)", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.HSet(ctx, b.sku, "refunded", "").Err())
		}, `refunded is "", not a whole number`},
		{"a hold added", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.ZAdd(ctx, b.holds, redis.Z{Score: 1, Member: "4 u9 forged"}).Err())
		}, "holds add up to"},
		{"the reserved count apart from the holds, books balanced", func(ctx context.Context, t *testing.T, b books) {
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "reserved", 1).Err())
			require.NoError(t, b.rdb.HIncrBy(ctx, b.sku, "available", -1).Err())
		}, "holds add up to"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			inv, rdb, prefix := newInventory(t, stock.WithReclaimInterval(0))
			ctx := t.Context()
			require.NoError(t, inv.Create(ctx, "s", 10))
			_, err := inv.Restock(ctx, "r1", "s", 5)
			require.NoError(t, err)
			_, err = inv.Deduct(ctx, order("o1", "u1", "s", 3))
			require.NoError(t, err)
			for i := range 2 {
				_, err = inv.Reserve(ctx, order(fmt.Sprintf("h%d", i), "u1", "s", 1), time.Hour)
				require.NoError(t, err)
			}
			audited(t, inv, "s")
			b := books{inv: inv, rdb: rdb, sku: prefix + ":stock:v1:{s}:sku:s", journal: prefix + ":stock:v1:{s}:journal:s",
				holds: prefix + ":stock:v1:{s}:holds:s"}
			row.tamper(ctx, t, b)
			rep, err := inv.Audit(ctx, "s")
			require.NoError(t, err)
			require.False(t, rep.OK(), "tampering not detected")
			found := false
			for _, p := range rep.Problems {
				found = found || strings.Contains(p, row.want)
			}
			require.True(t, found, "want a problem with %q, got %v", row.want, rep.Problems)
			require.ErrorIs(t, inv.Verify(ctx, "s"), stock.ErrMismatch)
		})
	}
}

func bump(v any) string {
	var n int64
	_, _ = fmt.Sscan(fmt.Sprint(v), &n)
	return fmt.Sprint(n + 1)
}

// On a SKU split into buckets, a bucket whose hash is gone is a finding of
// the audit (ErrMismatch from Verify), not a SKU never created.
func TestAudit_bucketHashGone(t *testing.T) {
	inv, rdb, prefix := newInventory(t)
	ctx := t.Context()
	require.NoError(t, inv.Create(ctx, "g/s", 12, stock.WithBuckets(3)))
	require.NoError(t, inv.Verify(ctx, "g/s"))
	require.NoError(t, rdb.Del(ctx, prefix+":stock:v1:{g#1}:sku:g/s").Err())
	rep, err := inv.Audit(ctx, "g/s")
	require.NoError(t, err)
	require.Contains(t, rep.Problems, "bucket 1: the bucket's hash is missing")
	require.ErrorIs(t, inv.Verify(ctx, "g/s"), stock.ErrMismatch)
}
