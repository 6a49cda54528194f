package wallet_test

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// currencyGrammar is the currency code rule of WithCurrency, an oracle
// independent of package valid (names and amounts: redistest.ValidName,
// redistest.ValidAmount).
var currencyGrammar = regexp.MustCompile(`^[A-Za-z0-9._-]{1,16}$`)

func validMemo(m string) bool     { return len(m) <= wallet.MaxMemo && utf8.ValidString(m) }
func conflict(err error) bool     { return errors.As(err, new(*wallet.ConflictError)) }
func validCurrency(c string) bool { return currencyGrammar.MatchString(c) }

var fuzzSeq int

// fuzzLedger returns a Ledger on a fresh key prefix of rdb; its keys are
// deleted at the end of the input so the database stays small. (stock's
// fuzz tests keep a copy for their Inventory: a module cannot import
// another's test files.)
func fuzzLedger(t *testing.T, rdb *redis.Client) (*wallet.Ledger, string) {
	fuzzSeq++
	prefix := fmt.Sprintf("fz%d-%d", fuzzSeq, time.Now().UnixNano())
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() {
		_ = led.Close()
		if ks, _ := rdb.Keys(t.Context(), prefix+":*").Result(); len(ks) > 0 {
			rdb.Del(t.Context(), ks...)
		}
	})
	return led, prefix
}

// requireTagged fails unless every key under prefix carries exactly the hash
// tag g.
func requireTagged(t *testing.T, rdb *redis.Client, prefix, g string) {
	t.Helper()
	for _, k := range keysUnder(t, rdb, prefix) {
		if err := redistest.CheckKeyTag(k, g); err != nil {
			t.Fatal(err)
		}
		if redistest.KeySlot(k) != redistest.KeySlot("{"+g+"}") {
			t.Fatalf("key %q left the slot of {%s}", k, g)
		}
	}
}

// FuzzOpen feeds account IDs, currency codes and overdraft limits to Open:
// invalid input is ErrInvalid and writes nothing; valid input opens the
// account with exactly those settings, in the account's slot group.
func FuzzOpen(f *testing.F) {
	f.Add("merchant-42/payouts", "CNY", int64(0))
	f.Add("alice", "EUR", int64(1<<53-1))
	f.Add("{alice}", "CNY", int64(0))
	f.Add("alice", "C{N}Y", int64(-1))
	rdb := shared.Client()
	f.Cleanup(func() { _ = rdb.Close() })
	f.Fuzz(func(t *testing.T, account, currency string, overdraft int64) {
		led, prefix := fuzzLedger(t, rdb)
		ctx := t.Context()
		before := redistest.Capture(t, rdb, prefix+":*")
		err := led.Open(ctx, account, wallet.WithCurrency(currency), wallet.WithOverdraft(overdraft))
		if !redistest.ValidName(account) || !validCurrency(currency) || overdraft < 0 || overdraft > 1<<53-1 {
			if !errors.Is(err, wallet.ErrInvalid) {
				t.Fatalf("Open(%q, %q, overdraft %d) = %v, want ErrInvalid", account, currency, overdraft, err)
			}
			before.RequireUnchanged(t, rdb, "a refused open")
			return
		}
		if err != nil {
			t.Fatalf("Open(%q, %q, overdraft %d): %v", account, currency, overdraft, err)
		}
		b, err := led.Balance(ctx, account)
		if err != nil || b != (wallet.Balance{Currency: currency, Overdraft: overdraft}) {
			t.Fatalf("Balance(%q) = %+v, %v after opening with %q, %d", account, b, err, currency, overdraft)
		}
		requireTagged(t, rdb, prefix, groupOf(account))
	})
}

