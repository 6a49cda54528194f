package wallet_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// totalMax is the bound of a running total (TOTAL_MAX in lib.lua). Scripts
// compare totals as Lua numbers, whose spacing near it is 1024: cases step
// past it by past, not by one.
const (
	totalMax = int64(9_000_000_000_000_000_000)
	past     = 4096
)

// env is one case's Ledger, client and key names.
type env struct {
	led    *wallet.Ledger
	rdb    *redis.Client
	prefix string
}

func (e env) key(group, kind, id string) string {
	return e.prefix + ":wallet:v2:{" + group + "}:" + kind + ":" + id
}

// acct returns the four keys every account script takes first.
func (e env) acct(account string) []string {
	g, _, _ := strings.Cut(account, "/")
	return []string{e.key(g, "acct", account), e.key(g, "journal", account), e.key(g, "holds", account),
		e.key(g, "hidx", account)}
}

// set writes fields of an account hash directly: the state many postings
// would leave (running totals near their bound), reached in one step.
func (e env) set(t *testing.T, account string, kv ...any) {
	t.Helper()
	require.NoError(t, e.rdb.HSet(t.Context(), e.acct(account)[0], kv...).Err())
}

func (e env) eval(ctx context.Context, name string, keys []string, args ...any) error {
	return e.rdb.Eval(ctx, wallet.ScriptSource(name), keys, args...).Err()
}

// evalPost runs post.lua on g/a, transaction p, with kind and amount as
// given: arguments the Go side never sends.
func evalPost(kind, amount string) func(ctx context.Context, e env) error {
	return func(ctx context.Context, e env) error {
		a := e.acct("g/a")
		return e.eval(ctx, "post", []string{a[0], a[1], e.key("g", "tx", "p"), a[2], a[3]},
			"p", kind, "g/a", amount, "", "", "n", "60000")
	}
}

// evalXcredit runs xcredit.lua, the credit step of transfer x to h/c, with
// the source and amount as given.
func evalXcredit(from, amount string) func(ctx context.Context, e env) error {
	return func(ctx context.Context, e env) error {
		c := e.acct("h/c")
		return e.eval(ctx, "xcredit", []string{c[0], c[1], e.key("h", "xin", "g/x"), c[2], c[3]},
			"x", from, "h/c", amount, "CNY", "", "60000", "1")
	}
}

func fence(token uint64) wallet.CallOption {
	return wallet.WithFence(lock.Fence{Name: "lk", Token: token})
}

