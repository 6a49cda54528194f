package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// The same transaction ID used by two source groups names two transfers
// (wallet's markers of a transfer into a group are named by the source's
// group and the ID): the book books both credits of the destination, and
// records no duplicate.
func TestSinkWallet_sameIDFromTwoSourceGroups(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"xga/src", "xgb/src", "xgd/dst"}
	for _, a := range accounts {
		if err := f.led.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range accounts[:2] {
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: "seed", Account: a, Amount: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range []wallet.Transfer{{ID: "pay-1", From: "xga/src", To: "xgd/dst", Amount: 100},
		{ID: "pay-1", From: "xgb/src", To: "xgd/dst", Amount: 30}} {
		if _, err := f.led.Transfer(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp(nil, accounts)
	if got := f.int("SELECT posted FROM $S.wallet_balances WHERE account = 'xgd/dst'"); got != 130 {
		t.Errorf("BUG: the book holds %d on xgd/dst, Redis 130: a second transfer under the same ID from another group was not booked", got)
	}
	f.noAnomalies()
	f.checkBook(nil, accounts)
}

// Entries are booked into the journal they were read from: an entry of
// fsx/a's journal that names fsx/b is poison of fsx/a, and the deducts
// after it are booked under fsx/a.
func TestSinkStock_damagedEntryNamingAnotherSKU(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	skus := []string{"fsx/a", "fsx/b"}
	for _, s := range skus {
		if err := f.inv.Create(ctx, s, 50); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp(skus, nil) // the next batch of fsx/a's journal starts at the damaged entry
	bad, err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.journalKey("fsx/a"), Values: []any{"op", "o-x", "kind", "deduct",
		"sku", "fsx/b", "buyer", "b", "d_avail", "-1", "d_sold", "1", "avail", "49", "sold", "1", "supply", "50"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		o := stock.Order{ID: fmt.Sprint("fsx-o", i), Buyer: "b", Items: []stock.Item{{SKU: "fsx/a", Qty: 2}}}
		if _, err := f.inv.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp(skus, nil)
	if n := f.int("SELECT count(*) FROM $S.stock_entries WHERE sku = 'fsx/a' AND kind = 'deduct'"); n != 3 {
		t.Errorf("BUG: %d deducts booked under fsx/a, want 3 (6 units sold)", n)
	}
	if n := f.int("SELECT count(*) FROM $S.stock_entries WHERE sku = 'fsx/b' AND kind <> 'create'"); n != 0 {
		t.Errorf("BUG: %d entries of fsx/a's journal booked under fsx/b", n)
	}
	as, err := f.book.Anomalies(ctx, "stock", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := anomalyKinds(as), map[string][]string{"fsx/a": {"poison " + bad}}; !equalMap(got, want) {
		t.Errorf("BUG: anomalies %v, want only the damaged entry as poison of fsx/a: %v", got, want)
	}
	f.checkStock(map[string]bool{"fsx/a " + bad: true}, skus...)
	f.noDrift(skus, nil)
}

// A busy sink and the reconciler side by side: the reconciler compares one
// consistent view, so lag is never reported as drift.
func TestReconcile_busySinkNoFalseDrift(t *testing.T) {
	reconcileBesideBusySink(t, 5*time.Second)
}

// TestChaos_Reconcile_busySink is the minute-long run.
func TestChaos_Reconcile_busySink(t *testing.T) {
	reconcileBesideBusySink(t, time.Duration(redistest.Chaos(t))*time.Minute)
}

func reconcileBesideBusySink(t *testing.T, d time.Duration) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"bz/a", "bz/b", "bz/c"}
	skus := []string{"bz/s"}
	walletWork(t, f.led, "bz", 10, accounts...)
	for _, a := range accounts {
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: "bz-seed-" + a, Account: a, Amount: 1 << 40}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.inv.Create(ctx, skus[0], 1<<40); err != nil {
		t.Fatal(err)
	}
	stopW := runSink(t, f.walletSink(accounts...))
	stopS := runSink(t, f.stockSink(skus...))
	// The writes stop at the end even while a comparison runs, at a pace
	// the sink keeps up with, so it is busy and never far behind.
	writing, stopWriting := context.WithTimeout(ctx, d)
	defer stopWriting()
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Go(func() {
		for i := 0; writing.Err() == nil; i++ {
			time.Sleep(time.Millisecond)
			a, b := accounts[i%3], accounts[(i+1)%3]
			id := fmt.Sprint("bz-w", i)
			var err error
			switch i % 4 {
			case 0:
				_, err = f.led.Credit(ctx, wallet.Tx{ID: id, Account: a, Amount: 10})
			case 1:
				_, err = f.led.Debit(ctx, wallet.Tx{ID: id, Account: a, Amount: 3})
			case 2:
				_, err = f.led.Transfer(ctx, wallet.Transfer{ID: id, From: a, To: b, Amount: 2})
			case 3:
				_, err = f.inv.Deduct(ctx, stock.Order{ID: id, Buyer: "b", Items: []stock.Item{{SKU: skus[0], Qty: 1}}})
			}
			if err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	})
	var compared, busy int
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, r := range []func() ([]pgjournal.Drift, error){
			func() ([]pgjournal.Drift, error) { return f.book.ReconcileWallet(ctx, f.led, accounts...) },
			func() ([]pgjournal.Drift, error) { return f.book.ReconcileStock(ctx, f.inv, skus...) },
		} {
			ds, err := r()
			switch {
			case errors.Is(err, pgjournal.ErrBusy):
				busy++
				continue
			case err != nil:
				t.Fatal(err)
			}
			compared++
			for _, d := range ds {
				t.Errorf("BUG: lag reported as drift: %s Redis %v, book %v, %d unbooked", d.Key, d.Redis, d.Book, d.Unbooked)
			}
		}
	}
	stopWriting()
	wg.Wait()
	t.Logf("%d writes, %d comparisons, %d busy", writes.Load(), compared, busy)
	if compared == 0 {
		t.Fatal("no comparison ran: every attempt found the keys changing")
	}
	f.drain(skus, accounts, stopW, stopS)
	f.checkBook(skus, accounts)
}

// loseNewest makes Redis lose the newest entry of account's journal, as a
// failover to a replica that missed it would: the entry gone (with the
// stream's last ID and entries-added counter set back), its delta undone
// on posted and on the running total named total, the account's record of
// its newest entry set back, and the records named by the key suffixes in
// records (markers) deleted.
func (f *fixture) loseNewest(account, total string, delta int64, records ...string) {
	f.t.Helper()
	ctx := context.Background()
	ids := f.walletIDs(account)
	f.loseLast(f.journalKey(account), ids, 1)
	ak := f.redisKey("acct", account)
	if delta < 0 && total != "" {
		f.rdb.HIncrBy(ctx, ak, total, delta) // the totals count amounts
	} else if total != "" {
		f.rdb.HIncrBy(ctx, ak, total, -delta)
	}
	f.rdb.HIncrBy(ctx, ak, "posted", -delta)
	f.rdb.HSet(ctx, ak, "last", ids[len(ids)-2])
	for _, r := range records {
		ks, err := f.rdb.Keys(ctx, f.prefix+":*:"+r).Result()
		if err != nil || len(ks) != 1 {
			f.t.Fatalf("record %s: %v %v", r, ks, err)
		}
		f.rdb.Del(ctx, ks...)
	}
}

// A credit and a debit that named their currency and carried a memo with a
// NUL byte, lost by Redis and given back by RepairWallet: the client's own
// retries are answered as replays, and the repaired journal entries carry
// the memo's exact bytes.
func TestRepairWallet_replaysEveryField(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"rf/x"}
	walletWork(t, f.led, "rf", 10, accounts...)
	credit := wallet.Tx{ID: "rf-credit", Account: "rf/x", Amount: 500, Currency: "EUR", Memo: "top-up"}
	debit := wallet.Tx{ID: "rf-debit", Account: "rf/x", Amount: 40, Memo: "gift\x00card"}
	if _, err := f.led.Credit(ctx, credit); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Debit(ctx, debit); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, accounts)
	f.loseNewest("rf/x", "db", -40, "tx:rf-debit")
	f.loseNewest("rf/x", "cr", 500, "tx:rf-credit")
	rs, err := f.book.RepairWallet(ctx, f.led, "rf/x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"rf-credit applied", "rf-debit applied"}; !slices.Equal(got, want) {
		t.Fatalf("repair: %v (%+v), want %v", got, rs, want)
	}
	if res, err := f.led.Credit(ctx, credit); err != nil || !res.Replayed {
		t.Errorf("BUG: the client's retry of a repaired credit that named its currency: %+v, %v; want a replay", res, err)
	}
	if res, err := f.led.Debit(ctx, debit); err != nil || !res.Replayed {
		t.Errorf("BUG: the client's retry of a repaired debit whose memo holds a NUL: %+v, %v; want a replay", res, err)
	}
	es, _, err := f.led.Entries(ctx, "rf/x", "", wallet.MaxPage)
	if err != nil {
		t.Fatal(err)
	}
	if last := es[len(es)-1]; last.TxID != "rf-debit" || last.Memo != debit.Memo {
		t.Errorf("BUG: the repaired entry is %s with memo %q, want rf-debit with %q", last.TxID, last.Memo, debit.Memo)
	}
	f.catchUp(nil, accounts)
	f.noDrift(nil, accounts)
}

// crossLoss runs a transfer of 100 from xs/src (funded with 1000) to
// xd/dst across slot groups, books it, and makes Redis lose the
// destination's credit step (entry, effect and inbound record), as a
// failover of the destination's shard alone would.
func crossLoss(t *testing.T, f *fixture, led *wallet.Ledger) {
	t.Helper()
	ctx := t.Context()
	for _, a := range []string{"xs/src", "xd/dst"} {
		if err := led.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := led.Credit(ctx, wallet.Tx{ID: "x-seed", Account: "xs/src", Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Transfer(ctx, wallet.Transfer{ID: "x-pay", From: "xs/src", To: "xd/dst", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, []string{"xs/src", "xd/dst"})
	f.loseNewest("xd/dst", "tin", 100, "xin:xs/x-pay")
}

// A transfer step across slot groups cannot be replayed on its own: the
// repair reports it with the reason, changes nothing, and the drift stays.
func TestRepairWallet_crossGroupStepReported(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	crossLoss(t, f, f.led)
	rs, err := f.book.RepairWallet(ctx, f.led, "xd/dst")
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(rs); !slices.Equal(got, []string{"x-pay skipped"}) || !errors.Is(rs[0].Err, pgjournal.ErrUnrepairable) {
		t.Fatalf("BUG: repair of a lost cross-group credit: %v (%+v), want it skipped with ErrUnrepairable", got, rs)
	}
	if b, err := f.led.Balance(ctx, "xd/dst"); err != nil || b.Posted != 0 {
		t.Fatalf("xd/dst: %+v, %v; want 0, untouched", b, err)
	}
	if keys := driftKeys(f.reconcileWallet("xs/src", "xd/dst")); !slices.Equal(keys, []string{"xd/dst"}) {
		t.Fatalf("drift on %v, want xd/dst", keys)
	}
}

// After the idempotency window, the same repair must not start a new
// transfer: the source was charged once.
func TestRepairWallet_crossGroupAfterWindow(t *testing.T) {
	defer valid.LowerIdemWindowFloor(time.Second)()
	f := shared(t)
	ctx := t.Context()
	led, err := wallet.New(f.rdb, wallet.WithKeyPrefix(f.prefix), wallet.WithIdempotencyWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	f.led = led
	crossLoss(t, f, led)
	time.Sleep(1500 * time.Millisecond) // the window passes
	rs, err := f.book.RepairWallet(ctx, led, "xd/dst")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := led.Balance(ctx, "xs/src"); err != nil || b.Posted != 900 {
		t.Fatalf("BUG: the source after the repair: %+v, %v; want 900, charged once (repairs %v)", b, err, outcomes(rs))
	}
	if got := outcomes(rs); !slices.Equal(got, []string{"x-pay skipped"}) || !errors.Is(rs[0].Err, pgjournal.ErrUnrepairable) {
		t.Fatalf("BUG: repair after the window: %v, want x-pay skipped with ErrUnrepairable", got)
	}
}

// Entries whose marker window has passed are never replayed: a credit
// whose journal entry is gone but whose effect Redis kept (its marker
// expired) would be applied a second time.
func TestRepairWallet_afterWindowNotReplayed(t *testing.T) {
	defer valid.LowerIdemWindowFloor(time.Second)()
	f := shared(t)
	ctx := t.Context()
	led, err := wallet.New(f.rdb, wallet.WithKeyPrefix(f.prefix), wallet.WithIdempotencyWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	f.led = led
	if err := led.Open(ctx, "aw/x", wallet.WithCurrency("EUR")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []wallet.Tx{{ID: "aw-kept", Account: "aw/x", Amount: 70}, {ID: "aw-lost", Account: "aw/x", Amount: 30}} {
		if _, err := led.Credit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp(nil, []string{"aw/x"})
	f.loseNewest("aw/x", "cr", 30, "tx:aw-lost") // lost with its effect
	ids := f.walletIDs("aw/x")
	f.loseLast(f.journalKey("aw/x"), ids, 1) // entry gone, effect kept
	time.Sleep(1500 * time.Millisecond)      // every marker expires
	rs, err := f.book.RepairWallet(ctx, led, "aw/x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := led.Balance(ctx, "aw/x")
	if err != nil {
		t.Fatal(err)
	}
	if b.Posted != 70 {
		t.Errorf("BUG: %d posted after the repair (%v), want 70: entries past their window were replayed", b.Posted, outcomes(rs))
	}
	for _, r := range rs {
		if r.Outcome != "skipped" || !errors.Is(r.Err, pgjournal.ErrUnrepairable) {
			t.Errorf("BUG: %s %s: %s %v, want skipped with ErrUnrepairable", r.Kind, r.Op, r.Outcome, r.Err)
		}
	}
}

// CheckpointWallet refuses an account in drift (the trim would take the
// entries behind it): the lost credit stays repairable, and once repaired
// the checkpoint goes through.
func TestCheckpointWallet_refusesDrift(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	walletWork(t, f.led, "ckd", 10, "ckd/x")
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "ckd-lost", Account: "ckd/x", Amount: 250}); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, []string{"ckd/x"})
	f.loseNewest("ckd/x", "cr", 250, "tx:ckd-lost")
	before := f.walletIDs("ckd/x")
	_, trimmed, err := f.book.CheckpointWallet(ctx, f.led, "ckd/x")
	if !errors.Is(err, pgjournal.ErrDrift) || trimmed != 0 {
		t.Errorf("BUG: checkpoint of an account in drift: %d trimmed, %v; want ErrDrift and nothing trimmed", trimmed, err)
	}
	if got := f.walletIDs("ckd/x"); !slices.Equal(got, before) {
		t.Errorf("BUG: the journal changed: %v, was %v", got, before)
	}
	rs, err := f.book.RepairWallet(ctx, f.led, "ckd/x")
	if err != nil || !slices.Equal(outcomes(rs), []string{"ckd-lost applied"}) {
		t.Fatalf("BUG: repair after the checkpoint: %v, %v; want ckd-lost applied", outcomes(rs), err)
	}
	if _, _, err := f.book.CheckpointWallet(ctx, f.led, "ckd/x"); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, []string{"ckd/x"})
	f.noDrift(nil, []string{"ckd/x"})
}

// A stream ID seen again with other content (Redis restarted without
// persistence on a clock that lags, so its new entries take IDs the book
// has booked) is recorded as a reused_id anomaly, never skipped as a
// redelivery; an entry seen again with the same content is a redelivery.
func TestSinkStock_reusedStreamID(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	sku := "ru/s"
	if err := f.inv.Create(ctx, sku, 50); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := f.inv.Deduct(ctx, stock.Order{ID: fmt.Sprint("ru-o", i), Buyer: "b", Items: []stock.Item{{SKU: sku, Qty: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp([]string{sku}, nil)
	jk := f.journalKey(sku)
	old := readStream(t, f.rdb, jk)
	// The journal written again: the creation as it was, then another
	// order under the first deduct's ID.
	f.rdb.Del(ctx, jk)
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: old[0].ID, Values: old[0].Values})
	reused := old[1].ID
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: reused, Values: []any{"op", "other", "kind", "deduct",
		"sku", sku, "buyer", "c", "d_avail", "-5", "d_sold", "5", "avail", "45", "sold", "5", "supply", "50"}})
	// The journal's last ID is booked already: wait for the anomaly.
	f.runUntil(f.stockSink(sku), "the reused ID recorded", func() bool {
		return f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1", sku) > 0
	})
	as, err := f.book.Anomalies(ctx, "stock", sku)
	if err != nil {
		t.Fatal(err)
	}
	if got := anomalyKinds(as)[sku]; !slices.Equal(got, []string{"reused_id " + reused}) {
		t.Fatalf("BUG: anomalies %v, want reused_id %s only (the creation is a redelivery)", got, reused)
	}
	if n := f.int("SELECT count(*) FROM $S.stock_entries WHERE sku = $1 AND op = 'other'", sku); n != 0 {
		t.Fatalf("the entry under a reused ID was booked over the first")
	}
}

// The wallet sink reads on from its position: an entry at the position
// written again with other content, and entries written below it, are
// seen and recorded, never skipped.
func TestSinkWallet_reusedStreamID(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	acct := "ru/w"
	if err := f.led.Open(ctx, acct, wallet.WithCurrency("EUR")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.led.Credit(ctx, wallet.Tx{ID: fmt.Sprint("ru-c", i), Account: acct, Amount: 10}); err != nil {
			t.Fatal(err)
		}
	}
	f.catchUp(nil, []string{acct})
	jk := f.journalKey(acct)
	old := readStream(t, f.rdb, jk)
	pos := old[len(old)-1].ID
	// 1. The entry at the book's position written again with other content.
	f.rdb.Del(ctx, jk)
	for _, m := range old[:len(old)-1] {
		f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: m.ID, Values: m.Values})
	}
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: pos, Values: []any{"tx", "other", "kind", "credit", "delta", "99",
		"hdelta", "0", "posted", "119", "held", "0"}})
	f.runUntil(f.walletSink(acct), "the reused ID recorded", func() bool {
		return f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1", acct) > 0
	})
	as, err := f.book.Anomalies(ctx, "wallet", acct)
	if err != nil {
		t.Fatal(err)
	}
	if got := anomalyKinds(as)[acct]; !slices.Equal(got, []string{"reused_id " + pos}) {
		t.Fatalf("BUG: anomalies %v, want reused_id %s", got, pos)
	}
	// 2. The journal rewritten below the book's position: its entries are
	// read and booked (or recorded), not skipped.
	f.rdb.Del(ctx, jk)
	for _, m := range old[:2] {
		f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: m.ID, Values: m.Values})
	}
	ms, seq, _ := strings.Cut(old[2].ID, "-")
	below := ms + "-" + fmt.Sprint(mustAtoi(t, seq)+1) // after old[2], before pos
	if below == pos {
		t.Skip("no stream ID free between the entries")
	}
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: below, Values: []any{"tx", "late", "kind", "credit", "delta", "7",
		"hdelta", "0", "posted", "17", "held", "0"}})
	f.catchUp(nil, []string{acct})
	if n := f.int("SELECT count(*) FROM $S.wallet_entries WHERE account = $1 AND op = 'late'", acct) +
		f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1 AND stream_id = $2", acct, below); n == 0 {
		t.Fatalf("BUG: the entry %s written below the book's position %s was skipped silently", below, pos)
	}
	if keys := driftKeys(f.reconcileWallet(acct)); !slices.Equal(keys, []string{acct}) {
		t.Fatalf("drift on %v, want %s", keys, acct)
	}
}

