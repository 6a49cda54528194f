package wallet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/internal/worker"
)

// Hold journal entry kinds.
const (
	KindHold       = "hold"        // Hold: Held grows by the amount
	KindCapture    = "capture"     // Capture: Posted shrinks by the captured amount, Held by the hold's
	KindVoid       = "void"        // Void: Held shrinks by the hold's amount
	KindHoldExpire = "hold_expire" // the hold expired: Held shrinks by its amount
)

// HoldReq reserves part of an account's available balance.
type HoldReq struct {
	// ID identifies the hold within its account (same grammar as a
	// transaction ID). Hold is idempotent by it; Capture and Void name it.
	ID      string
	Account string
	// Amount is reserved at once, checked against the available balance
	// (Available - Amount >= -Overdraft), in minor units 1..2^53-1.
	Amount int64
	// TTL is how long the hold stays open, 1s..7d, on the server's clock.
	// An open hold past its TTL is released, never captured.
	TTL  time.Duration
	Memo string // at most MaxMemo bytes of UTF-8, on the hold's journal entries
}

// Hold reserves r.Amount of an account's available balance: Held grows,
// Available shrinks, Posted is unchanged, until Capture, Void or the TTL
// releases it. It is idempotent by r.ID as Credit is by its transaction
// ID (a repeated call returns the first Result, Replayed set; other fields
// give a *ConflictError naming "amount", "ttl" or "memo"). Result.Expires
// is the hold's expiry on the server's clock. Refusals, remembered under
// r.ID: ErrInsufficientFunds, ErrAccountClosed, ErrAccountNotFound (a hold ID
// refused before its account was opened stays refused). Also ErrInvalid,
// ErrUnknownOutcome.
func (l *Ledger) Hold(ctx context.Context, r HoldReq, opts ...CallOption) (res Result, err error) {
	ctx, op := l.tel.start(ctx, "hold")
	defer func() { op.end(err, res.Replayed) }()
	res.TxID = r.ID
	if err := l.check(valid.Name("hold ID", r.ID), valid.Name("account", r.Account),
		valid.Amount("amount", r.Amount), valid.Duration("hold TTL", r.TTL, valid.HoldTTLMin, valid.HoldTTLMax),
		validMemo(r.Memo)); err != nil {
		return res, err
	}
	fenceKeys, fenceArgs, err := l.fence(keys.Group(r.Account), opts)
	if err != nil {
		return res, err
	}
	v, err := l.writeSwept(ctx, []string{r.Account}, holdScript, append(l.accountKeys(r.Account), fenceKeys...),
		append([]any{r.ID, strconv.FormatInt(r.Amount, 10), r.TTL.Milliseconds(), r.Memo, retry.Nonce(),
			l.cfg.window.Milliseconds()}, fenceArgs...)...)
	res, err = l.posting("hold", r.ID, v, err, &res, r.Account, "", "", "")
	if reply := strs(v); res.EntryID != "" && len(reply) == 12 {
		exp, _ := strconv.ParseInt(reply[10], 10, 64)
		now, _ := strconv.ParseInt(reply[11], 10, 64)
		res.Expires = time.UnixMilli(exp)
		l.reclaim.schedule(l, r.Account, time.Duration(exp-now)*time.Millisecond, trace.SpanContextFromContext(ctx))
	}
	return res, err
}

// Capture posts amount (1..the held amount) of an open hold as a debit and
// releases the rest of the hold, at most once: a repeated Capture with the
// same amount returns the first Result (Replayed set), another amount a
// *ConflictError naming "amount". Errors: ErrHoldNotFound (never placed,
// refused, or forgotten after the window), ErrHoldExpired, a *ConflictError
// naming "resolution" when the hold was voided, ErrAccountClosed when the account
// is closed (the hold stays open), ErrInvalid (amount above the hold).
func (l *Ledger) Capture(ctx context.Context, account, holdID string, amount int64, opts ...CallOption) (res Result, err error) {
	ctx, op := l.tel.start(ctx, "capture")
	defer func() { op.end(err, res.Replayed) }()
	if err := valid.Amount("amount", amount); err != nil {
		res.TxID = holdID
		return res, err
	}
	return l.resolve(ctx, "capture", account, holdID, amount, opts)
}

