package pgjournal_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// A failover to a replica that missed the last writes: one acknowledged
// without replica acknowledgement, one applied on the primary whose
// replica acknowledgement timed out (the caller got ErrReplicaAck). The
// book booked both from the old primary; on the new one the reconciler
// reports the account, and only it, with both entries in BookOnly. The
// caller's retry of the unacknowledged credit is applied on the new
// primary and booked as a duplicate, not twice; RepairWallet gives back
// the credit Redis lost; then Redis and the book agree.
func TestFailover_lostWritesReconciledAndRepaired(t *testing.T) {
	pair := redistest.NewPair(t, redistest.Options{})
	f := newFixture(t, sharedPG, pair.Primary)
	ctx := t.Context()
	accounts := []string{"fo/a", "fo/b"}
	walletWork(t, f.led, "fo", 30, accounts...)
	replica, promote := detachReplica(t, pair)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "fo-lost", Account: "fo/a", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	acked, err := wallet.New(f.rdb, wallet.WithKeyPrefix(f.prefix), wallet.WithReplicaAck(1, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer acked.Close()
	unacked := wallet.Tx{ID: "fo-unacked", Account: "fo/a", Amount: 50}
	if _, err := acked.Credit(ctx, unacked); !errors.Is(err, wallet.ErrReplicaAck) {
		t.Fatalf("credit without a replica: %v, want ErrReplicaAck", err)
	}
	f.catchUp(nil, accounts)
	booked := f.bookedIDs("wallet_entries", "account", "fo/a")

	// Failover: the replica becomes the primary; the service reconnects.
	promote()
	led, err := wallet.New(replica, wallet.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	f.led, f.rdb = led, replica
	ds := f.reconcileWallet(accounts...)
	if len(ds) != 1 || ds[0].Key != "fo/a" || ds[0].Book[0]-ds[0].Redis[0] != 150 ||
		!slices.Equal(ds[0].BookOnly, booked[len(booked)-2:]) {
		t.Fatalf("drift %+v, want fo/a short of 150 explained by %v", ds, booked[len(booked)-2:])
	}

	// The caller retries the credit it was not sure of.
	if res, err := led.Credit(ctx, unacked); err != nil || res.Replayed {
		t.Fatalf("retry on the new primary: %+v, %v; want it applied", res, err)
	}
	rs, err := f.book.RepairWallet(ctx, led, "fo/a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rs), []string{"fo-lost applied", "fo-unacked already"}; !slices.Equal(got, want) {
		t.Fatalf("repair: %v, want %v", got, want)
	}
	f.catchUp(nil, accounts)
	f.checkWallet(nil, accounts...)
	if n := f.int("SELECT count(*) FROM $S.wallet_entries WHERE op IN ('fo-lost', 'fo-unacked')"); n != 2 {
		t.Errorf("entries of the two credits booked: %d, want 2", n)
	}
	if ds := f.reconcileWallet(accounts...); len(ds) != 0 {
		t.Fatalf("drift after retry and repair: %+v", ds)
	}
}

// detachReplica waits until pair's replica holds every write so far, then
// stops its replication (its primary is now a dead port) with its data
// kept, so later writes reach the primary alone. It returns a client of
// the replica, and promote, which makes it a primary as a failover would.
func detachReplica(t *testing.T, pair *redistest.Pair) (replica *redis.Client, promote func()) {
	t.Helper()
	ctx := t.Context()
	if err := pair.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	replica = pair.Replica.Client()
	t.Cleanup(func() { _ = replica.Close() })
	if err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	return replica, func() {
		t.Helper()
		if err := replica.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
	}
}
