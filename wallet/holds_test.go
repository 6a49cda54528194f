package wallet_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

func TestLedger_Hold_captureReleasesTheRest(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"a": 100})

	res, err := led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "a", Amount: 70, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: 100, Held: 70, Available: 30, Currency: "CNY"}, res.Balance)
	require.True(t, res.Expires.After(res.Time))

	_, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 31})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds, "held funds are not available")
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "a", Amount: 31, TTL: time.Minute})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds, "a hold is checked against available")

	_, err = led.Capture(ctx, "a", "h1", 71)
	require.ErrorIs(t, err, wallet.ErrInvalid, "more than held")
	capRes, err := led.Capture(ctx, "a", "h1", 50)
	require.NoError(t, err)
	require.False(t, capRes.Replayed)
	require.Equal(t, wallet.Balance{Posted: 50, Held: 0, Available: 50, Currency: "CNY"}, capRes.Balance)

	again, err := led.Capture(ctx, "a", "h1", 50)
	requireReplay(t, capRes, again, err)

	var ce *wallet.ConflictError
	_, err = led.Capture(ctx, "a", "h1", 40)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "amount", ce.Field)
	_, err = led.Void(ctx, "a", "h1")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "resolution", ce.Field)
	_, err = led.Capture(ctx, "a", "nope", 1)
	require.ErrorIs(t, err, wallet.ErrHoldNotFound)
	_, err = led.Void(ctx, "a", "h2")
	require.ErrorIs(t, err, wallet.ErrHoldNotFound, "a refused hold cannot be resolved")

	require.Equal(t, wallet.Balance{Posted: 50, Available: 50, Currency: "CNY"}, balanceOf(t, led, "a"))
	ents, _, err := led.Entries(ctx, "a", "", 100)
	require.NoError(t, err)
	last := ents[len(ents)-1]
	require.Equal(t, wallet.Entry{ID: last.ID, TxID: "h1", Kind: wallet.KindCapture, Delta: -50, HeldDelta: -70,
		Posted: 50, Time: last.Time}, last)
	require.NoError(t, led.Verify(ctx, "a"))
	require.True(t, trialOf(t, led, "a").Balanced())
}

func TestLedger_Hold_voidAndIdempotency(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"a": 100})
	req := wallet.HoldReq{ID: "h1", Account: "a", Amount: 60, TTL: time.Minute, Memo: "order 7"}
	first, err := led.Hold(ctx, req)
	require.NoError(t, err)
	again, err := led.Hold(ctx, req)
	requireReplay(t, first, again, err)

	var ce *wallet.ConflictError
	for field, r := range map[string]wallet.HoldReq{
		"amount": {ID: "h1", Account: "a", Amount: 61, TTL: time.Minute, Memo: "order 7"},
		"ttl":    {ID: "h1", Account: "a", Amount: 60, TTL: time.Hour, Memo: "order 7"},
		"memo":   {ID: "h1", Account: "a", Amount: 60, TTL: time.Minute},
	} {
		_, err := led.Hold(ctx, r)
		require.ErrorAs(t, err, &ce, field)
		require.Equal(t, field, ce.Field)
	}

	v, err := led.Void(ctx, "a", "h1")
	require.NoError(t, err)
	require.Equal(t, int64(0), v.Balance.Held)
	v2, err := led.Void(ctx, "a", "h1")
	require.NoError(t, err)
	require.True(t, v2.Replayed)
	_, err = led.Capture(ctx, "a", "h1", 10)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "resolution", ce.Field)

	// A refused hold stays refused.
	refused := wallet.HoldReq{ID: "h2", Account: "a", Amount: 500, TTL: time.Minute}
	_, err = led.Hold(ctx, refused)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c2", Account: "a", Amount: 1000})
	require.NoError(t, err)
	_, err = led.Hold(ctx, refused)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)

	for _, bad := range []wallet.HoldReq{
		{ID: "x", Account: "a", Amount: 0, TTL: time.Minute},
		{ID: "x", Account: "a", Amount: 1, TTL: time.Millisecond},
		{ID: "x", Account: "a", Amount: 1, TTL: 8 * 24 * time.Hour},
		{ID: "x y", Account: "a", Amount: 1, TTL: time.Minute},
	} {
		_, err := led.Hold(ctx, bad)
		require.ErrorIs(t, err, wallet.ErrInvalid)
	}
	_, err = led.Capture(ctx, "a", "h1", 0)
	require.ErrorIs(t, err, wallet.ErrInvalid)
	require.NoError(t, led.Verify(ctx, "a"))
}

