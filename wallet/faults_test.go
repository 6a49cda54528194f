package wallet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// proxied returns a Ledger whose client reaches the shared server through
// a fault proxy, with go-redis' own retries off, and a direct client.
func proxied(t *testing.T, readTimeout time.Duration, opts ...wallet.Option) (*wallet.Ledger, *redistest.Proxy, *redis.Client, string) {
	t.Helper()
	_, direct, prefix := newLedger(t)
	px := redistest.NewProxy(t, shared.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, append([]wallet.Option{wallet.WithKeyPrefix(prefix)}, opts...)...)
	return led, px, direct, prefix
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, "condition not reached in 10s")
}

func TestLedger_Debit_ownRetryAfterTimeoutIsNotReplayed(t *testing.T) {
	ctx := t.Context()
	led, px, direct, prefix := proxied(t, 200*time.Millisecond, wallet.WithRetry(3, 400*time.Millisecond, 400*time.Millisecond))
	openFunded(t, led, map[string]int64{"a": 100})

	// The first attempt runs but its reply comes too late; the Ledger's
	// second attempt (same nonce) finds the marker and reports the first
	// result as its own.
	px.HoldReplies(time.Hour)
	done := make(chan struct{})
	var res wallet.Result
	var err error
	go func() {
		defer close(done)
		res, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 30})
	}()
	waitFor(t, func() bool { return direct.Exists(ctx, prefix+":wallet:v2:{a}:tx:d1").Val() == 1 })
	px.HoldReplies(0)
	<-done
	require.NoError(t, err)
	require.False(t, res.Replayed, "the Ledger's own retry is not a replay")
	require.Equal(t, int64(70), res.Balance.Posted)

	ents, _, err := led.Entries(ctx, "a", "", 100)
	require.NoError(t, err)
	require.Len(t, ents, 3, "applied once")
}

func TestLedger_Credit_unknownOutcomeResolvedByCallingAgain(t *testing.T) {
	ctx := t.Context()
	led, px, _, _ := proxied(t, 100*time.Millisecond)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))

	px.DropReplies(true)
	tx := wallet.Tx{ID: "c1", Account: "a", Amount: 100}
	_, err := led.Credit(ctx, tx)
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	var ne interface{ Timeout() bool }
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "joined with the cause: %v", err)
	px.DropReplies(false)

	res, err := led.Credit(ctx, tx)
	require.NoError(t, err)
	require.True(t, res.Replayed, "the earlier call applied it")
	require.Equal(t, int64(100), res.Balance.Posted)
	require.Equal(t, int64(100), balanceOf(t, led, "a").Posted)
}

func TestLedger_Debit_goRedisRetryAfterTimeoutAppliesOnce(t *testing.T) {
	ctx := t.Context()
	_, direct, prefix := newLedger(t)
	px := redistest.NewProxy(t, shared.Addr())
	// go-redis' defaults: MaxRetries 3, a timed-out EVALSHA is sent again.
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond,
		MinRetryBackoff: 300 * time.Millisecond, MaxRetryBackoff: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	openFunded(t, led, map[string]int64{"a": 100})

	px.HoldReplies(time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 100})
		done <- err
	}()
	waitFor(t, func() bool { return direct.Exists(ctx, prefix+":wallet:v2:{a}:tx:d1").Val() == 1 })
	px.HoldReplies(0)
	require.NoError(t, <-done)
	require.Zero(t, balanceOf(t, led, "a").Posted)
	require.NoError(t, led.Verify(ctx, "a"))
}
