package wallet

import (
	"context"
	"sync"
	"time"

	"github.com/redkit-go/redkit/internal/keys"
)

// Lazy recovery: a transfer across slot groups whose caller died stays in
// flight, its amount held on the source, until something finishes it.
// xbegin.lua marks the source account (field xt); every Credit, Debit,
// same-group Transfer from it and Balance of it sees the mark in its
// script's reply, and the Ledger then finishes the group's transfers that
// have been in flight for staleTransferAge or more (the same steps as
// Recover), before the call returns. So no money stays held because a
// process crashed, without a Recover run or a background worker; the
// mark goes once nothing the account began is left in flight.

// staleTransferAge is how long a transfer across groups stays in flight
// before a call on its source finishes it: far longer than a live call
// takes (a few round trips), so a transfer is normally finished by its own
// caller. Finishing one a live call is still running is harmless (every
// step is idempotent). Tests shorten it (export_test.go).
const staleTransferAge = 10 * time.Second

// lazyCheckEvery bounds how often one Ledger looks for stale transfers of
// one account while the account's transfers are still in flight (each look
// is one round trip).
const lazyCheckEvery = time.Second

// maxLazyChecked bounds the accounts lazyState remembers.
const maxLazyChecked = 4096

// lazyState throttles the looks per account.
type lazyState struct {
	age, every time.Duration // staleTransferAge, lazyCheckEvery but in tests

	mu      sync.Mutex
	checked map[string]time.Time
}

// flagged strips the trailing "xt" a posting or sweep reply carries when
// its account has begun a transfer across groups that may still be in
// flight, and reports whether it was there.
func flagged(v any) (any, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 3 {
		return v, false
	}
	if s, _ := arr[len(arr)-1].(string); s != "xt" {
		return v, false
	}
	return arr[:len(arr)-1], true
}

// recoverStale finishes the transfers of account's slot group that have
// been in flight for staleTransferAge or more. Failures are left for the
// next call (or Recover): the call that triggered it is already decided.
func (l *Ledger) recoverStale(ctx context.Context, account string) {
	now := time.Now()
	l.lazy.mu.Lock()
	if t, ok := l.lazy.checked[account]; ok && now.Sub(t) < l.lazy.every {
		l.lazy.mu.Unlock()
		return
	}
	if l.lazy.checked == nil || len(l.lazy.checked) >= maxLazyChecked {
		l.lazy.checked = map[string]time.Time{}
	}
	l.lazy.checked[account] = now
	l.lazy.mu.Unlock()

	g := keys.Group(account)
	index := l.space.Key(g, "xpend")
	for range 2 { // finish what is stale, then look again so the mark can go
		v, err := l.run(ctx, xstaleScript, []string{l.accountKey(g, account), index},
			l.lazy.age.Milliseconds(), 100)
		ids := strs(v)
		if err != nil || len(ids) == 0 {
			return
		}
		for _, id := range ids {
			if err := l.recoverOne(ctx, g, index, id); err != nil {
				return
			}
		}
	}
}