func readStream(t *testing.T, rdb *redis.Client, key string) []redis.XMessage {
	t.Helper()
	ms, err := rdb.XRange(context.Background(), key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runUntil runs a sink until cond holds, then stops it.
func (f *fixture) runUntil(sink func(ctx context.Context) error, what string, cond func() bool) {
	f.t.Helper()
	stop := runSink(f.t, sink)
	waitFor(f.t, what, cond)
	if err := stop(); err != nil {
		f.t.Fatal(err)
	}
}

// A journal written again with other content under the book's position
// (Redis restarted without persistence on a clock that went back) may hold
// new entries below the position too: the wallet sink reads it again from
// its start and books them, whether it read the position in this run or
// in an earlier one.
func TestSinkWallet_positionRewrittenWithEntriesBelow(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprint("running=", running), func(t *testing.T) {
			f := shared(t)
			ctx := t.Context()
			acct := "rw/w"
			if err := f.led.Open(ctx, acct, wallet.WithCurrency("EUR")); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				time.Sleep(2 * time.Millisecond) // each entry in a millisecond of its own: an ID is free below the last
				if _, err := f.led.Credit(ctx, wallet.Tx{ID: fmt.Sprint("rw-c", i), Account: acct, Amount: 10}); err != nil {
					t.Fatal(err)
				}
			}
			f.catchUp(nil, []string{acct})
			var stop func() error
			if running {
				stop = runSink(t, f.walletSink(acct))
				// The sink reads the entry at the position in this run.
				time.Sleep(2 * time.Millisecond)
				if _, err := f.led.Credit(ctx, wallet.Tx{ID: "rw-c3", Account: acct, Amount: 10}); err != nil {
					t.Fatal(err)
				}
				f.waitWallet(acct)
			}
			jk := f.journalKey(acct)
			old := readStream(t, f.rdb, jk)
			pos := old[len(old)-1].ID
			ms, seq, _ := strings.Cut(old[len(old)-2].ID, "-")
			below := ms + "-" + fmt.Sprint(mustAtoi(t, seq)+1)
			if below == pos {
				t.Fatalf("no stream ID free below %s", pos)
			}
			// The journal written again at once: the old entries but the
			// last, a new one below the position, and the position's ID
			// with other content.
			posted := 10 * int64(len(old)-2) // after the last entry kept
			ak := f.redisKey("acct", acct)
			_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Del(ctx, jk)
				for _, m := range old[:len(old)-1] {
					p.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: m.ID, Values: m.Values})
				}
				p.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: below, Values: []any{"tx", "late", "kind", "credit", "delta", "7",
					"hdelta", "0", "posted", fmt.Sprint(posted + 7), "held", "0"}})
				p.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: pos, Values: []any{"tx", "other", "kind", "credit", "delta", "99",
					"hdelta", "0", "posted", fmt.Sprint(posted + 106), "held", "0"}})
				p.HSet(ctx, ak, "posted", posted+106)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !running {
				stop = runSink(t, f.walletSink(acct))
			}
			waitFor(t, "the reused ID recorded", func() bool {
				return f.int("SELECT count(*) FROM $S.anomalies WHERE key = $1 AND kind = 'reused_id'", acct) > 0
			})
			// The entry below is booked in the same transaction as the
			// anomaly (the sink read the journal from its start), or never.
			if n := f.int("SELECT count(*) FROM $S.wallet_entries WHERE account = $1 AND op = 'late'", acct); n != 1 {
				t.Errorf("BUG: the entry %s written below the book's position %s, whose entry has other content, was booked %d times; "+
					"promised: \"Each read starts at the entry at the position, which must be there as booked; ... so entries written below the position are booked too\"",
					below, pos, n)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			as, err := f.book.Anomalies(ctx, "wallet", acct)
			if err != nil {
				t.Fatal(err)
			}
			if got := anomalyKinds(as)[acct]; !slices.Equal(got, []string{"gap " + below, "reused_id " + pos}) {
				t.Errorf("anomalies %v, want a gap at %s and reused_id %s", got, below, pos)
			}
			if keys := driftKeys(f.reconcileWallet(acct)); !slices.Equal(keys, []string{acct}) {
				t.Errorf("drift on %v, want %s", keys, acct)
			}
		})
	}
}
