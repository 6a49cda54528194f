package wallet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

func TestLedger_TransferBatch(t *testing.T) {
	ctx := t.Context()
	led, rdb := oneConnLedger(t)
	funds := map[string]int64{}
	for g := range 4 {
		for a := range 2 {
			funds[fmt.Sprintf("g%d/a%d", g, a)] = 100
		}
	}
	openFunded(t, led, funds)
	var ts []wallet.Transfer
	for i := range 40 {
		g := i % 4
		ts = append(ts, wallet.Transfer{ID: fmt.Sprintf("t%d", i), From: fmt.Sprintf("g%d/a0", g),
			To: fmt.Sprintf("g%d/a1", g), Amount: 10})
	}
	ts = append(ts,
		wallet.Transfer{ID: "cross", From: "g0/a0", To: "g1/a1", Amount: 1},
		wallet.Transfer{ID: "same", From: "g0/a0", To: "g0/a0", Amount: 1},
		wallet.Transfer{ID: "t0", From: "g0/a0", To: "g0/a1", Amount: 10}, // a duplicate within the batch
	)
	openFunded(t, led, map[string]int64{"w/x": 0, "w/y": 0})
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "load", From: "w/x", To: "w/y", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds, "the script is loaded")
	rt := &roundTrips{}
	rdb.AddHook(rt)
	out := led.TransferBatch(ctx, ts)
	require.Len(t, out, len(ts))
	require.Equal(t, int64(1), rt.n.Load(), "one pipeline")
	for i := range 40 {
		require.NoError(t, out[i].Err, i)
		require.Equal(t, ts[i].ID, out[i].Result.TxID)
		require.Equal(t, int64(100-10*(i/4+1)), out[i].Result.Balance.Posted, "applied in order")
	}
	require.ErrorIs(t, out[40].Err, wallet.ErrCrossGroup)
	require.ErrorIs(t, out[41].Err, wallet.ErrSameAccount)
	require.NoError(t, out[42].Err)
	require.True(t, out[42].Result.Replayed)
	require.Equal(t, out[0].Result.Balance, out[42].Result.Balance)

	again := led.TransferBatch(ctx, ts[:4])
	for _, r := range again {
		require.NoError(t, r.Err)
		require.True(t, r.Result.Replayed)
	}
	more := led.TransferBatch(ctx, []wallet.Transfer{{ID: "over", From: "g0/a0", To: "g0/a1", Amount: 1}})
	require.ErrorIs(t, more[0].Err, wallet.ErrInsufficientFunds)
	tb := trialOf(t, led, "g0/a0", "g0/a1", "g1/a0", "g1/a1")
	require.Zero(t, tb.NetTransfers())
	require.Equal(t, int64(400), tb.Posted)
}

// A batch whose replies come too late: every transfer is retried alone with
// its ID and applied once, and none is reported as replayed.
func TestLedger_TransferBatch_retriesLostReplies(t *testing.T) {
	ctx := t.Context()
	led, px, direct, prefix := proxied(t, 200*time.Millisecond, wallet.WithRetry(3, 400*time.Millisecond, 400*time.Millisecond))
	openFunded(t, led, map[string]int64{"g/a": 100, "g/b": 0})
	var ts []wallet.Transfer
	for i := range 10 {
		ts = append(ts, wallet.Transfer{ID: fmt.Sprintf("t%d", i), From: "g/a", To: "g/b", Amount: 5})
	}
	px.HoldReplies(time.Hour)
	done := make(chan []wallet.BatchResult)
	go func() { done <- led.TransferBatch(ctx, ts) }()
	waitFor(t, func() bool { return direct.Exists(ctx, prefix+":wallet:v2:{g}:tx:t9").Val() == 1 })
	px.HoldReplies(0)
	out := <-done
	for i, r := range out {
		require.NoError(t, r.Err, i)
		require.False(t, r.Result.Replayed, i)
	}
	require.Equal(t, int64(50), balanceOf(t, led, "g/b").Posted)
	require.NoError(t, led.Verify(ctx, "g/a"))
}
