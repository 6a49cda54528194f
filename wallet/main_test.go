package wallet_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// shared is one redis-server for the tests that need no faults; each test
// uses its own key prefix.
var shared *redistest.Server

type runAndClose struct{ m *testing.M }

func (r runAndClose) Run() int {
	defer shared.Close()
	return r.m.Run()
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	s, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = s
	wallet.DisableDefaultRecovery()
	goleak.VerifyTestMain(runAndClose{m}, goleak.IgnoreAnyFunction(redistest.DialProber))
}

var prefixSeq atomic.Int64

// newLedger returns a Ledger with a fresh key prefix on the shared server,
// and the client it uses.
func newLedger(t testing.TB, opts ...wallet.Option) (*wallet.Ledger, *redis.Client, string) {
	t.Helper()
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, append([]wallet.Option{wallet.WithKeyPrefix(prefix)}, opts...)...)
	t.Cleanup(func() { _ = led.Close() })
	return led, rdb, prefix
}

// oneConnLedger returns a Ledger with a fresh key prefix whose client keeps
// a single connection, and that client: a test that counts round trips
// (roundTrips) sees every command on it.
func oneConnLedger(t *testing.T) (*wallet.Ledger, *redis.Client) {
	t.Helper()
	_, _, prefix := newLedger(t)
	rdb := shared.Client(func(o *redis.Options) { o.PoolSize = 1 })
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = led.Close() })
	return led, rdb
}

// keysUnder lists every key under prefix.
func keysUnder(t testing.TB, rdb *redis.Client, prefix string) []string {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// mustNew is wallet.New for tests whose options are valid: an error fails
// the test. (Each module's tests keep their own: a module cannot import
// another's test files.)
func mustNew(tb testing.TB, rdb redis.UniversalClient, opts ...wallet.Option) *wallet.Ledger {
	tb.Helper()
	l, err := wallet.New(rdb, opts...)
	if err != nil {
		tb.Fatalf("wallet.New: %v", err)
	}
	return l
}

// openFunded opens each account in CNY and credits it its amount (when
// above 0) under the transaction ID "seed-<account>".
func openFunded(t *testing.T, led *wallet.Ledger, accounts map[string]int64) {
	t.Helper()
	for a, amt := range accounts {
		require.NoError(t, led.Open(t.Context(), a, wallet.WithCurrency("CNY")))
		if amt > 0 {
			_, err := led.Credit(t.Context(), wallet.Tx{ID: "seed-" + a, Account: a, Amount: amt})
			require.NoError(t, err)
		}
	}
}

// balanceOf is the account's balance; an error fails the test.
func balanceOf(t *testing.T, led *wallet.Ledger, account string) wallet.Balance {
	t.Helper()
	b, err := led.Balance(t.Context(), account)
	require.NoError(t, err)
	return b
}

// trialOf is the trial balance of the accounts; an error fails the test.
func trialOf(t *testing.T, led *wallet.Ledger, accounts ...string) wallet.Trial {
	t.Helper()
	tb, err := led.TrialBalance(t.Context(), accounts...)
	require.NoError(t, err)
	return tb
}

// requireReplay requires that again, err answers the operation that
// returned first, sent again: no error, and first's result marked Replayed.
func requireReplay(t *testing.T, first, again wallet.Result, err error) {
	t.Helper()
	require.NoError(t, err)
	require.True(t, again.Replayed, "a replay")
	first.Replayed = true
	require.Equal(t, first, again, "a replay returns the first result, balance included")
}

// keepCalling calls fn(0), fn(1), ... on a goroutine until fn fails or
// stop is called; stop waits for the goroutine and returns fn's error.
func keepCalling(fn func(i int) error) (stop func() error) {
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			if err := fn(i); err != nil {
				done <- err
				return
			}
		}
	}()
	return func() error {
		close(quit)
		return <-done
	}
}

// entriesOf is the account's whole journal, oldest first; an error fails
// the test.
func entriesOf(t *testing.T, led *wallet.Ledger, account string) []wallet.Entry {
	t.Helper()
	var all []wallet.Entry
	cursor := ""
	for {
		page, next, err := led.Entries(t.Context(), account, cursor, wallet.MaxPage)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// kinds lists the kinds of the account's journal entries, oldest first.
func kinds(t *testing.T, led *wallet.Ledger, account string) []string {
	t.Helper()
	var out []string
	for _, e := range entriesOf(t, led, account) {
		out = append(out, e.Kind)
	}
	return out
}