// expiringHold opens account a with 100 and places on it hold h1 of n,
// which expires in a second.
func expiringHold(t *testing.T, led *wallet.Ledger, n int64) {
	t.Helper()
	openFunded(t, led, map[string]int64{"a": 100})
	_, err := led.Hold(t.Context(), wallet.HoldReq{ID: "h1", Account: "a", Amount: n, TTL: time.Second})
	require.NoError(t, err)
}

// An expired hold is released by the next call on its account (here
// another Ledger's, so no reclaimer is involved) and cannot be captured.
func TestLedger_Hold_expiresOnServerClockLazily(t *testing.T) {
	ctx := t.Context()
	placer, rdb, prefix := newLedger(t)
	expiringHold(t, placer, 100)
	require.NoError(t, placer.Close())

	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	defer led.Close()
	var debited bool
	for i := 0; !debited; i++ {
		require.Less(t, i, 1000, "the hold never expired")
		_, err := led.Debit(ctx, wallet.Tx{ID: "d" + strconv.Itoa(i), Account: "a", Amount: 100})
		if err == nil {
			debited = true
			break
		}
		require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
		time.Sleep(20 * time.Millisecond)
	}
	_, err := led.Capture(ctx, "a", "h1", 100)
	require.ErrorIs(t, err, wallet.ErrHoldExpired)
	_, err = led.Void(ctx, "a", "h1")
	require.ErrorIs(t, err, wallet.ErrHoldExpired)
	require.Equal(t, []string{"open", "credit", "hold", "hold_expire", "debit"}, kinds(t, led, "a"))
	require.NoError(t, led.Verify(ctx, "a"))
}

// The reclaimer releases an expired hold with no call on the account.
func TestLedger_Hold_reclaimerReleases(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	expiringHold(t, led, 40)
	key := prefix + ":wallet:v2:{a}:acct:a"
	require.Equal(t, "40", rdb.HGet(ctx, key, "held").Val())
	waitFor(t, func() bool { return rdb.HGet(ctx, key, "held").Val() == "0" })
	require.NoError(t, led.Verify(ctx, "a"))
	require.NoError(t, led.Close())
	require.NoError(t, led.Close(), "Close twice is fine")
}

// Many concurrent Capture and Void calls on one hold: it resolves once.
func TestLedger_Hold_resolvesAtMostOnce_ConcurrentSafe(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"a": 1000})
	for round := range 20 {
		id := fmt.Sprintf("h%d", round)
		_, err := led.Hold(ctx, wallet.HoldReq{ID: id, Account: "a", Amount: 10, TTL: time.Minute})
		require.NoError(t, err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied := map[string]int{}
		for i := range 16 {
			wg.Go(func() {
				var res wallet.Result
				var err error
				kind := "void"
				if i%2 == 0 {
					res, err = led.Capture(ctx, "a", id, 4)
					kind = "capture"
				} else {
					res, err = led.Void(ctx, "a", id)
				}
				var ce *wallet.ConflictError
				switch {
				case err == nil && !res.Replayed:
					mu.Lock()
					applied[kind]++
					mu.Unlock()
				case err == nil, errors.As(err, &ce) && ce.Field == "resolution":
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.Len(t, applied, 1, "round %d: %v", round, applied)
		for _, n := range applied {
			require.Equal(t, 1, n)
		}
	}
	require.Zero(t, balanceOf(t, led, "a").Held)
	require.NoError(t, led.Verify(ctx, "a"))
}
