package wallet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// A transfer across groups whose caller was cut off midway (the port cut
// before its credit or its finish) is finished by the next call on its
// source account once it has been in flight long enough, with nobody
// calling Recover and no background worker: the amount is not left held.
func TestRegress_Transfer_acrossGroups_cutCallerFinishedWithoutRecover(t *testing.T) {
	for _, step := range []struct {
		name  string
		match func([]any) bool
	}{{"cut before the credit", isCredit}, {"cut before the finish", isFinish}} {
		for _, next := range []struct {
			name       string
			call       func(ctx context.Context, led *wallet.Ledger, n int) error
			wantPosted int64
		}{
			{"Balance", func(ctx context.Context, led *wallet.Ledger, n int) error {
				_, err := led.Balance(ctx, "a/src")
				return err
			}, 70},
			{"Debit", func(ctx context.Context, led *wallet.Ledger, n int) error {
				_, err := led.Debit(ctx, wallet.Tx{ID: "d" + strconv.Itoa(n), Account: "a/src", Amount: 1})
				return err
			}, -1}, // one unit per Debit made: checked below
			{"Transfer in the group", func(ctx context.Context, led *wallet.Ledger, n int) error {
				_, err := led.Transfer(ctx, wallet.Transfer{ID: "t" + strconv.Itoa(n), From: "a/src", To: "a/till", Amount: 1})
				return err
			}, -1},
		} {
			t.Run(step.name+"/"+next.name, func(t *testing.T) {
				ctx := t.Context()
				_, rdb, prefix := newLedger(t)
				px := redistest.NewProxy(t, shared.Addr())
				cut := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
				cut.AddHook(&stepHook{match: step.match, before: func(context.Context) { require.NoError(t, px.Cut(true)) }})
				t.Cleanup(func() { _ = cut.Close() })
				caller := mustNew(t, cut, wallet.WithKeyPrefix(prefix))
				other := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
				wallet.SetStaleTransferAge(other, 300*time.Millisecond, 0)
				t.Cleanup(func() { _ = caller.Close(); _ = other.Close() })
				openFunded(t, other, map[string]int64{"a/src": 100, "a/till": 0, "b/dst": 0})

				_, err := caller.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30})
				require.ErrorIs(t, err, wallet.ErrUnknownOutcome, "%v", err)
				// In flight (read directly: a Ledger's read may finish it).
				require.Equal(t, "30", rdb.HGet(ctx, prefix+":wallet:v2:{a}:acct:a/src", "held").Val())
				require.Equal(t, int64(1), rdb.ZCard(ctx, prefix+":wallet:v2:{a}:xpend").Val())

				calls := 0
				waitFor(t, func() bool {
					calls++
					require.NoError(t, next.call(ctx, other, calls))
					return balanceOf(t, other, "a/src").Held == 0
				})
				src, dst := balanceOf(t, other, "a/src"), balanceOf(t, other, "b/dst")
				want := next.wantPosted
				if want < 0 {
					want = 70 - int64(calls)
				}
				require.Equal(t, want, src.Posted)
				require.Equal(t, int64(30), dst.Posted)
				require.NoError(t, other.Verify(ctx, "a/src"))
				require.NoError(t, other.Verify(ctx, "b/dst"))
				// Nothing left in flight, and the source's mark is gone.
				require.Zero(t, rdb.ZCard(ctx, prefix+":wallet:v2:{a}:xpend").Val())
				require.Zero(t, rdb.HExists(ctx, prefix+":wallet:v2:{a}:acct:a/src", "xt").Val())
			})
		}
	}
}
