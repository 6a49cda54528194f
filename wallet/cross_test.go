package wallet_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

func TestLedger_Transfer_acrossGroups(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"a/src": 100, "b/dst": 0})
	tr := wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30, Memo: "rent"}
	res, err := led.Transfer(ctx, tr)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, wallet.Balance{Posted: 70, Available: 70, Currency: "CNY"}, res.Balance)
	require.Equal(t, wallet.Balance{Posted: 30, Available: 30, Currency: "CNY"}, res.To)
	require.NotEmpty(t, res.EntryID)
	require.NotEmpty(t, res.ToEntryID)

	again, err := led.Transfer(ctx, tr)
	requireReplay(t, res, again, err)
	var ce *wallet.ConflictError
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 31, Memo: "rent"})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "amount", ce.Field)
	_, err = led.Debit(ctx, wallet.Tx{ID: "x1", Account: "a/src", Amount: 30})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "kind", ce.Field)

	require.Equal(t, []string{"open", "credit", "transfer_hold", "transfer_out"}, kinds(t, led, "a/src"))
	require.Equal(t, []string{"open", "transfer_in"}, kinds(t, led, "b/dst"))
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x2", From: "a/src", To: "b/dst", Amount: 71})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)

	tb := trialOf(t, led, "a/src", "b/dst")
	require.Zero(t, tb.NetTransfers())
	require.True(t, tb.Balanced())
	require.NoError(t, led.Verify(ctx, "a/src"))
	require.NoError(t, led.Verify(ctx, "b/dst"))
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing in flight")
}

func TestLedger_Transfer_acrossGroups_destinationRefusesAndHoldIsReleased(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"a/src": 100, "b/closed": 0})
	require.NoError(t, led.Open(ctx, "c/usd", wallet.WithCurrency("USD")))
	require.NoError(t, led.CloseAccount(ctx, "b/closed"))
	for to, want := range map[string]error{"b/closed": wallet.ErrAccountClosed, "c/usd": wallet.ErrCurrencyMismatch,
		"d/none": wallet.ErrAccountNotFound} {
		tr := wallet.Transfer{ID: "to-" + to, From: "a/src", To: to, Amount: 40}
		res, err := led.Transfer(ctx, tr)
		require.ErrorIs(t, err, want, to)
		require.Equal(t, int64(100), res.Balance.Posted)
		require.Zero(t, res.Balance.Held, "the hold was released")
		_, err = led.Transfer(ctx, tr)
		require.ErrorIs(t, err, want, "stays refused")
	}
	require.Equal(t, wallet.Balance{Posted: 100, Available: 100, Currency: "CNY"}, balanceOf(t, led, "a/src"))
	require.NoError(t, led.Verify(ctx, "a/src"))
}

