package wallet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// The error contract (internal/retry's doc): a write whose reply was lost
// ends in nil or ErrUnknownOutcome whatever the client meets afterwards, and
// calling again with the same ID returns the first decision. redistest's
// Contract runs the checks (the same for every module) on these writes.

// contractWrite is one write of wallet, called with a transaction ID, on
// accounts a and b of one slot group (and c of another).
type contractWrite struct {
	name string
	// prepare runs before the call for each ID (the warm-up's and the one
	// under test): a hold to capture or void.
	prepare func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error
	call    func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error)
	// check asserts the state after the warm-up and the call under test,
	// each applied once.
	check   func(t *testing.T, l *wallet.Ledger, acc accounts)
	replays bool // a repeated call reports Result.Replayed
	// skip is how many commands the call sends before its write: their
	// replies pass.
	skip int
}

type accounts struct{ a, b, c string }

const seed = 1000

func requireBalance(t *testing.T, l *wallet.Ledger, account string, posted, held int64) {
	t.Helper()
	b, err := l.Balance(context.Background(), account)
	require.NoError(t, err)
	require.Equal(t, [2]int64{posted, held}, [2]int64{b.Posted, b.Held}, "%s: posted, held: applied exactly once", account)
}

func balances(a, b int64) func(*testing.T, *wallet.Ledger, accounts) {
	return func(t *testing.T, l *wallet.Ledger, acc accounts) {
		requireBalance(t, l, acc.a, a, 0)
		requireBalance(t, l, acc.b, b, 0)
	}
}

// fence is a lock.Fence the fenced writes carry; its token is recorded in
// the accounts' group on first use and stays current.
var contractFence = lock.Fence{Name: "contract", Token: 7}

func contractWrites() []contractWrite {
	none := func(context.Context, *wallet.Ledger, accounts, string) error { return nil }
	hold := func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error {
		_, err := l.Hold(ctx, wallet.HoldReq{ID: id, Account: acc.a, Amount: 50, TTL: time.Hour})
		return err
	}
	return []contractWrite{
		{name: "Open", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return wallet.Result{}, l.Open(ctx, acc.a+"."+id, wallet.WithCurrency("EUR"))
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				b, err := l.Balance(context.Background(), acc.a+".x1")
				require.NoError(t, err)
				require.Equal(t, "EUR", b.Currency)
			}},
		{name: "Credit", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Credit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 100})
			},
			check: balances(seed+200, 0), replays: true},
		{name: "Debit", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Debit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 30})
			},
			check: balances(seed-60, 0), replays: true},
		{name: "Debit/fenced", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Debit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 30}, wallet.WithFence(contractFence))
			},
			check: balances(seed-60, 0), replays: true},
		{name: "Transfer", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Transfer(ctx, wallet.Transfer{ID: id, From: acc.a, To: acc.b, Amount: 10})
			},
			check: balances(seed-20, 20), replays: true},
		{name: "TransferBatch", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				r := l.TransferBatch(ctx, []wallet.Transfer{{ID: id, From: acc.a, To: acc.b, Amount: 10}})
				return r[0].Result, r[0].Err
			},
			check: balances(seed-20, 20), replays: true},
		{name: "Transfer/cross-group", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Transfer(ctx, wallet.Transfer{ID: id, From: acc.a, To: acc.c, Amount: 10})
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				requireBalance(t, l, acc.a, seed-20, 0)
				requireBalance(t, l, acc.c, 20, 0)
			}, replays: true, skip: 1}, // it reads the destination first
		{name: "Hold", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Hold(ctx, wallet.HoldReq{ID: id, Account: acc.a, Amount: 50, TTL: time.Hour})
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed, 100) },
			replays: true},
		{name: "Capture", prepare: hold,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Capture(ctx, acc.a, id, 20)
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed-40, 0) },
			replays: true},
		{name: "Void", prepare: hold,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Void(ctx, acc.a, id)
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed, 0) },
			replays: true},
		{name: "CloseAccount",
			prepare: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error {
				return l.Open(ctx, acc.a+"."+id, wallet.WithCurrency("EUR"))
			},
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return wallet.Result{}, l.CloseAccount(ctx, acc.a+"."+id)
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				b, err := l.Balance(context.Background(), acc.a+".x1")
				require.NoError(t, err)
				require.True(t, b.Closed)
			}},
	}
}

// contract is wallet's writes under redistest's error-contract checks;
// each write gets a fresh Ledger and accounts.
func contract() redistest.Contract {
	var ws []redistest.ContractWrite
	for _, w := range contractWrites() {
		ws = append(ws, redistest.ContractWrite{Name: w.name, Skip: w.skip, Replays: w.replays,
			Start: func(t *testing.T, rdb redis.UniversalClient, attempts int) redistest.ContractCall {
				ctx := t.Context()
				n := contractGroups.Add(1)
				acc := accounts{a: fmt.Sprintf("w%d/a", n), b: fmt.Sprintf("w%d/b", n), c: fmt.Sprintf("x%d/c", n)}
				l := mustNew(t, rdb, wallet.WithKeyPrefix(fmt.Sprintf("contract%d", n)),
					wallet.WithRetry(attempts, 50*time.Millisecond, 100*time.Millisecond))
				t.Cleanup(func() { require.NoError(t, l.Close()) })
				for _, a := range []string{acc.a, acc.b, acc.c} {
					require.NoError(t, l.Open(ctx, a, wallet.WithCurrency("EUR")))
				}
				_, err := l.Credit(ctx, wallet.Tx{ID: "seed", Account: acc.a, Amount: seed})
				require.NoError(t, err)
				for _, id := range []string{"warm", "x1"} {
					require.NoError(t, w.prepare(ctx, l, acc, id))
				}
				return redistest.ContractCall{Tag: redistest.Tag(acc.a),
					Call: func(ctx context.Context, id string) (bool, error) {
						res, err := w.call(ctx, l, acc, id)
						return res.Replayed, err
					},
					Check: func(t *testing.T) { w.check(t, l, acc) }}
			}})
	}
	return redistest.Contract{Writes: ws, Unknown: wallet.ErrUnknownOutcome,
		Core:  map[string]bool{"Debit": true, "Transfer": true, "Debit/fenced": true},
		Moved: map[string]bool{"Open": true, "TransferBatch": true}}
}

var contractGroups atomic.Int64

func TestContract(t *testing.T) { contract().Run(t) }

// TestChaos_contractEveryWrite: every write under every fault (about three
// minutes; make chaos).
func TestChaos_contractEveryWrite(t *testing.T) { contract().RunChaos(t) }
