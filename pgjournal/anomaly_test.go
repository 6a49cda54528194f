package pgjournal_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

func anomalyKinds(as []pgjournal.Anomaly) map[string][]string {
	out := map[string][]string{}
	for _, a := range as {
		out[a.Key] = append(out[a.Key], a.Kind+" "+a.StreamID)
	}
	return out
}

// An entry the sink cannot read is recorded as poison and left out of the
// projection; the entries after it are booked as usual.
func TestSink_poisonEntry(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	skus := []string{"p/a", "p/b"}
	accounts := []string{"p/x", "p/y"}
	stockWork(t, f.inv, "p1", 30, skus...)
	walletWork(t, f.led, "p1", 30, accounts...)
	badStock, err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.journalKey("p/a"),
		Values: []any{"op", "x", "kind", "teleport", "sku", "p/a", "d_avail", "5", "avail", "999"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	badWallet, err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.journalKey("p/x"),
		Values: []any{"tx", "y", "kind", "gift", "delta", "100", "posted", "100"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	moreStockWork(t, f.inv, "p2", 30, skus...)
	moreWalletWork(t, f.led, "p2", 30, accounts...)
	f.catchUp(skus, accounts)
	as, err := f.book.Anomalies(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"p/a": {"poison " + badStock}, "p/x": {"poison " + badWallet}}
	if got := anomalyKinds(as); !equalMap(got, want) {
		t.Fatalf("anomalies %v, want %v", got, want)
	}
	f.checkStock(map[string]bool{"p/a " + badStock: true}, skus...)
	f.checkWallet(map[string]bool{"p/x " + badWallet: true}, accounts...)
	// The poison changed nothing in Redis and nothing in the book.
	f.noDrift(skus, accounts)
}

// Entries trimmed from a journal before the sink booked them are never
// skipped silently: never delivered, they surface as a gap at the next
// entry; delivered and then deleted, likewise (stock's Consume
// acknowledges a pending entry the stream no longer holds without handing
// it over). The reconciler reports the SKU, and only it.
func TestSinkStock_trimmedPastUnconsumed(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	skus := []string{"tr/a", "tr/b", "tr/c"}
	stockWork(t, f.inv, "t1", 60, skus...)

	// tr/c: read by the sink's consumer, not acknowledged (a failed
	// batch), then deleted.
	errFail := errors.New("failed batch")
	err := f.inv.Consume(ctx, stock.Consumer{Group: "book", Name: "sink", SKUs: []string{"tr/c"}},
		func(context.Context, []stock.Entry) error { return errFail })
	if !errors.Is(err, errFail) {
		t.Fatal(err)
	}
	cIDs := f.stockIDs("tr/c")
	lostID := cIDs[1]
	if err := f.rdb.XDel(ctx, f.journalKey("tr/c"), lostID).Err(); err != nil {
		t.Fatal(err)
	}
	// tr/a: the oldest entries, never delivered, trimmed.
	aIDs := f.stockIDs("tr/a")
	if len(aIDs) < 5 {
		t.Fatalf("too few entries: %d", len(aIDs))
	}
	firstKept := aIDs[4]
	if err := f.rdb.XTrimMinID(ctx, f.journalKey("tr/a"), firstKept).Err(); err != nil {
		t.Fatal(err)
	}
	f.catchUp(skus, nil)
	as, err := f.book.Anomalies(ctx, "stock", "")
	if err != nil {
		t.Fatal(err)
	}
	got := anomalyKinds(as)
	if !slices.Contains(got["tr/a"], "gap "+firstKept) {
		t.Errorf("tr/a: anomalies %v, want a gap at %s", got["tr/a"], firstKept)
	}
	if !slices.Contains(got["tr/c"], "gap "+cIDs[2]) {
		t.Errorf("tr/c: anomalies %v, want a gap at %s, the entry after the deleted %s", got["tr/c"], cIDs[2], lostID)
	}
	if len(got["tr/b"]) != 0 {
		t.Errorf("tr/b: anomalies %v, want none", got["tr/b"])
	}
	f.checkStock(nil, skus...)
	ds := f.reconcileStock(skus...)
	if keys := driftKeys(ds); !slices.Equal(keys, []string{"tr/a", "tr/c"}) {
		t.Fatalf("drift reported for %v, want tr/a and tr/c: %+v", keys, ds)
	}
	for _, d := range ds {
		if len(d.Anomalies) == 0 {
			t.Errorf("%s: drift without the anomaly behind it", d.Key)
		}
	}
}

// Drift injected into Redis is reported for exactly the keys it touched:
// a level changed without a journal entry, and a write Redis lost after
// the book recorded it (its journal entry gone and its effect undone, as
// after a failover without replica acknowledgement).
func TestReconcile_reportsInjectedDrift(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	skus := []string{"rd/a", "rd/b", "rd/c"}
	accounts := []string{"rd/x", "rd/y", "rd/z"}
	stockWork(t, f.inv, "rd", 60, skus...)
	walletWork(t, f.led, "rd", 60, accounts...)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "rd-last", Account: "rd/y", Amount: 40}); err != nil {
		t.Fatal(err)
	}
	f.catchUp(skus, accounts)
	f.noDrift(skus, accounts) // before any injection
	// rd/b: three units appear in Redis with no journal entry.
	if err := f.rdb.HIncrBy(ctx, f.redisKey("sku", "rd/b"), "available", 3).Err(); err != nil {
		t.Fatal(err)
	}
	// rd/y: the last credit is lost in Redis.
	ids := f.walletIDs("rd/y")
	lost := ids[len(ids)-1]
	if err := f.rdb.XDel(ctx, f.journalKey("rd/y"), lost).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.HIncrBy(ctx, f.redisKey("acct", "rd/y"), "posted", -40).Err(); err != nil {
		t.Fatal(err)
	}
	ds := f.reconcileStock(skus...)
	if len(ds) != 1 || ds[0].Key != "rd/b" || ds[0].Redis[0]-ds[0].Book[0] != 3 {
		t.Errorf("stock drift %+v, want rd/b available +3", ds)
	}
	ds = f.reconcileWallet(accounts...)
	if len(ds) != 1 || ds[0].Key != "rd/y" || ds[0].Book[0]-ds[0].Redis[0] != 40 || !slices.Equal(ds[0].BookOnly, []string{lost}) {
		t.Errorf("wallet drift %+v, want rd/y posted -40 explained by %s", ds, lost)
	}
}

