package wallet_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// Verify catches tampering of each kind: a balance or a running total
// changed, a journal entry added or removed, the account hash rolled back
// to an older copy, a checkpoint written over drift.
func TestLedger_Verify_detectsTamperingOfEachKind(t *testing.T) {
	type keys struct{ acct, journal string }
	for _, tc := range []struct {
		name string
		// tamper changes the account's data behind the Ledger's back;
		// before runs ahead of the last posting (for a rollback).
		before func(t *testing.T, rdb *redis.Client, k keys) any
		tamper func(t *testing.T, led *wallet.Ledger, rdb *redis.Client, k keys, saved any)
	}{
		{name: "posted changed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "posted", 5).Err())
		}},
		{name: "posted and credits changed together", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "posted", 5).Err())
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "cr", 5).Err())
		}},
		{name: "held changed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "held", -3).Err())
		}},
		{name: "credits and debits both changed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "cr", 5000).Err())
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "db", 5000).Err())
		}},
		{name: "transfer totals both changed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "tin", 7).Err())
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "tout", 7).Err())
		}},
		{name: "entry added", tamper: func(t *testing.T, led *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			b := balanceOf(t, led, "g/a")
			require.NoError(t, rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: k.journal, Values: []any{
				"tx", "forged", "kind", "credit", "delta", "0", "hdelta", "0", "posted", b.Posted, "held", b.Held}}).Err())
		}},
		{name: "middle entry removed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			ents := rdb.XRange(t.Context(), k.journal, "-", "+").Val()
			require.NoError(t, rdb.XDel(t.Context(), k.journal, ents[2].ID).Err())
		}},
		{name: "last entry removed", tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			ents := rdb.XRange(t.Context(), k.journal, "-", "+").Val()
			require.NoError(t, rdb.XDel(t.Context(), k.journal, ents[len(ents)-1].ID).Err())
		}},
		{name: "hash rolled back to an older copy",
			before: func(t *testing.T, rdb *redis.Client, k keys) any {
				return rdb.Dump(t.Context(), k.acct).Val()
			},
			tamper: func(t *testing.T, _ *wallet.Ledger, rdb *redis.Client, k keys, saved any) {
				require.NoError(t, rdb.RestoreReplace(t.Context(), k.acct, 0, saved.(string)).Err())
			}},
		{name: "checkpoint over drift", tamper: func(t *testing.T, led *wallet.Ledger, rdb *redis.Client, k keys, _ any) {
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "posted", -2).Err())
			require.NoError(t, rdb.HIncrBy(t.Context(), k.acct, "db", 2).Err())
			_, _, err := led.Checkpoint(t.Context(), "g/a")
			require.ErrorIs(t, err, wallet.ErrMismatch, "no checkpoint is written over drift")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			led, rdb, prefix := newLedger(t)
			k := keys{prefix + ":wallet:v2:{g}:acct:g/a", prefix + ":wallet:v2:{g}:journal:g/a"}
			history(t, ctx, led)
			require.NoError(t, led.Verify(ctx, "g/a"), "clean before")
			var saved any
			if tc.before != nil {
				saved = tc.before(t, rdb, k)
			}
			_, err := led.Debit(ctx, wallet.Tx{ID: "last", Account: "g/a", Amount: 4})
			require.NoError(t, err)
			tc.tamper(t, led, rdb, k, saved)
			err = led.Verify(ctx, "g/a")
			require.ErrorIs(t, err, wallet.ErrMismatch)
			t.Logf("%v", err)
		})
	}
}

// history gives g/a one entry of every kind that moves money.
func history(t *testing.T, ctx context.Context, led *wallet.Ledger) {
	t.Helper()
	openFunded(t, led, map[string]int64{"g/a": 0, "g/b": 50, "h/c": 50})
	for _, step := range []func() (wallet.Result, error){
		func() (wallet.Result, error) {
			return led.Credit(ctx, wallet.Tx{ID: "c1", Account: "g/a", Amount: 100})
		},
		func() (wallet.Result, error) { return led.Debit(ctx, wallet.Tx{ID: "d1", Account: "g/a", Amount: 30}) },
		func() (wallet.Result, error) {
			return led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "g/a", Amount: 10, TTL: time.Minute})
		},
		func() (wallet.Result, error) { return led.Capture(ctx, "g/a", "h1", 6) },
		func() (wallet.Result, error) {
			return led.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "g/a", Amount: 3, TTL: time.Minute})
		},
		func() (wallet.Result, error) {
			return led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g/a", To: "g/b", Amount: 5})
		},
		func() (wallet.Result, error) {
			return led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "g/b", To: "g/a", Amount: 9})
		},
		func() (wallet.Result, error) {
			return led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "g/a", To: "h/c", Amount: 7})
		},
		func() (wallet.Result, error) {
			return led.Transfer(ctx, wallet.Transfer{ID: "x2", From: "h/c", To: "g/a", Amount: 11})
		},
	} {
		_, err := step()
		require.NoError(t, err)
	}
}
