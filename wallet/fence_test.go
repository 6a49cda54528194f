package wallet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLedger_WithFence_refusesStaleToken(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"m/a": 100, "m/b": 0})

	// Two leases of one lock: the second has the higher token.
	locks, err := lock.New(rdb, lock.WithKeyPrefix(prefix))
	require.NoError(t, err)
	defer locks.Close()
	m := locks.Mutex("payout", lock.WithTTL(time.Second), lock.WithWatchdog(false))
	old, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Release(ctx))
	cur, err := m.Acquire(ctx)
	require.NoError(t, err)
	defer cur.Release(ctx)

	_, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "m/a", Amount: 10}, wallet.WithFence(cur.Fence()))
	require.NoError(t, err)
	before := keysUnder(t, rdb, prefix+":wallet")
	stale := wallet.WithFence(old.Fence())
	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "m/a", Amount: 10}, stale)
	require.ErrorIs(t, err, wallet.ErrStaleFence)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "m/a", To: "m/b", Amount: 1}, stale)
	require.ErrorIs(t, err, wallet.ErrStaleFence)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "m/a", Amount: 1, TTL: time.Minute}, stale)
	require.ErrorIs(t, err, wallet.ErrStaleFence)
	require.ElementsMatch(t, before, keysUnder(t, rdb, prefix+":wallet"), "a stale call writes nothing")

	// The same token again is the same lease writing again.
	res, err := led.Debit(ctx, wallet.Tx{ID: "d3", Account: "m/a", Amount: 10}, wallet.WithFence(cur.Fence()))
	require.NoError(t, err)
	require.Equal(t, int64(80), res.Balance.Posted)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "m/a", Amount: 5, TTL: time.Minute}, wallet.WithFence(cur.Fence()))
	require.NoError(t, err)
	_, err = led.Capture(ctx, "m/a", "h2", 5, stale)
	require.ErrorIs(t, err, wallet.ErrStaleFence)
	_, err = led.Void(ctx, "m/a", "h2", wallet.WithFence(cur.Fence()))
	require.NoError(t, err)

	// A replay of a transaction applied under the current lease is returned
	// whatever the token.
	res, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "m/a", Amount: 10}, stale)
	require.NoError(t, err)
	require.True(t, res.Replayed)

	_, err = led.Debit(ctx, wallet.Tx{ID: "d4", Account: "m/a", Amount: 1}, wallet.WithFence(lock.Fence{Name: "payout"}))
	require.ErrorIs(t, err, wallet.ErrInvalid, "token 0 (no fence) is invalid")
	require.Equal(t, strconv.FormatUint(cur.Fence().Token, 10), rdb.Get(ctx, lock.FenceKey(prefix, "m", "payout")).Val())
}

// replicaAcked starts a primary with one replica and returns them, a client
// of the primary whose read timeout (3s) is above every ack timeout the
// tests ask for, and a Ledger on it that waits for the replica
// (WithReplicaAck(1, time.Second)).
func replicaAcked(t *testing.T) (*redistest.Pair, *redis.Client, *wallet.Ledger) {
	t.Helper()
	pair := redistest.NewPair(t, redistest.Options{})
	rdb := pair.Primary.Client(func(o *redis.Options) { o.ReadTimeout = 3 * time.Second })
	led := mustNew(t, rdb, wallet.WithReplicaAck(1, time.Second))
	t.Cleanup(func() { _ = led.Close() })
	return pair, rdb, led
}

func TestLedger_WithReplicaAck(t *testing.T) {
	ctx := t.Context()
	pair, rdb, led := replicaAcked(t)
	openFunded(t, led, map[string]int64{"a": 100})
	// WAIT returned after the replica had the write: read it there.
	require.Equal(t, "100", pair.Replica.Client().HGet(ctx, "redkit:wallet:v2:{a}:acct:a", "posted").Val())

	// Asking for more replicas than exist: applied, but reported.
	more := mustNew(t, rdb, wallet.WithReplicaAck(2, 100*time.Millisecond))
	res, err := more.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 30})
	require.ErrorIs(t, err, wallet.ErrReplicaAck)
	require.Equal(t, int64(70), res.Balance.Posted, "the debit was applied")
	res, err = more.Debit(ctx, wallet.Tx{ID: "d2", Account: "a", Amount: 1000})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	require.ErrorIs(t, err, wallet.ErrReplicaAck, "a refusal is stored too: a failover may forget it")
	_, err = more.Transfer(ctx, wallet.Transfer{ID: "x1", From: "a", To: "b", Amount: 1000}) // across groups
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	require.ErrorIs(t, err, wallet.ErrReplicaAck)
	require.Equal(t, int64(70), balanceOf(t, led, "a").Posted)

	tooLong := mustNew(t, rdb, wallet.WithReplicaAck(1, 5*time.Second))
	_, err = tooLong.Credit(ctx, wallet.Tx{ID: "c2", Account: "a", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrInvalid, "the ack timeout must be below the read timeout")
}

