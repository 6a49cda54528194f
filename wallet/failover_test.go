package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	led := wallet.New(rdb, wallet.WithReplicaAck(1, time.Second))
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
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		answered, retried int
		firstErrs         = map[string]int{}
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; runCtx.Err() == nil; i++ {
				g, o := groups[(w+i)%2], groups[(w+i+1)%2]
				id := fmt.Sprintf("f-%d-%d", w, i)
				var (
					call  func(context.Context) error
					moves map[string]int64
				)
				switch i % 4 {
				case 0:
					call = func(ctx context.Context) error {
						_, err := led.Credit(ctx, wallet.Tx{ID: id, Account: g + "/x", Amount: 3})
						return err
					}
					moves = map[string]int64{g + "/x": 3}
				case 1:
					call = func(ctx context.Context) error {
						_, err := led.Debit(ctx, wallet.Tx{ID: id, Account: g + "/y", Amount: 2})
						return err
					}
					moves = map[string]int64{g + "/y": -2}
				case 2:
					call = func(ctx context.Context) error {
						_, err := led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/x", To: g + "/y", Amount: 5})
						return err
					}
					moves = map[string]int64{g + "/x": -5, g + "/y": 5}
				case 3:
					call = func(ctx context.Context) error {
						_, err := led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/y", To: o + "/x", Amount: 7})
						return err
					}
					moves = map[string]int64{g + "/y": -7, o + "/x": 7}
				}
				for try := 0; ; try++ {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					err := call(cctx)
					cancel()
					mu.Lock()
					if err == nil {
						answered++
						for a, d := range moves {
							want[a] += d
						}
						mu.Unlock()
						break
					}
					retried++
					if try == 0 {
						switch {
						case errors.Is(err, wallet.ErrUnknownOutcome):
							firstErrs["outcome unknown"]++
						case errors.Is(err, wallet.ErrReplicaAck):
							firstErrs["replica ack not reached"]++
						default:
							firstErrs[err.Error()]++
						}
					}
					mu.Unlock()
					require.Less(t, try, 50, "%s never answered: %v", id, err)
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	faults := 0
	for range chaosScale() {
		for _, g := range groups {
			n, err := c.FaultRound(ctx, "{"+g+"}", 300*time.Millisecond)
			faults += n
			require.NoError(t, err)
		}
	}
	stopLoad()
	wg.Wait()
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
	t.Logf("%d faults: %d operations answered, %d calls failed and were called again; first errors: %v", faults, answered, retried, firstErrs)
	t.Logf("chaos table | wallet Credit/Debit/Transfer | %d | %d | %d | %d", answered, faults, retried, broken)
	require.Zero(t, tb.NetTransfers())
}