// No script fails after its first write: each script, driven to each of
// its errors and to each answer that decides nothing (conflicts, stale
// fences, limits at 2^53-1 and at the running totals' bound), leaves every
// key as it was.
func TestLedger_scriptErrors_writeNothing(t *testing.T) {
	const m = maxAmount
	s := strconv.FormatInt
	cases := []noWrite{
		// post.lua
		{"post: amount 0", nil, evalPost("credit", "0"), nil},
		{"post: amount 2^53", nil, evalPost("credit", "9007199254740992"), nil},
		{"post: kind", nil, evalPost("steal", "1"), nil},
		{"credit: balance past 2^53-1", func(t *testing.T, e env) { credit(t, e, "g/a", m-100) },
			func(ctx context.Context, e env) error { return op(e.led.Credit(ctx, tx("c", "g/a", 101))) }, wallet.ErrInvalid},
		{"credit: credits total past its bound", func(t *testing.T, e env) {
			e.set(t, "g/a", "posted", "100", "cr", s(totalMax-5+100, 10), "db", s(totalMax-5, 10))
		}, func(ctx context.Context, e env) error { return op(e.led.Credit(ctx, tx("c", "g/a", past))) }, wallet.ErrInvalid},
		{"debit: debits total past its bound", func(t *testing.T, e env) {
			e.set(t, "g/a", "posted", "10000", "cr", s(totalMax-5+10000, 10), "db", s(totalMax-5, 10))
		}, func(ctx context.Context, e env) error { return op(e.led.Debit(ctx, tx("d", "g/a", past))) }, wallet.ErrInvalid},
		{"credit: conflict", func(t *testing.T, e env) { credit(t, e, "g/a", 5) },
			func(ctx context.Context, e env) error { return op(e.led.Credit(ctx, tx("seed-g/a", "g/a", 6))) }, wallet.ErrConflict},
		{"debit: stale fence", func(t *testing.T, e env) { fenced(t, e) },
			func(ctx context.Context, e env) error { return op(e.led.Debit(ctx, tx("d", "g/a", 1), fence(4))) },
			wallet.ErrStaleFence},
		// transfer.lua
		{"transfer: transfers-in total past its bound", func(t *testing.T, e env) {
			credit(t, e, "g/a", past)
			e.set(t, "g/b", "tin", s(totalMax-5, 10), "tout", s(totalMax-5, 10))
		}, func(ctx context.Context, e env) error { return op(e.led.Transfer(ctx, xfer("t", "g/a", "g/b", past))) },
			wallet.ErrInvalid},
		{"transfer: same account", nil, func(ctx context.Context, e env) error {
			a := e.acct("g/a")
			return e.eval(ctx, "transfer", []string{a[0], a[1], a[0], a[1], e.key("g", "tx", "t"), a[2], a[3], a[2], a[3]},
				"t", "g/a", "g/a", "1", "", "n", "60000")
		}, nil},
		// hold.lua
		{"hold: held total past 2^53-1", heldAll,
			func(ctx context.Context, e env) error { return op(e.led.Hold(ctx, hold("h2", "g/od", 1))) }, wallet.ErrInvalid},
		{"hold: conflict", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			_, err := e.led.Hold(t.Context(), hold("h1", "g/a", 5))
			require.NoError(t, err)
		}, func(ctx context.Context, e env) error { return op(e.led.Hold(ctx, hold("h1", "g/a", 6))) }, wallet.ErrConflict},
		{"hold: stale fence", func(t *testing.T, e env) { fenced(t, e) },
			func(ctx context.Context, e env) error { return op(e.led.Hold(ctx, hold("h", "g/a", 1), fence(4))) },
			wallet.ErrStaleFence},
		{"hold: amount 0", nil, func(ctx context.Context, e env) error {
			return e.eval(ctx, "hold", e.acct("g/a"), "h", "0", "60000", "", "n", "60000")
		}, nil},
		// resolve.lua
		{"capture: above the held amount", held, func(ctx context.Context, e env) error {
			return op(e.led.Capture(ctx, "g/a", "h1", 6))
		}, wallet.ErrInvalid},
		{"capture: debits total past its bound", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10000)
			_, err := e.led.Hold(t.Context(), hold("h1", "g/a", 5000))
			require.NoError(t, err)
			e.set(t, "g/a", "cr", s(totalMax-5+10000, 10), "db", s(totalMax-5, 10))
		}, func(ctx context.Context, e env) error { return op(e.led.Capture(ctx, "g/a", "h1", past)) }, wallet.ErrInvalid},
		{"capture: unknown hold", held, func(ctx context.Context, e env) error {
			return op(e.led.Capture(ctx, "g/a", "nope", 1))
		}, wallet.ErrHoldNotFound},
		{"capture: voided", func(t *testing.T, e env) {
			held(t, e)
			_, err := e.led.Void(t.Context(), "g/a", "h1")
			require.NoError(t, err)
		}, func(ctx context.Context, e env) error { return op(e.led.Capture(ctx, "g/a", "h1", 1)) }, wallet.ErrConflict},
		{"capture: another amount", func(t *testing.T, e env) {
			held(t, e)
			_, err := e.led.Capture(t.Context(), "g/a", "h1", 2)
			require.NoError(t, err)
		}, func(ctx context.Context, e env) error { return op(e.led.Capture(ctx, "g/a", "h1", 3)) }, wallet.ErrConflict},
		{"capture: closed account", func(t *testing.T, e env) {
			held(t, e)
			require.NoError(t, e.led.CloseAccount(t.Context(), "g/a"))
		}, func(ctx context.Context, e env) error { return op(e.led.Capture(ctx, "g/a", "h1", 1)) }, wallet.ErrAccountClosed},
		{"capture: stale fence", func(t *testing.T, e env) { fenced(t, e); held(t, e) },
			func(ctx context.Context, e env) error { return op(e.led.Capture(ctx, "g/a", "h1", 1, fence(4))) },
			wallet.ErrStaleFence},
		{"resolve: operation", held, func(ctx context.Context, e env) error {
			return e.eval(ctx, "resolve", e.acct("g/a"), "h1", "steal", "1", "n", "60000")
		}, nil},
		// xbegin.lua
		{"cross transfer: held total past 2^53-1", heldAll,
			func(ctx context.Context, e env) error { return op(e.led.Transfer(ctx, xfer("x", "g/od", "h/c", 1))) },
			wallet.ErrInvalid},
		// xcredit.lua
		{"credit step: amount 0", nil, evalXcredit("g/a", "0"), nil},
		{"credit step: another transfer under the ID", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			_, err := e.led.Transfer(t.Context(), xfer("x", "g/a", "h/c", 1))
			require.NoError(t, err)
		}, evalXcredit("g/b", "1"), nil},
		// xfinish.lua
		{"finish step: transfers-out total past its bound", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			_, err := e.led.TransferSteps(t.Context(), xfer("x", "g/a", "h/c", 5), 1)
			require.NoError(t, err)
			e.set(t, "g/a", "cr", s(totalMax+past, 10), "tout", s(totalMax+past-10, 10))
		}, func(ctx context.Context, e env) error {
			a := e.acct("g/a")
			nonce := e.rdb.HGet(ctx, e.key("g", "tx", "x"), "nonce").Val() // the begin step's
			return e.eval(ctx, "xfinish", []string{a[0], a[1], e.key("g", "tx", "x")},
				"x", "credited", "", "CNY", "0", "5", "0", nonce)
		}, nil},
		// open.lua, close.lua, checkpoint.lua, sweep.lua
		{"open: other currency", nil, func(ctx context.Context, e env) error {
			return e.led.Open(ctx, "g/a", wallet.WithCurrency("USD"))
		}, wallet.ErrConflict},
		{"open: other overdraft", nil, func(ctx context.Context, e env) error {
			return e.led.Open(ctx, "g/a", wallet.WithCurrency("CNY"), wallet.WithOverdraft(m))
		}, wallet.ErrConflict},
		{"open: closed", func(t *testing.T, e env) { require.NoError(t, e.led.CloseAccount(t.Context(), "g/a")) },
			func(ctx context.Context, e env) error { return e.led.Open(ctx, "g/a", wallet.WithCurrency("CNY")) },
			wallet.ErrAccountClosed},
		{"open: overdraft 2^53", nil, func(ctx context.Context, e env) error {
			return e.eval(ctx, "open", e.acct("g/new"), "CNY", "9007199254740992")
		}, nil},
		{"close: unknown account", nil, func(ctx context.Context, e env) error {
			return e.led.CloseAccount(ctx, "g/nobody")
		}, wallet.ErrAccountNotFound},
		{"checkpoint: unknown account", nil, func(ctx context.Context, e env) error {
			return op2(e.led.Checkpoint(ctx, "g/nobody"))
		}, wallet.ErrAccountNotFound},
		{"checkpoint: over drift", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			e.set(t, "g/a", "posted", "11", "cr", "11")
		}, func(ctx context.Context, e env) error { return op2(e.led.Checkpoint(ctx, "g/a")) }, wallet.ErrMismatch},
		{"balance: unknown account", nil, func(ctx context.Context, e env) error {
			_, err := e.led.Balance(ctx, "g/nobody")
			return err
		}, wallet.ErrAccountNotFound},
	}
	cases = append(cases, transferNoWrites("transfer", "t", "g/b")...)       // transfer.lua
	cases = append(cases, transferNoWrites("cross transfer", "x", "h/c")...) // xbegin.lua
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			led, rdb, prefix := newLedger(t)
			e := env{led, rdb, prefix}
			openFunded(t, led, map[string]int64{"g/a": 0, "g/b": 0, "h/c": 0})
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := redistest.Capture(t, rdb, prefix+":*")
			err := tc.call(ctx, e)
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			before.RequireUnchanged(t, rdb, tc.name)
		})
	}
}