// A transfer across slot groups never builds a step on one its replicas have
// not acknowledged: a failover could undo the hold under a credit already
// made (money created) or the credit under a source already posted (money
// destroyed). It stays in flight, the caller learns the outcome is unknown,
// and calling again finishes it once the replicas acknowledge.
func TestLedger_WithReplicaAck_transferAcrossGroupsWaitsForEachStep(t *testing.T) {
	ctx := t.Context()
	_, rdb, acked := replicaAcked(t)
	openFunded(t, acked, map[string]int64{"gx/a": 100, "gy/b": 0})

	tr := wallet.Transfer{ID: "x-1", From: "gx/a", To: "gy/b", Amount: 30}
	short := mustNew(t, rdb, wallet.WithReplicaAck(2, 100*time.Millisecond)) // one replica: never enough
	defer short.Close()
	_, err := short.Transfer(ctx, tr)
	require.ErrorIs(t, err, wallet.ErrReplicaAck)
	require.ErrorIs(t, err, wallet.ErrUnknownOutcome)
	require.Equal(t, wallet.Balance{Posted: 100, Held: 30, Available: 70, Currency: "CNY"}, balanceOf(t, acked, "gx/a"),
		"held, not posted")
	dst := balanceOf(t, acked, "gy/b")
	require.Zero(t, dst.Posted, "no credit on a hold the replicas have not acknowledged")
	_, err = short.Recover(ctx) // recovery builds on the hold only once it is acknowledged too
	require.ErrorIs(t, err, wallet.ErrReplicaAck)
	dst = balanceOf(t, acked, "gy/b")
	require.Zero(t, dst.Posted)

	res, err := acked.Transfer(ctx, tr) // the same ID, with replicas that acknowledge
	require.NoError(t, err)
	require.Equal(t, int64(70), res.Balance.Posted)
	require.Equal(t, int64(30), res.To.Posted)
	for _, a := range []string{"gx/a", "gy/b"} {
		require.NoError(t, acked.Verify(ctx, a))
	}
}

// WithReplicaAck covers every write, not only postings: Open, CloseAccount,
// Checkpoint and the release of an expired hold by Recover each report a
// shortfall with ErrReplicaAck (and did happen on the primary). Balance
// releases expired holds too but reads: it does not wait.
func TestLedger_WithReplicaAck_everyWrite(t *testing.T) {
	ctx := t.Context()
	_, rdb, acked := replicaAcked(t)
	openFunded(t, acked, map[string]int64{"q/a": 100})
	short := mustNew(t, rdb, wallet.WithReplicaAck(2, 100*time.Millisecond)) // one replica: never enough
	defer short.Close()

	assert.ErrorIs(t, short.Open(ctx, "q/b", wallet.WithCurrency("CNY")), wallet.ErrReplicaAck, "Open")
	require.Equal(t, "CNY", balanceOf(t, acked, "q/b").Currency, "opened all the same")

	id, _, err := short.Checkpoint(ctx, "q/a")
	assert.ErrorIs(t, err, wallet.ErrReplicaAck, "Checkpoint")
	require.NotEmpty(t, id, "written all the same")

	// A hold placed by a Ledger that is gone: Recover releases it.
	placer := mustNew(t, rdb)
	h, err := placer.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "q/a", Amount: 10, TTL: time.Second})
	require.NoError(t, err)
	require.NoError(t, placer.Close())
	time.Sleep(time.Until(h.Expires) + 50*time.Millisecond)
	_, err = short.Recover(ctx)
	assert.ErrorIs(t, err, wallet.ErrReplicaAck, "Recover released an expired hold")
	_, err = short.Recover(ctx)
	require.NoError(t, err, "nothing left to release: nothing to wait for")
	require.Zero(t, balanceOf(t, acked, "q/a").Held)

	placer = mustNew(t, rdb)
	h, err = placer.Hold(ctx, wallet.HoldReq{ID: "h2", Account: "q/a", Amount: 10, TTL: time.Second})
	require.NoError(t, err)
	require.NoError(t, placer.Close())
	time.Sleep(time.Until(h.Expires) + 50*time.Millisecond)
	bal, err := short.Balance(ctx, "q/a")
	require.NoError(t, err, "Balance releases the expired hold without waiting")
	require.Zero(t, bal.Held)

	assert.ErrorIs(t, short.CloseAccount(ctx, "q/b"), wallet.ErrReplicaAck, "CloseAccount")
	require.True(t, balanceOf(t, acked, "q/b").Closed, "closed all the same")
}

// A Redlock lease's fence works with WithFence as a Mutex's: holder X,
// paused past its lease, debits after Y took the lock over the same three
// masters and debited; X's debit is refused and writes nothing.
func TestLedger_WithFence_redlockHolderPausedPastLease(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"m/a": 100})
	var masters []redis.UniversalClient
	for range 3 {
		masters = append(masters, redistest.New(t, redistest.Options{}).Client())
	}
	rl, err := lock.NewRedlock(masters, lock.WithTTL(2*time.Second), lock.WithWatchdog(false))
	require.NoError(t, err)
	defer rl.Close()
	m := rl.Mutex("payout")
	x, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "x1", Account: "m/a", Amount: 10}, wallet.WithFence(x.Fence()))
	require.NoError(t, err)

	// X pauses; Y waits out its TTL and debits.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	y, err := m.Acquire(wctx)
	require.NoError(t, err)
	require.Greater(t, y.Fence().Token, x.Fence().Token)
	_, err = led.Debit(ctx, wallet.Tx{ID: "y1", Account: "m/a", Amount: 10}, wallet.WithFence(y.Fence()))
	require.NoError(t, err)

	before := keysUnder(t, rdb, prefix+":wallet")
	_, err = led.Debit(ctx, wallet.Tx{ID: "x2", Account: "m/a", Amount: 10}, wallet.WithFence(x.Fence()))
	require.ErrorIs(t, err, wallet.ErrStaleFence, "X's late debit is refused")
	require.ElementsMatch(t, before, keysUnder(t, rdb, prefix+":wallet"), "a stale call writes nothing")
	require.Equal(t, int64(80), balanceOf(t, led, "m/a").Posted)
	require.NoError(t, y.Release(ctx))
}
