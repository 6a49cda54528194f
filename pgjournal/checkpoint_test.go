package pgjournal_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/wallet"
)

// The same history as TestSinkWallet_checkpointTrimmedUnbooked, where
// wallet's own Checkpoint trims entries the book never read (a gap and a
// drift): CheckpointWallet books them before it trims, so the book holds
// every entry, records no anomaly and agrees with Redis.
func TestCheckpointWallet_booksBeforeTrim(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"cw/x", "cw/y"}
	walletWork(t, f.led, "cw", 40, accounts...)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "cw-c", Account: "cw/x", Amount: 7}); err != nil {
		t.Fatal(err)
	}
	before := f.walletIDs("cw/x")
	ck, trimmed, err := f.book.CheckpointWallet(ctx, f.led, "cw/x")
	if err != nil || trimmed != int64(len(before)) {
		t.Fatalf("checkpoint: %v, %d trimmed of %d entries", err, trimmed, len(before))
	}
	f.catchUp(nil, accounts)
	booked := f.bookedIDs("wallet_entries", "account", "cw/x")
	if want := append(before, ck); fmt.Sprint(booked) != fmt.Sprint(want) {
		t.Fatalf("booked %v\nwant     %v", booked, want)
	}
	as, err := f.book.Anomalies(ctx, "wallet", "cw/x")
	if err != nil || len(as) != 0 {
		t.Fatalf("anomalies %v, %v; want none", as, err)
	}
	f.checkBook(nil, accounts)
	pos, err := f.book.WalletPosition(ctx, "cw/x")
	if err != nil || pos != ck {
		t.Fatalf("position %q, %v; want the checkpoint %s", pos, err, ck)
	}
}

// Checkpoints taken while a sink runs and credits are posted: every entry
// trimmed is booked, or the checkpoint says how many were not.
func TestCheckpointWallet_besideSinkAndWrites(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	accounts := []string{"cs/x"}
	walletWork(t, f.led, "cs", 10, accounts...)
	stop := runSink(t, f.walletSink(accounts...))
	var wg sync.WaitGroup
	writes := make(chan error, 1)
	wg.Go(func() {
		for i := range 200 {
			if _, err := f.led.Credit(ctx, wallet.Tx{ID: fmt.Sprint("cs-w", i), Account: "cs/x", Amount: 1}); err != nil {
				writes <- err
				return
			}
		}
	})
	lost := false
	for range 10 {
		_, _, err := f.book.CheckpointWallet(ctx, f.led, "cs/x")
		switch {
		case errors.Is(err, pgjournal.ErrTrimmedUnbooked):
			lost = true // the window wallet's Checkpoint leaves open; the book says so
		case errors.Is(err, pgjournal.ErrBusy):
		case err != nil:
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(writes)
	if err := <-writes; err != nil {
		t.Fatal(err)
	}
	f.drain(nil, accounts, stop)
	as, err := f.book.Anomalies(ctx, "wallet", "cs/x")
	if err != nil {
		t.Fatal(err)
	}
	if !lost && len(as) != 0 {
		t.Fatalf("no checkpoint reported a loss, yet the sink recorded %v", as)
	}
	if !lost {
		f.checkBook(nil, accounts)
	}
}
