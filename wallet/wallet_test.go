package wallet_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

func TestLedger_Open_idempotentAndConflicts(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "alice", wallet.WithCurrency("CNY")))
	require.NoError(t, led.Open(ctx, "alice", wallet.WithCurrency("CNY")), "same settings: no-op")

	err := led.Open(ctx, "alice", wallet.WithCurrency("USD"))
	var ce *wallet.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "currency", ce.Field)
	require.ErrorIs(t, err, wallet.ErrConflict)

	err = led.Open(ctx, "alice", wallet.WithCurrency("CNY"), wallet.WithOverdraft(5))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "overdraft", ce.Field)

	require.Equal(t, wallet.Balance{Currency: "CNY"}, balanceOf(t, led, "alice"))

	require.ErrorIs(t, led.Open(ctx, "bob"), wallet.ErrInvalid, "currency is required")
	_, err = led.Balance(ctx, "bob")
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
}

func TestLedger_CreditDebit(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "shop-1/alice", wallet.WithCurrency("CNY")))

	res, err := led.Credit(ctx, wallet.Tx{ID: "c1", Account: "shop-1/alice", Amount: 1000, Memo: "top-up"})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, wallet.Balance{Posted: 1000, Available: 1000, Currency: "CNY"}, res.Balance)
	require.NotEmpty(t, res.EntryID)
	require.False(t, res.Time.IsZero())

	res, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "shop-1/alice", Amount: 400, Currency: "CNY"})
	require.NoError(t, err)
	require.Equal(t, int64(600), res.Balance.Posted)

	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "shop-1/alice", Amount: 601})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)

	_, err = led.Debit(ctx, wallet.Tx{ID: "d3", Account: "shop-1/alice", Amount: 1, Currency: "USD"})
	require.ErrorIs(t, err, wallet.ErrCurrencyMismatch)

	_, err = led.Credit(ctx, wallet.Tx{ID: "c2", Account: "shop-1/nobody", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)

	require.Equal(t, wallet.Balance{Posted: 600, Available: 600, Currency: "CNY"}, balanceOf(t, led, "shop-1/alice"))

	ents, next, err := led.Entries(ctx, "shop-1/alice", "", 10)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, ents, 3)
	require.Equal(t, wallet.KindOpen, ents[0].Kind)
	require.Equal(t, wallet.Entry{ID: ents[1].ID, TxID: "c1", Kind: wallet.KindCredit, Delta: 1000, Posted: 1000,
		Memo: "top-up", Time: ents[1].Time}, ents[1])
	require.Equal(t, int64(-400), ents[2].Delta)
	require.Equal(t, int64(600), ents[2].Posted)
	require.NoError(t, led.Verify(ctx, "shop-1/alice"))
}

func TestLedger_Debit_overdraft(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("EUR"), wallet.WithOverdraft(500)))
	res, err := led.Debit(ctx, wallet.Tx{ID: "d1", Account: "a", Amount: 500})
	require.NoError(t, err)
	require.Equal(t, wallet.Balance{Posted: -500, Available: -500, Overdraft: 500, Currency: "EUR"}, res.Balance)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "a", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
}

func TestLedger_idempotency_replayReturnsFirstResult(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	first, err := led.Credit(ctx, wallet.Tx{ID: "c1", Account: "a", Amount: 10})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c2", Account: "a", Amount: 5})
	require.NoError(t, err)

	again, err := led.Credit(ctx, wallet.Tx{ID: "c1", Account: "a", Amount: 10})
	requireReplay(t, first, again, err)

	require.Equal(t, int64(15), balanceOf(t, led, "a").Posted, "the replay changed nothing")
	ents, _, err := led.Entries(ctx, "a", "", 100)
	require.NoError(t, err)
	require.Len(t, ents, 3)
}

