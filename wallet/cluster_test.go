package wallet_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// The same calls on a Cluster: every script's keys share their account's
// slot, and replica acknowledgement waits on that slot's primary.
func TestLedger_onCluster(t *testing.T) {
	ctx := t.Context()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.ReadTimeout = 3 * time.Second })
	led := mustNew(t, rdb, wallet.WithReplicaAck(1, time.Second))
	defer led.Close()
	groups := []string{"shop-1", "shop-2", "shop-3", "shop-4", "shop-5", "shop-6"}
	for _, g := range groups {
		require.NoError(t, led.Open(ctx, g+"/alice", wallet.WithCurrency("CNY")))
		require.NoError(t, led.Open(ctx, g+"/till", wallet.WithCurrency("CNY")))
		_, err := led.Credit(ctx, wallet.Tx{ID: g + "-c", Account: g + "/alice", Amount: 100})
		require.NoError(t, err)
		res, err := led.Transfer(ctx, wallet.Transfer{ID: g + "-t", From: g + "/alice", To: g + "/till", Amount: 40})
		require.NoError(t, err)
		require.Equal(t, int64(40), res.To.Posted)
		_, err = led.Hold(ctx, wallet.HoldReq{ID: "h", Account: g + "/alice", Amount: 60, TTL: time.Minute})
		require.NoError(t, err)
		_, err = led.Capture(ctx, g+"/alice", "h", 10)
		require.NoError(t, err)
		_, err = led.Debit(ctx, wallet.Tx{ID: g + "-d", Account: g + "/alice", Amount: 51})
		require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
		require.NoError(t, led.Verify(ctx, g+"/alice"))
		_, _, err = led.Checkpoint(ctx, g+"/alice")
		require.NoError(t, err)
		require.NoError(t, led.Verify(ctx, g+"/alice"))
	}
	// Across groups (and nodes): held, credited, posted.
	res, err := led.Transfer(ctx, wallet.Transfer{ID: "x", From: "shop-1/alice", To: "shop-2/till", Amount: 5})
	require.NoError(t, err)
	require.Equal(t, int64(45), res.Balance.Posted)
	require.Equal(t, int64(45), res.To.Posted)
	_, err = led.TransferSteps(ctx, wallet.Transfer{ID: "y", From: "shop-3/alice", To: "shop-4/till", Amount: 5}, 2)
	require.NoError(t, err)
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var accounts []string
	for _, g := range groups {
		accounts = append(accounts, g+"/alice", g+"/till")
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
	require.Equal(t, int64(6*90), tb.Posted)
	for _, a := range accounts {
		require.NoError(t, led.Verify(ctx, a))
	}
	rep, err := led.Check(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Findings, 3*2, "two findings per master")
}

// TestLedger_Cluster_underResharding: credits, debits and transfers within
// and across groups on an ordinary ClusterClient while the groups' slots
// are moved again and again (10 keys per MIGRATE with a pause: a split slot
// answers TRYAGAIN, a stale map meets MOVED and ASK). No error reaches the
// caller; every balance equals its confirmed operations, the trial balance
// nets to zero and Verify is clean.
func TestLedger_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	led := mustNew(t, rdb)
	defer led.Close()
	groups := []string{"ws1", "ws2"}
	var accounts, tags []string
	for _, g := range groups {
		tags = append(tags, "{"+g+"}")
		for _, a := range []string{"/a", "/b"} {
			require.NoError(t, led.Open(ctx, g+a, wallet.WithCurrency("CNY")))
			accounts = append(accounts, g+a)
		}
	}
	want := map[string]int64{}
	for _, a := range accounts {
		_, err := led.Credit(ctx, wallet.Tx{ID: "seed-" + a, Account: a, Amount: 1_000_000})
		require.NoError(t, err)
		want[a] = 1_000_000
	}
	stop := c.Reshard(ctx, tags, redistest.MoveOptions{Batch: 10, Pause: 20 * time.Millisecond})
	const workers, ops = 4, 40
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range workers {
		wg.Go(func() {
			for i := range ops {
				g, o := groups[(w+i)%2], groups[(w+i+1)%2]
				id := fmt.Sprintf("w%d-%d", w, i)
				var err error
				moves := map[string]int64{}
				switch i % 4 {
				case 0:
					_, err = led.Credit(ctx, wallet.Tx{ID: id, Account: g + "/a", Amount: 3})
					moves[g+"/a"] = 3
				case 1:
					_, err = led.Debit(ctx, wallet.Tx{ID: id, Account: g + "/b", Amount: 2})
					moves[g+"/b"] = -2
				case 2:
					_, err = led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/a", To: g + "/b", Amount: 5})
					moves[g+"/a"], moves[g+"/b"] = -5, 5
				case 3:
					_, err = led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/b", To: o + "/a", Amount: 7})
					moves[g+"/b"], moves[o+"/a"] = -7, 7
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
				} else {
					for a, d := range moves {
						want[a] += d
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := stop()
	require.NoError(t, st.Err)
	t.Logf("%d operations while %d slot moves migrated %d keys; %d errors", workers*ops, st.Moves, st.Keys, len(errs))
	require.Positive(t, st.Moves)
	require.Empty(t, errs, "errors returned to the caller")
	for _, a := range accounts {
		b, err := led.Balance(ctx, a)
		require.NoError(t, err)
		require.Equal(t, want[a], b.Posted, a)
		require.NoError(t, led.Verify(ctx, a))
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
}