// FuzzDebit feeds transaction IDs, accounts, amounts, currencies, memos and
// hold TTLs to Debit and Hold on an account holding 1000 CNY: invalid input
// is ErrInvalid and changes nothing; a valid debit takes exactly its amount
// (or is refused for funds or currency), a repeat is a replay with the same
// balance, and every key stays in the account's slot group.
func FuzzDebit(f *testing.F) {
	f.Add("tx-1", "merchant-42/payouts", int64(1), "CNY", "", int64(time.Minute))
	f.Add("tx-1", "alice", int64(1001), "", "memo", int64(time.Second))
	f.Add("tx-1", "alice", int64(1), "EUR", "", int64(time.Second))
	f.Add("tx{1}", "alice", int64(1), "", "", int64(0))
	rdb := shared.Client()
	f.Cleanup(func() { _ = rdb.Close() })
	const funds = 1000
	const seedTx = "seed-credit"
	f.Fuzz(func(t *testing.T, txID, account string, amount int64, currency, memo string, ttl int64) {
		led, prefix := fuzzLedger(t, rdb)
		ctx := t.Context()
		if redistest.ValidName(account) {
			if err := led.Open(ctx, account, wallet.WithCurrency("CNY")); err != nil {
				t.Fatalf("Open(%q): %v", account, err)
			}
			if _, err := led.Credit(ctx, wallet.Tx{ID: seedTx, Account: account, Amount: funds}); err != nil {
				t.Fatalf("Credit(%q): %v", account, err)
			}
		}
		tx := wallet.Tx{ID: txID, Account: account, Amount: amount, Currency: currency, Memo: memo}
		before := redistest.Capture(t, rdb, prefix+":*")
		res, err := led.Debit(ctx, tx)
		switch {
		case !redistest.ValidName(txID) || !redistest.ValidName(account) || !redistest.ValidAmount(amount) ||
			(currency != "" && !validCurrency(currency)) || !validMemo(memo):
			if !errors.Is(err, wallet.ErrInvalid) {
				t.Fatalf("Debit(%+v) = %v, want ErrInvalid", tx, err)
			}
			before.RequireUnchanged(t, rdb, "a refused debit")
		case txID == seedTx:
			if !conflict(err) {
				t.Fatalf("Debit(%+v) reusing the credit's ID = %v, want a ConflictError", tx, err)
			}
		case currency != "" && currency != "CNY":
			if !errors.Is(err, wallet.ErrCurrencyMismatch) {
				t.Fatalf("Debit(%+v) = %v, want ErrCurrencyMismatch", tx, err)
			}
		case amount > funds:
			if !errors.Is(err, wallet.ErrInsufficientFunds) {
				t.Fatalf("Debit(%+v) = %v, want ErrInsufficientFunds", tx, err)
			}
		default:
			want := wallet.Balance{Posted: funds - amount, Available: funds - amount, Currency: "CNY"}
			if err != nil || res.Replayed || res.Balance != want {
				t.Fatalf("Debit(%+v) = %+v, %v; want balance %+v", tx, res, err, want)
			}
			again, err := led.Debit(ctx, tx)
			if err != nil || !again.Replayed || again.Balance != want || again.EntryID != res.EntryID {
				t.Fatalf("repeated Debit(%+v) = %+v, %v; want a replay of %+v", tx, again, err, res)
			}
		}

		h := wallet.HoldReq{ID: "hold-1", Account: account, Amount: 1, TTL: time.Duration(ttl)}
		before = redistest.Capture(t, rdb, prefix+":*")
		_, err = led.Hold(ctx, h)
		switch {
		case !redistest.ValidName(account) || h.TTL < time.Second || h.TTL > 7*24*time.Hour:
			if !errors.Is(err, wallet.ErrInvalid) {
				t.Fatalf("Hold(%+v) = %v, want ErrInvalid", h, err)
			}
			before.RequireUnchanged(t, rdb, "a refused hold")
		case err != nil && !errors.Is(err, wallet.ErrInsufficientFunds) && !conflict(err):
			t.Fatalf("Hold(%+v): %v", h, err)
		}
		if redistest.ValidName(account) {
			requireTagged(t, rdb, prefix, groupOf(account))
		}
	})
}
