package wallet_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// The user in wallet/redis.acl can run everything the package does and
// nothing else; Check, refused CONFIG GET, reports unknown settings instead
// of failing.
func TestACL_redisACL_leastPrivilege(t *testing.T) {
	s, password := redistest.NewWithACL(t, "redis.acl")
	rdb := s.Client(func(o *redis.Options) { o.Username, o.Password = "redkit-wallet", password })
	admin := s.Client()
	ctx := t.Context()
	led := mustNew(t, rdb, wallet.WithRecovery(time.Second))
	t.Cleanup(func() { _ = led.Close() })

	const alice, till, bob = "shop-7/alice", "shop-7/till", "shop-8/bob"
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("CNY"), wallet.WithOverdraft(10)))
	}
	_, err := led.Credit(ctx, wallet.Tx{ID: "tx-1", Account: alice, Amount: 1000, Memo: "top-up"})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "tx-2", Account: alice, Amount: 100, Currency: "CNY"})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "tx-3", Account: alice, Amount: 100000})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "tx-4", From: alice, To: till, Amount: 50})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "tx-5", From: alice, To: bob, Amount: 60}) // two-phase
	require.NoError(t, err)
	for _, r := range led.TransferBatch(ctx, []wallet.Transfer{{ID: "tx-6", From: alice, To: till, Amount: 1}}) {
		require.NoError(t, r.Err)
	}
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h-1", Account: alice, Amount: 70, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Capture(ctx, alice, "h-1", 30)
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h-2", Account: alice, Amount: 70, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Void(ctx, alice, "h-2", wallet.WithFence(lock.Fence{Name: "shop-7/payouts", Token: 7}))
	require.NoError(t, err)
	require.NoError(t, admin.ScriptFlush(ctx).Err()) // the next scripts are loaded again
	_, err = led.Credit(ctx, wallet.Tx{ID: "tx-7", Account: bob, Amount: 5})
	require.NoError(t, err)
	_, err = led.Recover(ctx)
	require.NoError(t, err)
	_, err = led.Balance(ctx, alice)
	require.NoError(t, err)
	_, _, err = led.Entries(ctx, alice, "", 100)
	require.NoError(t, err)
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Verify(ctx, a))
		_, _, err = led.Checkpoint(ctx, a)
		require.NoError(t, err)
	}
	trial, err := led.TrialBalance(ctx, alice, till)
	require.NoError(t, err)
	require.True(t, trial.Balanced())
	require.NoError(t, led.CloseAccount(ctx, till))
	acked := mustNew(t, rdb, wallet.WithReplicaAck(1, 10*time.Millisecond)) // WAIT: no replica acknowledges
	_, err = acked.Credit(ctx, wallet.Tx{ID: "tx-8", Account: bob, Amount: 5})
	require.ErrorIs(t, err, wallet.ErrReplicaAck)
	require.NoError(t, acked.Close())

	rep, err := led.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	require.NotEmpty(t, rep.Findings)
	for _, f := range rep.Findings {
		require.Equal(t, health.Unknown, f.Severity, "%+v", f)
	}
	if testing.Verbose() {
		t.Log(admin.Info(ctx, "commandstats").Val())
	}

	redistest.RequireLeastPrivilege(t, rdb, "redkit:stock:v1:{x}:sku:x", map[string]error{
		"DEL of an account": rdb.Del(ctx, "redkit:wallet:v2:{shop-7}:acct:"+alice).Err(),
	})
}