func TestLedger_idempotency_conflictNamesField(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	for _, a := range []string{"g/a", "g/b", "g/c"} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("CNY")))
	}
	_, err := led.Credit(ctx, wallet.Tx{ID: "t1", Account: "g/a", Amount: 100, Memo: "m"})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "g/a", To: "g/b", Amount: 10})
	require.NoError(t, err)

	cases := []struct {
		field string
		call  func() error
	}{
		{"kind", func() error {
			_, err := led.Debit(ctx, wallet.Tx{ID: "t1", Account: "g/a", Amount: 100, Memo: "m"})
			return err
		}},
		{"account", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "t1", Account: "g/b", Amount: 100, Memo: "m"})
			return err
		}},
		{"amount", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "t1", Account: "g/a", Amount: 101, Memo: "m"})
			return err
		}},
		{"currency", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "t1", Account: "g/a", Amount: 100, Memo: "m", Currency: "CNY"})
			return err
		}},
		{"memo", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "t1", Account: "g/a", Amount: 100}); return err }},
		{"kind", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "t2", Account: "g/a", Amount: 10}); return err }},
		{"from", func() error {
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "g/c", To: "g/b", Amount: 10})
			return err
		}},
		{"to", func() error {
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "g/a", To: "g/c", Amount: 10})
			return err
		}},
		{"amount", func() error {
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "g/a", To: "g/b", Amount: 11})
			return err
		}},
	}
	for _, c := range cases {
		err := c.call()
		var ce *wallet.ConflictError
		require.ErrorAs(t, err, &ce, c.field)
		require.Equal(t, c.field, ce.Field)
		require.ErrorIs(t, err, wallet.ErrConflict)
	}
	for a, want := range map[string]int64{"g/a": 90, "g/b": 10, "g/c": 0} {
		require.Equal(t, want, balanceOf(t, led, a).Posted, a)
	}
}

func TestLedger_idempotency_refusedStaysRefused(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	require.NoError(t, led.Open(ctx, "a", wallet.WithCurrency("CNY")))
	debit := wallet.Tx{ID: "d1", Account: "a", Amount: 50}
	_, err := led.Debit(ctx, debit)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c1", Account: "a", Amount: 100})
	require.NoError(t, err)

	res, err := led.Debit(ctx, debit)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds, "funds arrived, but the refused transaction stays refused")
	require.True(t, res.Replayed)

	_, err = led.Credit(ctx, wallet.Tx{ID: "early", Account: "b", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
	require.NoError(t, led.Open(ctx, "b", wallet.WithCurrency("CNY")))
	_, err = led.Credit(ctx, wallet.Tx{ID: "early", Account: "b", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)

	require.Equal(t, int64(100), balanceOf(t, led, "a").Posted)
}

func TestLedger_Transfer(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	for _, a := range []string{"m-1/payouts", "m-1/till"} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("CNY")))
	}
	require.NoError(t, led.Open(ctx, "m-1/usd", wallet.WithCurrency("USD")))
	require.NoError(t, led.Open(ctx, "m-2/till", wallet.WithCurrency("CNY")))
	_, err := led.Credit(ctx, wallet.Tx{ID: "seed", Account: "m-1/payouts", Amount: 1000})
	require.NoError(t, err)

	res, err := led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "m-1/payouts", To: "m-1/till", Amount: 300, Memo: "x"})
	require.NoError(t, err)
	require.Equal(t, int64(700), res.Balance.Posted)
	require.Equal(t, int64(300), res.To.Posted)
	require.NotEmpty(t, res.ToEntryID)

	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t2", From: "m-1/payouts", To: "m-1/till", Amount: 701})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t3", From: "m-1/payouts", To: "m-1/usd", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrCurrencyMismatch)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t4", From: "m-1/payouts", To: "m-1/nobody", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountNotFound)
	require.Contains(t, err.Error(), "m-1/nobody")
	out := led.TransferBatch(ctx, []wallet.Transfer{{ID: "t5", From: "m-1/payouts", To: "m-2/till", Amount: 1}})
	require.ErrorIs(t, out[0].Err, wallet.ErrCrossGroup, "a batch holds single-group transfers only")
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t6", From: "m-1/till", To: "m-1/till", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrSameAccount)
	require.ErrorIs(t, err, wallet.ErrInvalid)

	in, _, err := led.Entries(ctx, "m-1/till", "", 10)
	require.NoError(t, err)
	require.Equal(t, wallet.KindTransferIn, in[1].Kind)
	require.Equal(t, "m-1/payouts", in[1].Peer)
	require.Equal(t, "t1", in[1].TxID)

	tb := trialOf(t, led, "m-1/payouts", "m-1/till", "m-1/usd")
	require.Zero(t, tb.NetTransfers())
	require.True(t, tb.Balanced())
	require.Equal(t, int64(1000), tb.Posted)
}

