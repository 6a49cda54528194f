package wallet_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// TestChaos_Cluster_failover: Credit, Debit, Transfer within a group and
// across groups, with replica acknowledgement, on an ordinary ClusterClient
// while the shards of both groups are failed over again and again
// (CLUSTER FAILOVER plain, FORCE and TAKEOVER, a master killed with SIGKILL
// and its replica promoted, the slot migrated). A caller that gets an error
// calls again with the same ID until it is answered: every operation is
// answered in the end, each balance equals its answered operations (none
// lost, none applied twice), Verify finds nothing and the transfers across
// groups net to zero.
func TestChaos_Cluster_failover(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	led := mustNew(t, rdb, wallet.WithReplicaAck(1, time.Second))
	defer led.Close()
	groups := []string{"fa", "fb"}
	want := map[string]int64{}
	var accounts []string
	for _, g := range groups {
		for _, a := range []string{"/x", "/y"} {
			require.NoError(t, led.Open(ctx, g+a, wallet.WithCurrency("CNY")))
			_, err := led.Credit(ctx, wallet.Tx{ID: "seed-" + g + a, Account: g + a, Amount: 1_000_000})
			require.NoError(t, err)
			accounts = append(accounts, g+a)
			want[g+a] = 1_000_000
		}
	}
	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": wallet.ErrUnknownOutcome, "replica ack not reached": wallet.ErrReplicaAck}}
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; runCtx.Err() == nil; i++ {
				g, o := groups[(w+i)%2], groups[(w+i+1)%2]
				id := fmt.Sprintf("f-%d-%d", w, i)
				tr := wallet.Transfer{ID: id, From: g + "/x", To: g + "/y", Amount: 5}
				switch i % 4 {
				case 0:
					tr = wallet.Transfer{ID: id, To: g + "/x", Amount: 3}
				case 1:
					tr = wallet.Transfer{ID: id, From: g + "/y", Amount: 2}
				case 3:
					tr = wallet.Transfer{ID: id, From: g + "/y", To: o + "/x", Amount: 7}
				}
				ok, err := answers.Call(ctx, func(ctx context.Context) error {
					var err error
					switch {
					case tr.From == "":
						_, err = led.Credit(ctx, wallet.Tx{ID: id, Account: tr.To, Amount: tr.Amount})
					case tr.To == "":
						_, err = led.Debit(ctx, wallet.Tx{ID: id, Account: tr.From, Amount: tr.Amount})
					default:
						_, err = led.Transfer(ctx, tr)
					}
					return err
				})
				if !ok {
					t.Errorf("%s never answered: %v", id, err)
					return
				}
				mu.Lock()
				want[tr.From] -= tr.Amount
				want[tr.To] += tr.Amount
				mu.Unlock()
			}
		})
	}
	faults, err := c.FaultRounds(ctx, chaosScale(), 300*time.Millisecond, "{fa}", "{fb}")
	stopLoad()
	wg.Wait()
	require.NoError(t, err)
	broken := 0
	for _, a := range accounts {
		b, err := led.Balance(ctx, a)
		require.NoError(t, err)
		if b.Posted != want[a] || b.Held != 0 || led.Verify(ctx, a) != nil {
			broken++
		}
		require.Equal(t, want[a], b.Posted, a)
		require.Zero(t, b.Held, a)
		require.NoError(t, led.Verify(ctx, a))
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	t.Logf("%d faults: %d operations answered, %d calls failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | wallet Credit/Debit/Transfer | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), broken)
	require.Zero(t, tb.NetTransfers())
}