// noWrite is a call TestLedger_scriptErrors_writeNothing drives to an
// error, on accounts g/a, g/b and h/c opened in CNY and made ready by setup.
type noWrite struct {
	name  string
	setup func(t *testing.T, e env)
	call  func(ctx context.Context, e env) error
	want  error // nil: any error
}

// transferNoWrites are the cases of a transfer with ID id from g/a to to
// that transfer.lua (to in the source's group) and xbegin.lua (to in
// another) both refuse; name names the script's cases.
func transferNoWrites(name, id, to string) []noWrite {
	s := strconv.FormatInt
	send := func(n int64, opts ...wallet.CallOption) func(ctx context.Context, e env) error {
		return func(ctx context.Context, e env) error {
			return op(e.led.Transfer(ctx, xfer(id, "g/a", to, n), opts...))
		}
	}
	return []noWrite{
		{name + ": destination past 2^53-1", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			credit(t, e, to, maxAmount-5)
		}, send(6), wallet.ErrInvalid},
		{name + ": transfers-out total past its bound", func(t *testing.T, e env) {
			e.set(t, "g/a", "posted", "10000", "cr", s(totalMax-5+10000, 10), "tout", s(totalMax-5, 10))
		}, send(past), wallet.ErrInvalid},
		{name + ": conflict", func(t *testing.T, e env) {
			credit(t, e, "g/a", 10)
			require.NoError(t, send(1)(t.Context(), e))
		}, send(2), wallet.ErrConflict},
		{name + ": stale fence", fenced, send(1, fence(4)), wallet.ErrStaleFence},
	}
}