func equalMap(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// wallet.Ledger.Checkpoint trims an account's journal whether or not the
// book read it: the checkpoint the sink finds next is booked with a gap,
// and the reconciler reports the account.
func TestSinkWallet_checkpointTrimmedUnbooked(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"ck/x", "ck/y"}
	walletWork(t, f.led, "ck", 40, accounts...)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "ck-c", Account: "ck/x", Amount: 7}); err != nil {
		t.Fatal(err)
	}
	ck, trimmed, err := f.led.Checkpoint(ctx, "ck/x")
	if err != nil || trimmed == 0 {
		t.Fatalf("checkpoint: %v, %d trimmed", err, trimmed)
	}
	f.catchUp(nil, accounts)
	as, err := f.book.Anomalies(ctx, "wallet", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := anomalyKinds(as), map[string][]string{"ck/x": {"gap " + ck}}; !equalMap(got, want) {
		t.Fatalf("anomalies %v, want %v", got, want)
	}
	f.checkWallet(nil, accounts...)
	ds := f.reconcileWallet(accounts...)
	if keys := driftKeys(ds); !slices.Equal(keys, []string{"ck/x"}) {
		t.Fatalf("drift reported for %v, want ck/x: %+v", keys, ds)
	}
}

func xaddPoison(stream string) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: stream, Values: []any{"op", "x", "kind", "teleport", "sku", "lp/a"}}
}