// A process that dies after any step leaves the transfer in flight;
// Recover (or a call with the same ID) finishes it, once: never both posted
// and voided, no money created or destroyed.
func TestLedger_Transfer_acrossGroups_crashAfterEachStep(t *testing.T) {
	ctx := t.Context()
	for _, dest := range []string{"open", "closed"} {
		for step := 1; step <= 4; step++ {
			for _, finish := range []string{"recover", "retry"} {
				t.Run(fmt.Sprintf("%s/step%d/%s", dest, step, finish), func(t *testing.T) {
					led, _, _ := newLedger(t)
					openFunded(t, led, map[string]int64{"a/src": 100, "b/dst": 5})
					tr := wallet.Transfer{ID: "x", From: "a/src", To: "b/dst", Amount: 60}
					if dest == "closed" {
						_, err := led.TransferSteps(ctx, tr, 1)
						require.NoError(t, err)
						require.NoError(t, led.CloseAccount(ctx, "b/dst"))
						if step > 1 {
							_, err = led.TransferSteps(ctx, tr, step)
							if step >= 3 { // finished (voided), cleanup steps cut short
								require.ErrorIs(t, err, wallet.ErrAccountClosed)
							} else {
								require.NoError(t, err)
							}
						}
					} else {
						_, err := led.TransferSteps(ctx, tr, step)
						require.NoError(t, err)
					}
					if step <= 2 {
						require.Equal(t, int64(60), balanceOf(t, led, "a/src").Held, "in flight: held on the source")
					}
					// The source hold of a transfer never expires.
					if finish == "recover" {
						n, err := led.Recover(ctx)
						require.NoError(t, err)
						require.Equal(t, 1, n)
					} else {
						_, err := led.Transfer(ctx, tr)
						if dest == "closed" {
							require.ErrorIs(t, err, wallet.ErrAccountClosed)
						} else {
							require.NoError(t, err)
						}
					}
					n, err := led.Recover(ctx)
					require.NoError(t, err)
					require.Zero(t, n, "converged")

					src := balanceOf(t, led, "a/src")
					dst := balanceOf(t, led, "b/dst")
					require.Zero(t, src.Held)
					require.Equal(t, int64(105), src.Posted+dst.Posted, "no money created or destroyed")
					sk := kinds(t, led, "a/src")
					if dest == "open" {
						require.Equal(t, int64(40), src.Posted)
						require.Equal(t, []string{"open", "credit", "transfer_hold", "transfer_out"}, sk)
						require.Equal(t, []string{"open", "credit", "transfer_in"}, kinds(t, led, "b/dst"))
						res, err := led.Transfer(ctx, tr)
						require.NoError(t, err)
						require.Equal(t, int64(65), res.To.Posted)
					} else {
						require.Equal(t, int64(100), src.Posted)
						require.Equal(t, []string{"open", "credit", "transfer_hold", "transfer_void"}, sk)
						_, err := led.Transfer(ctx, tr)
						require.ErrorIs(t, err, wallet.ErrAccountClosed)
					}
					require.NoError(t, led.Verify(ctx, "a/src"))
					require.NoError(t, led.Verify(ctx, "b/dst"))
				})
			}
		}
	}
}

// Live cross-group transfers while Recover runs in a loop: each applied
// once.
func TestLedger_Transfer_acrossGroupsWithRecover_ConcurrentSafe(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	accounts := map[string]int64{"a/1": 1000, "b/1": 1000, "c/1": 1000, "d/1": 1000}
	openFunded(t, led, accounts)
	names := []string{"a/1", "b/1", "c/1", "d/1"}
	stopRecover := keepCalling(func(int) error {
		_, err := led.Recover(ctx)
		return err
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				tr := wallet.Transfer{ID: fmt.Sprintf("w%d-%d", w, i), From: names[(w+i)%4], To: names[(w+i+1)%4], Amount: int64(1 + i%7)}
				steps := 1 + (i % 5) // some calls "crash" midway
				if _, err := led.TransferSteps(ctx, tr, steps); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, stopRecover())
	_, err := led.Recover(ctx)
	require.NoError(t, err)
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	var total int64
	for _, a := range names {
		seen := map[string]int{}
		for _, e := range entriesOf(t, led, a) {
			if e.Kind == wallet.KindTransferIn || e.Kind == wallet.KindTransferOut {
				seen[e.TxID+e.Kind]++
				require.Equal(t, 1, seen[e.TxID+e.Kind], "%s applied twice on %s", e.TxID, a)
			}
		}
		bal := balanceOf(t, led, a)
		require.Zero(t, bal.Held)
		total += bal.Posted
		require.NoError(t, led.Verify(ctx, a))
	}
	require.Equal(t, int64(4000), total)
	require.Zero(t, trialOf(t, led, names...).NetTransfers())
}

func TestLedger_WithRecovery_finishesInFlightTransfers(t *testing.T) {
	ctx := t.Context()
	crashed, rdb, prefix := newLedger(t)
	openFunded(t, crashed, map[string]int64{"a/src": 100, "b/dst": 0})
	_, err := crashed.TransferSteps(ctx, wallet.Transfer{ID: "x", From: "a/src", To: "b/dst", Amount: 10}, 2)
	require.NoError(t, err)

	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix), wallet.WithRecovery(time.Second))
	defer led.Close()
	waitFor(t, func() bool {
		bal, err := led.Balance(ctx, "a/src")
		return err == nil && bal.Posted == 90 && bal.Held == 0
	})
	require.NoError(t, led.Close())
}