func op(_ wallet.Result, err error) error { return err }

func op2(_ string, _ int64, err error) error { return err }

func tx(id, account string, amount int64) wallet.Tx {
	return wallet.Tx{ID: id, Account: account, Amount: amount}
}

func xfer(id, from, to string, amount int64) wallet.Transfer {
	return wallet.Transfer{ID: id, From: from, To: to, Amount: amount}
}

func hold(id, account string, amount int64) wallet.HoldReq {
	return wallet.HoldReq{ID: id, Account: account, Amount: amount, TTL: time.Minute}
}

func credit(t *testing.T, e env, account string, amount int64) {
	t.Helper()
	_, err := e.led.Credit(t.Context(), tx("seed-"+account, account, amount))
	require.NoError(t, err)
}

// held funds g/a and holds 5 of it under h1.
func held(t *testing.T, e env) {
	t.Helper()
	credit(t, e, "g/a", 10)
	_, err := e.led.Hold(t.Context(), hold("h1", "g/a", 5))
	require.NoError(t, err)
}

// heldAll opens g/od with an overdraft of 2^53-1 and holds all of it
// under h1.
func heldAll(t *testing.T, e env) {
	t.Helper()
	require.NoError(t, e.led.Open(t.Context(), "g/od", wallet.WithCurrency("CNY"), wallet.WithOverdraft(maxAmount)))
	_, err := e.led.Hold(t.Context(), hold("h1", "g/od", maxAmount))
	require.NoError(t, err)
}

// fenced funds g/a and lets fencing token 5 reach group g.
func fenced(t *testing.T, e env) {
	t.Helper()
	credit(t, e, "g/a", 10)
	_, err := e.led.Credit(t.Context(), tx("f", "g/a", 1), fence(5))
	require.NoError(t, err)
}
