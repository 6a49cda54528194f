package wallet_test

import (
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
	led := wallet.New(rdb, wallet.WithReplicaAck(1, time.Second))
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
