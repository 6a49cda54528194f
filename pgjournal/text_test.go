package pgjournal_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/wallet"
)

// PostgreSQL text cannot hold a NUL byte, which a wallet memo may contain
// (any UTF-8): the entry is booked with its exact memo in memo_raw, and
// the book does not stop at it. A stock entry with a NUL or invalid UTF-8
// in a field (stock validates every name it writes, so only a damaged
// entry has one) is poison, not a batch that fails forever.
func TestSink_nulAndInvalidText(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"nul/a"}
	walletWork(t, f.led, "nul", 5, accounts...)
	memo := "gift\x00card"
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "nul-1", Account: "nul/a", Amount: 5, Memo: memo}); err != nil {
		t.Fatal(err)
	}
	moreWalletWork(t, f.led, "nul2", 5, accounts...)
	stockWork(t, f.inv, "nul", 5, "nul/s")
	bad, err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.journalKey("nul/s"),
		Values: []any{"op", "x", "kind", "deduct", "sku", "nul/s", "buyer", "b\x00\xff"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	moreStockWork(t, f.inv, "nul2", 5, "nul/s")
	f.catchUp([]string{"nul/s"}, accounts)
	f.checkWallet(nil, accounts...)
	f.checkStock(map[string]bool{"nul/s " + bad: true}, "nul/s")
	r := f.query("SELECT memo, memo_raw FROM $S.wallet_entries WHERE op = 'nul-1'")
	if len(r) != 1 || string(r[0][1].([]byte)) != memo {
		t.Fatalf("booked memo %q, want the exact bytes %q in memo_raw", r, memo)
	}
	if n := f.int("SELECT count(*) FROM $S.anomalies WHERE kind = 'poison' AND stream_id = $1", bad); n != 1 {
		t.Fatalf("poison anomalies for the damaged entry: %d, want 1", n)
	}
	f.noDrift([]string{"nul/s"}, accounts)
}
