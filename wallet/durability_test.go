package wallet_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// With appendfsync always, every posting acknowledged before a kill -9 is
// there after the restart, exactly once.
func TestLedger_killRestart_noAcknowledgedPostingLost(t *testing.T) {
	runKillRestart(t, 1)
}

func TestChaos_Ledger_killRestartRepeated(t *testing.T) {
	runKillRestart(t, 20*redistest.Chaos(t))
}

// runKillRestart posts from 8 goroutines while the server is killed and
// restarted kills times, then checks every acknowledged posting.
func runKillRestart(t *testing.T, kills int) {
	ctx := t.Context()
	srv := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	led := mustNew(t, srv.Client(), wallet.WithRetry(3, 20*time.Millisecond, 100*time.Millisecond))
	accounts := []string{"k/a", "k/b", "k/c", "k/d"}
	for _, a := range accounts {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("CNY")))
	}

	var (
		mu      sync.Mutex
		acked   = map[string]int64{} // account -> sum of acknowledged deltas
		ackedTx []string
		posted  atomic.Int64
		stops   []func() error
	)
	for w := range 8 {
		stops = append(stops, keepCalling(func(i int) error {
			id := fmt.Sprintf("w%d-%d", w, i)
			a, b := accounts[(w+i)%4], accounts[(w+i+1)%4]
			amt := int64(1 + i%50)
			_, _, err := definite(ctx, func() (wallet.Result, error) {
				if i%3 == 2 {
					return led.Transfer(ctx, wallet.Transfer{ID: id, From: a, To: b, Amount: amt})
				}
				return led.Credit(ctx, wallet.Tx{ID: id, Account: a, Amount: amt})
			})
			switch {
			case err == nil:
				mu.Lock()
				if i%3 == 2 {
					acked[a] -= amt
					acked[b] += amt
				} else {
					acked[a] += amt
				}
				ackedTx = append(ackedTx, id)
				mu.Unlock()
				posted.Add(1)
			case errors.Is(err, wallet.ErrInsufficientFunds):
			default:
				return fmt.Errorf("%s: %w", id, err)
			}
			return nil
		}))
	}
	var before int64
	for range kills {
		before = posted.Load()
		waitFor(t, func() bool { return posted.Load() >= before+300 })
		require.NoError(t, srv.Kill())
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, srv.Restart(ctx))
	}
	before = posted.Load()
	waitFor(t, func() bool { return posted.Load() >= before+300 })
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	require.NoError(t, errors.Join(errs...))

	for _, a := range accounts {
		require.Equal(t, acked[a], balanceOf(t, led, a).Posted, "%s: every acknowledged posting, once", a)
		require.NoError(t, led.Verify(ctx, a))
	}
	seen := map[string]int{}
	for _, a := range accounts {
		for _, e := range entriesOf(t, led, a) {
			seen[e.TxID]++
		}
	}
	for _, id := range ackedTx {
		require.NotZero(t, seen[id], "acknowledged %s missing from the journal", id)
	}
	t.Logf("%d postings acknowledged across %d kills", len(ackedTx), kills)
}