// Void releases an open hold, at most once: a repeated Void returns the
// first Result (Replayed set). Voiding works on a closed account. Errors:
// ErrHoldNotFound, ErrHoldExpired, a *ConflictError naming "resolution"
// when the hold was captured.
func (l *Ledger) Void(ctx context.Context, account, holdID string, opts ...CallOption) (res Result, err error) {
	ctx, op := l.tel.start(ctx, "void")
	defer func() { op.end(err, res.Replayed) }()
	return l.resolve(ctx, "void", account, holdID, 0, opts)
}

func (l *Ledger) resolve(ctx context.Context, kind, account, holdID string, amount int64, opts []CallOption) (Result, error) {
	res := Result{TxID: holdID}
	if err := l.check(valid.Name("hold ID", holdID), valid.Name("account", account)); err != nil {
		return res, err
	}
	fenceKeys, fenceArgs, err := l.fence(keys.Group(account), opts)
	if err != nil {
		return res, err
	}
	v, err := l.writeSwept(ctx, []string{account}, resolveScript, append(l.accountKeys(account), fenceKeys...),
		append([]any{holdID, kind, strconv.FormatInt(amount, 10), retry.Nonce(),
			l.cfg.window.Milliseconds()}, fenceArgs...)...)
	return l.posting(kind, holdID, v, err, &res, account, "", "", "")
}

// reclaimer releases expired holds of the accounts on which this Ledger
// placed holds, so their funds come back (and their journal entries are
// written) without waiting for the next call on the account. Holds placed
// by other processes are released by the first call on their account.
type reclaimer struct {
	mu     sync.Mutex
	due    map[string]time.Time         // account -> when to sweep it
	causes map[string]trace.SpanContext // account -> the span of its last Hold, linked from the sweep
	wake   chan struct{}
	w      worker.Worker
}

// schedule asks for a sweep of account after d, starting the reclaimer
// goroutine on first use.
func (r *reclaimer) schedule(l *Ledger, account string, d time.Duration, cause trace.SpanContext) {
	at := time.Now().Add(d + reclaimSlack)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due == nil {
		r.due = map[string]time.Time{}
		r.causes = map[string]trace.SpanContext{}
		r.wake = make(chan struct{}, 1)
	}
	r.causes[account] = cause
	if cur, ok := r.due[account]; !ok || at.Before(cur) {
		r.due[account] = at
	}
	r.w.Start(func(ctx context.Context) { r.loop(ctx, l) })
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// reclaimSlack covers a server clock slightly ahead of ours.
const reclaimSlack = 50 * time.Millisecond

// loop sweeps accounts as they fall due until ctx, which close cancels,
// ends; a sweep in flight then is cancelled too.
func (r *reclaimer) loop(ctx context.Context, l *Ledger) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		next := now.Add(time.Hour)
		var ready []string
		r.mu.Lock()
		for a, at := range r.due {
			if !at.After(now) {
				ready = append(ready, a)
				delete(r.due, a)
			} else if at.Before(next) {
				next = at
			}
		}
		r.mu.Unlock()
		for _, a := range ready {
			if r.sweepOne(ctx, l, a) {
				return
			}
		}
		if len(ready) > 0 {
			continue
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// sweepOne sweeps one account and reschedules it when more is due; it
// reports whether the reclaimer was stopped meanwhile.
func (r *reclaimer) sweepOne(ctx context.Context, l *Ledger, account string) (stopped bool) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r.mu.Lock()
	cause := r.causes[account]
	r.mu.Unlock()
	sctx, end := l.tel.reclaim(sctx, cause)
	next, err := l.sweepAcked(sctx, account, sweepLimit)
	end(err)
	if ctx.Err() != nil {
		return true
	}
	switch {
	case errors.Is(err, ErrReplicaAck): // swept; the replicas were behind
	case err != nil && err != ErrAccountNotFound:
		next = time.Second // try again later
	case err != nil:
		next = -1
	}
	r.mu.Lock()
	if next >= 0 {
		at := time.Now().Add(next + reclaimSlack)
		if cur, ok := r.due[account]; !ok || at.Before(cur) {
			r.due[account] = at
		}
	} else if _, ok := r.due[account]; !ok {
		delete(r.causes, account)
	}
	r.mu.Unlock()
	return false
}

// close stops the goroutine and waits for it.
func (r *reclaimer) close() { r.w.Stop() }