func TestLedger_CloseAccount(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 10, "g/b": 0})
	require.NoError(t, led.CloseAccount(ctx, "g/a"))
	require.NoError(t, led.CloseAccount(ctx, "g/a"), "closing twice is a no-op")
	require.ErrorIs(t, led.CloseAccount(ctx, "g/nobody"), wallet.ErrAccountNotFound)

	_, err := led.Credit(ctx, wallet.Tx{ID: "c2", Account: "g/a", Amount: 10})
	require.ErrorIs(t, err, wallet.ErrAccountClosed)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g/b", To: "g/a", Amount: 1})
	require.ErrorIs(t, err, wallet.ErrAccountClosed)
	bal := balanceOf(t, led, "g/a")
	require.True(t, bal.Closed)
	require.Equal(t, int64(10), bal.Posted)
	require.ErrorIs(t, led.Open(ctx, "g/a", wallet.WithCurrency("CNY")), wallet.ErrAccountClosed)
	require.NoError(t, led.Verify(ctx, "g/a"))
}

func TestLedger_badInput_writesNothing(t *testing.T) {
	ctx := t.Context()
	led, rdb, prefix := newLedger(t)
	openFunded(t, led, map[string]int64{"g/a": 1<<53 - 1, "g/b": 5})
	before := keysUnder(t, rdb, prefix)
	bal := balanceOf(t, led, "g/a")

	bad := []struct {
		name string
		call func() error
	}{
		{"amount 0", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/b", Amount: 0}); return err }},
		{"amount negative", func() error { _, err := led.Debit(ctx, wallet.Tx{ID: "x", Account: "g/b", Amount: -5}); return err }},
		{"amount 2^53", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/b", Amount: 1 << 53})
			return err
		}},
		{"balance overflow", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/a", Amount: 1}); return err }},
		{"transfer overflow", func() error {
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "x", From: "g/b", To: "g/a", Amount: 1})
			return err
		}},
		{"empty ID", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "", Account: "g/b", Amount: 1}); return err }},
		{"ID with brace", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x{y}", Account: "g/b", Amount: 1}); return err }},
		{"ID with space", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x y", Account: "g/b", Amount: 1}); return err }},
		{"account with brace", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "{g}/b", Amount: 1}); return err }},
		{"account glob", func() error { _, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/*", Amount: 1}); return err }},
		{"empty account", func() error { _, err := led.Debit(ctx, wallet.Tx{ID: "x", Account: "", Amount: 1}); return err }},
		{"ID too long", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: strings.Repeat("x", 129), Account: "g/b", Amount: 1})
			return err
		}},
		{"memo too long", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/b", Amount: 1, Memo: strings.Repeat("m", 257)})
			return err
		}},
		{"bad currency", func() error {
			_, err := led.Credit(ctx, wallet.Tx{ID: "x", Account: "g/b", Amount: 1, Currency: "C N Y"})
			return err
		}},
		{"same account", func() error {
			_, err := led.Transfer(ctx, wallet.Transfer{ID: "x", From: "g/b", To: "g/b", Amount: 1})
			return err
		}},
		{"open bad overdraft", func() error { return led.Open(ctx, "g/c", wallet.WithCurrency("CNY"), wallet.WithOverdraft(-1)) }},
		{"open bad account", func() error { return led.Open(ctx, "g c", wallet.WithCurrency("CNY")) }},
		{"entries bad cursor", func() error { _, _, err := led.Entries(ctx, "g/a", "abc", 10); return err }},
		{"entries bad limit", func() error { _, _, err := led.Entries(ctx, "g/a", "", 0); return err }},
	}
	for _, c := range bad {
		err := c.call()
		require.ErrorIs(t, err, wallet.ErrInvalid, c.name)
		require.NotErrorIs(t, err, wallet.ErrUnknownOutcome, c.name)
		require.ElementsMatch(t, before, keysUnder(t, rdb, prefix), "%s wrote a key", c.name)
	}
	require.Equal(t, bal, balanceOf(t, led, "g/a"))
	require.NoError(t, led.Verify(ctx, "g/a"))
	require.NoError(t, led.Verify(ctx, "g/b"))

	out := led.TransferBatch(ctx, []wallet.Transfer{{ID: "x", From: "g/b", To: "h/a", Amount: 1}})
	require.True(t, errors.Is(out[0].Err, wallet.ErrCrossGroup))
	require.ElementsMatch(t, before, keysUnder(t, rdb, prefix))
}

func TestNew_invalidOptions(t *testing.T) {
	rdb := shared.Client()
	defer rdb.Close()
	for _, opt := range []wallet.Option{wallet.WithKeyPrefix("a:b"), wallet.WithIdempotencyWindow(0),
		wallet.WithIdempotencyWindow(31 * 24 * time.Hour), wallet.WithRecovery(time.Millisecond),
		wallet.WithReplicaAck(1, 0), wallet.WithRetry(0, 0, 0)} {
		led, err := wallet.New(rdb, opt)
		require.ErrorIs(t, err, wallet.ErrInvalid)
		require.Nil(t, led)
	}
}

func TestLedger_Check(t *testing.T) {
	ctx := t.Context()
	risky := redistest.New(t, redistest.Options{MaxmemoryPolicy: "allkeys-lru"})
	rep, err := mustNew(t, risky.Client()).Check(ctx)
	require.NoError(t, err)
	require.Equal(t, health.Critical, rep.Worst())
	require.Error(t, rep.Err(health.Warning))

	safe := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	rep, err = mustNew(t, safe.Client()).Check(ctx)
	require.NoError(t, err)
	require.Equal(t, health.OK, rep.Worst(), "%v", rep.Findings)
	require.NoError(t, rep.Err(health.Warning))

	// appendfsync always is not enough: with no-appendfsync-on-rewrite yes
	// Redis skips the fsync while a rewrite or RDB save runs.
	skips := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always",
		Config: []string{"no-appendfsync-on-rewrite yes"}})
	rep, err = mustNew(t, skips.Client()).Check(ctx)
	require.NoError(t, err)
	require.Equal(t, health.Warning, rep.Worst(), "%v", rep.Findings)
	require.ErrorContains(t, rep.Err(health.Warning), "no-appendfsync-on-rewrite")
}

func TestLedger_postings_oneRoundTrip(t *testing.T) {
	ctx := t.Context()
	led, rdb := oneConnLedger(t)
	// Load every script once.
	openFunded(t, led, map[string]int64{"g/a": 100, "g/b": 0})
	_, err := led.Transfer(ctx, wallet.Transfer{ID: "w2", From: "g/a", To: "g/b", Amount: 1})
	require.NoError(t, err)
	_ = balanceOf(t, led, "g/a")

	rt := &roundTrips{}
	rdb.AddHook(rt)
	_, err = led.Credit(ctx, wallet.Tx{ID: "c1", Account: "g/a", Amount: 10})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d1", Account: "g/a", Amount: 10})
	require.NoError(t, err)
	_, err = led.Debit(ctx, wallet.Tx{ID: "d2", Account: "g/a", Amount: 1000})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t1", From: "g/a", To: "g/b", Amount: 5})
	require.NoError(t, err)
	_ = balanceOf(t, led, "g/a")
	require.Equal(t, int64(5), rt.n.Load())
}