// A credit and a transfer Redis lost, markers and all (as in a failover
// without replica acknowledgement), are given back from the book once; a
// client retrying them within the idempotency window is answered from the
// restored markers; the sink books the replayed entries as duplicates.
func TestRepairWallet_lostWrites(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"rp/x", "rp/y"}
	walletWork(t, f.led, "rp", 40, accounts...)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "rp-credit", Account: "rp/x", Amount: 500, Memo: "top-up"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Transfer(ctx, wallet.Transfer{ID: "rp-move", From: "rp/x", To: "rp/y", Amount: 70}); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, accounts)
	before := map[string]wallet.Balance{}
	for _, a := range accounts {
		b, err := f.led.Balance(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		before[a] = b
	}
	// Redis loses the last two operations: entries, effects and markers.
	xIDs, yIDs := f.walletIDs("rp/x"), f.walletIDs("rp/y")
	f.loseLast(f.journalKey("rp/x"), xIDs, 2)
	f.loseLast(f.journalKey("rp/y"), yIDs, 1)
	f.rdb.HIncrBy(ctx, f.redisKey("acct", "rp/x"), "posted", -430)
	f.rdb.HIncrBy(ctx, f.redisKey("acct", "rp/x"), "cr", -500)
	f.rdb.HIncrBy(ctx, f.redisKey("acct", "rp/x"), "tout", -70)
	f.rdb.HIncrBy(ctx, f.redisKey("acct", "rp/y"), "posted", -70)
	f.rdb.HIncrBy(ctx, f.redisKey("acct", "rp/y"), "tin", -70)
	for _, id := range []string{"rp-credit", "rp-move"} {
		ks, _ := f.rdb.Keys(ctx, f.prefix+":*:tx:"+id).Result()
		if len(ks) == 0 {
			t.Fatalf("no marker key for %s", id)
		}
		f.rdb.Del(ctx, ks...)
	}
	ds := f.reconcileWallet(accounts...)
	if keys := driftKeys(ds); !slices.Equal(keys, accounts) {
		t.Fatalf("drift for %v, want both accounts: %+v", keys, ds)
	}
	rs, err := f.book.RepairWallet(ctx, f.led, "rp/x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"rp-credit applied", "rp-move applied"}; !slices.Equal(got, want) {
		t.Fatalf("repair: %v (%+v), want %v", got, rs, want)
	}
	// The transfer restored rp/y too; repairing it finds nothing to do.
	if rs, err := f.book.RepairWallet(ctx, f.led, "rp/y"); err != nil || len(rs) != 0 {
		t.Fatalf("repair rp/y: %+v, %v; want nothing left", rs, err)
	}
	for _, a := range accounts {
		b, err := f.led.Balance(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if b.Posted != before[a].Posted || b.Held != before[a].Held {
			t.Errorf("%s after repair: %+v, want %+v", a, b, before[a])
		}
	}
	// The sink is stopped: the replayed entries wait in Redis's journal,
	// and are not counted as lag on top of the booked originals.
	if ds := f.reconcileWallet(accounts...); len(ds) != 0 {
		t.Fatalf("drift right after repair: %+v", ds)
	}
	stop := runSink(t, f.walletSink(accounts...))
	// A client's retry within the window is answered from the markers.
	res, err := f.led.Credit(ctx, wallet.Tx{ID: "rp-credit", Account: "rp/x", Amount: 500, Memo: "top-up"})
	if err != nil || !res.Replayed {
		t.Fatalf("retry after repair: %+v, %v; want a replay", res, err)
	}
	f.drain(nil, accounts, stop)
	// The replayed entries are booked as duplicates, not twice.
	f.checkWallet(nil, accounts...)
	if n := f.int("SELECT count(*) FROM $S.anomalies WHERE kind = 'duplicate_op'"); n != 3 {
		t.Errorf("duplicate_op anomalies: %d, want 3 (credit, transfer out and in)", n)
	}
	if ds := f.reconcileWallet(accounts...); len(ds) != 0 {
		t.Fatalf("drift after repair: %+v", ds)
	}
	if err := f.led.Verify(ctx, "rp/x"); err != nil {
		t.Fatal(err)
	}
}

// loseLast removes the last n entries of a journal whose entry IDs are ids
// as a Redis that never had them would hold it: the entries gone and the
// stream's last ID and entries-added counter set back (wallet's Verify
// counts the entries against that counter, which XDEL alone leaves).
func (f *fixture) loseLast(stream string, ids []string, n int) {
	f.t.Helper()
	ctx := context.Background()
	info, err := f.rdb.XInfoStream(ctx, stream).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.rdb.XDel(ctx, stream, ids[len(ids)-n:]...).Err(); err != nil {
		f.t.Fatal(err)
	}
	err = f.rdb.Do(ctx, "XSETID", stream, ids[len(ids)-n-1], "ENTRIESADDED", info.EntriesAdded-int64(n), "MAXDELETEDID", "0-0").Err()
	if err != nil {
		f.t.Fatal(err)
	}
}

// A stock journal entry with none of stock's fields (written there by hand)
// is damaged: a poison anomaly, left out of the projection. Under a stream
// ID the book holds, it is an entry with other content: a reused_id
// anomaly, never skipped.
func TestSinkStock_entryWithoutFields(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	skus := []string{"nf/a", "nf/b"}
	stockWork(t, f.inv, "nf", 6, skus...)
	f.catchUp(skus, nil)
	// nf/a: a damaged entry appended.
	bad, err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.journalKey("nf/a"), Values: []any{"note", "x"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	// nf/b: its journal written again, the last booked ID holding the
	// damaged entry.
	jk := f.journalKey("nf/b")
	old := readStream(t, f.rdb, jk)
	f.rdb.Del(ctx, jk)
	for _, m := range old[:len(old)-1] {
		f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: m.ID, Values: m.Values})
	}
	reused := old[len(old)-1].ID
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: jk, ID: reused, Values: []any{"note", "x"}})
	f.rdb.XGroupDestroy(ctx, jk, "book")
	f.runUntil(f.stockSink(skus...), "the damaged entries handed to the sink", func() bool {
		n, _ := f.rdb.XInfoGroups(ctx, jk).Result()
		m, _ := f.rdb.XInfoGroups(ctx, f.journalKey("nf/a")).Result()
		return len(n) == 1 && n[0].LastDeliveredID == reused && n[0].Pending == 0 &&
			len(m) == 1 && m[0].LastDeliveredID == bad && m[0].Pending == 0
	})
	as, err := f.book.Anomalies(ctx, "stock", "")
	if err != nil {
		t.Fatal(err)
	}
	got := anomalyKinds(as)
	if !slices.Equal(got["nf/a"], []string{"poison " + bad}) {
		t.Errorf("BUG: \"a damaged entry is a poison anomaly\": an entry without stock's fields at %s recorded as %v, want poison", bad, got["nf/a"])
	}
	if !slices.Equal(got["nf/b"], []string{"reused_id " + reused}) {
		t.Errorf("BUG: \"a stream ID seen again with other content is a reused_id anomaly, never skipped\": "+
			"a damaged entry under the booked ID %s recorded as %v, want reused_id", reused, got["nf/b"])
	}
}
