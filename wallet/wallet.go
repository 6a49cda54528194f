package wallet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

// MaxMemo is the longest memo, in bytes, a posting may carry.
const MaxMemo = 256

// layoutVersion is the v<N> of every key: 2 names a transfer's inbound
// record by source group and ID and puts running totals in checkpoints.
const layoutVersion = 2

// Ledger keeps accounts and their journals in Redis. It is safe for
// concurrent use. Create it with New.
type Ledger struct {
	rdb     redis.UniversalClient
	cfg     config
	space   keys.Space
	tel     *telemetry
	reclaim reclaimer

	closeOnce sync.Once
	recoverer *recoverer
	lazy      lazyState

	windowArg any // the idempotency window in milliseconds, boxed once for the scripts
}

// New returns a Ledger storing its data through rdb, a *redis.Client or a
// *redis.ClusterClient (WithReplicaAck and Recover need one of those to
// find a key's primary). A nil rdb or an invalid option is an error wrapping
// ErrInvalid, and no Ledger is returned.
func New(rdb redis.UniversalClient, opts ...Option) (*Ledger, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: wallet.New needs a Redis client", ErrInvalid)
	}
	cfg := newConfig(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	cfg.policy = cfg.policy.For(rdb) // whether go-redis re-sends decides what a failure means
	l := &Ledger{
		rdb:       rdb,
		cfg:       cfg,
		windowArg: cfg.window.Milliseconds(),
		space:     keys.Space{Prefix: cfg.prefix, Module: "wallet", Version: layoutVersion},
		tel:       newTelemetry(cfg.providers, cfg.label),
		lazy:      lazyState{age: staleTransferAge, every: lazyCheckEvery},
	}
	if cfg.recoverEvery > 0 {
		l.startRecoverer(cfg.recoverEvery)
	}
	return l, nil
}

// Close stops the Ledger's background work (the hold reclaimer and the
// WithRecovery worker) and waits for it. It does not close rdb, and calls
// made after Close still work; holds are then released by the next call on
// their account. (So the package has no ErrClosed: an account closed with
// CloseAccount is ErrAccountClosed.)
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.reclaim.close()
		l.recoverer.close()
	})
	return nil
}

// IdempotencyWindow returns how long this Ledger's scripts keep a
// transaction's marker (WithIdempotencyWindow): a call with the same ID
// within it is answered from the marker; after it, it is a new transaction.
func (l *Ledger) IdempotencyWindow() time.Duration { return l.cfg.window }

// Tx is a credit or a debit of one account.
type Tx struct {
	// ID identifies the transaction (1–128 bytes of A-Z a-z 0-9 . _ - :
	// and at most one '/'). It is remembered, with the outcome, for the
	// idempotency window; IDs are unique per slot group (see the package
	// documentation).
	ID string
	// Account is the account ID; the part before a '/' is its slot group.
	Account string
	// Amount is the amount in minor units, 1..2^53-1.
	Amount int64
	// Currency, when not empty, must equal the account's currency, or the
	// transaction is refused with ErrCurrencyMismatch.
	Currency string
	// Memo is free text of at most MaxMemo bytes of UTF-8, stored in the
	// journal entry.
	Memo string
}

// Transfer moves an amount from one account to another of the same
// currency, in the same slot group (one script) or in another (in steps:
// see Ledger.Transfer).
type Transfer struct {
	ID     string // transaction ID, as in Tx
	From   string // source account
	To     string // destination account, in any slot group
	Amount int64  // minor units, 1..2^53-1
	Memo   string // as in Tx, stored on both journal entries
}

// Balance is an account's state.
type Balance struct {
	Posted    int64  // sum of all postings
	Held      int64  // reserved by open holds
	Available int64  // Posted - Held; a debit needs Available - amount >= -Overdraft
	Overdraft int64  // how far below zero Available may go
	Currency  string // the account's currency code
	Closed    bool   // CloseAccount was called; no postings are accepted
}

// Result is the outcome of an accepted transaction. A repeated call with the
// same transaction ID and fields returns the first call's Result with
// Replayed set.
type Result struct {
	TxID string
	// Replayed is true when an earlier call had already applied the
	// transaction; false when this call applied it (even if the Ledger's own
	// retry of this call found its first attempt's work).
	Replayed bool
	// Balance is the account's (for a Transfer, the source's) balance right
	// after the transaction was applied; a replay returns the same values.
	Balance Balance
	// To is the destination's balance right after a Transfer.
	To Balance
	// EntryID is the transaction's journal entry on the account (the
	// source, for a Transfer); ToEntryID the destination's entry.
	EntryID, ToEntryID string
	// Time is the server time at which the transaction was applied.
	Time time.Time
	// Expires is a hold's expiry on the server's clock (Hold only).
	Expires time.Time
}

func (l *Ledger) accountKey(group, account string) string {
	return l.space.Key(group, "acct", account)
}

func (l *Ledger) journalKey(group, account string) string {
	return l.space.Key(group, "journal", account)
}

func (l *Ledger) txKey(group, id string) string { return l.space.Key(group, "tx", id) }

// holdKeys are an account's holds hash and hold index.
func (l *Ledger) holdKeys(group, account string) (holds, index string) {
	return l.space.Key(group, "holds", account), l.space.Key(group, "hidx", account)
}

// accountKeys are the keys every script on an account takes first:
// account hash, journal, holds hash, hold index.
func (l *Ledger) accountKeys(account string) []string {
	g := keys.Group(account)
	h, x := l.holdKeys(g, account)
	return []string{l.accountKey(g, account), l.journalKey(g, account), h, x}
}

// Open creates an account, or does nothing when it exists with the same
// settings. WithCurrency is required. Errors: ErrInvalid, a *ConflictError
// (field "currency" or "overdraft") when the account exists with other
// settings, ErrAccountClosed when it was closed (accounts are never reopened),
// ErrReplicaAck (WithReplicaAck: too few replicas have the account, which
// exists on the primary).
func (l *Ledger) Open(ctx context.Context, account string, opts ...AccountOption) (err error) {
	ctx, op := l.tel.start(ctx, "open")
	defer func() { op.end(err, false) }()
	var ac accountConfig
	for _, o := range opts {
		if o != nil {
			o.applyAccount(&ac)
		}
	}
	if err := l.check(valid.Name("account", account), validCurrency(ac.currency, true),
		overdraft(ac.overdraft)); err != nil {
		return err
	}
	v, err := l.write(ctx, openScript, l.accountKeys(account), ac.currency, strconv.FormatInt(ac.overdraft, 10))
	if v == nil {
		return fmt.Errorf("open %s: %w", account, err)
	}
	ackErr := err // WithReplicaAck: the account exists on the primary all the same
	r := strs(v)
	switch status(r, 0) {
	case "ok", "exists":
		if ackErr != nil {
			return fmt.Errorf("open %s: %w", account, ackErr)
		}
		return nil
	case "closed":
		return withAck(fmt.Errorf("open %s: %w", account, ErrAccountClosed), ackErr)
	case "conflict":
		return withAck(&ConflictError{ID: account, Field: status(r, 1)}, ackErr)
	}
	return fmt.Errorf("open %s: unexpected reply %q", account, r)
}

// Credit adds tx.Amount to an account. It is idempotent by tx.ID: see
// Result and the package documentation. Errors: ErrInvalid (nothing
// written), and, remembered under tx.ID, ErrAccountNotFound, ErrAccountClosed,
// ErrCurrencyMismatch; a *ConflictError when tx.ID was used with other
// fields; ErrUnknownOutcome (joined with the cause) when no attempt got an
// answer.
func (l *Ledger) Credit(ctx context.Context, tx Tx, opts ...CallOption) (Result, error) {
	return l.post(ctx, "credit", tx, opts)
}

// Debit takes tx.Amount from an account when its available balance allows
// (Available - Amount >= -Overdraft), else refuses with
// ErrInsufficientFunds; the refusal is remembered under tx.ID, so a retry
// stays refused even after the account is credited. Other errors as Credit.
func (l *Ledger) Debit(ctx context.Context, tx Tx, opts ...CallOption) (Result, error) {
	return l.post(ctx, "debit", tx, opts)
}

func (l *Ledger) post(ctx context.Context, kind string, tx Tx, opts []CallOption) (res Result, err error) {
	ctx, op := l.tel.start(ctx, kind)
	defer func() { op.end(err, res.Replayed) }()
	res.TxID = tx.ID
	if err := l.check(valid.Name("transaction ID", tx.ID), valid.Name("account", tx.Account),
		valid.Amount("amount", tx.Amount), validCurrency(tx.Currency, false), validMemo(tx.Memo)); err != nil {
		return res, err
	}
	g := keys.Group(tx.Account)
	fenceKeys, fenceArgs, err := l.fence(g, opts)
	if err != nil {
		return res, err
	}
	ak := l.accountKeys(tx.Account)
	amount := strconv.FormatInt(tx.Amount, 10)
	c := canonical(kind, tx.Account, "", amount, tx.Currency, tx.Memo)
	nonce := retry.Nonce()
	v, err := l.writeSwept(ctx, []string{tx.Account}, postScript,
		append([]string{ak[0], ak[1], l.txKey(g, tx.ID), ak[2], ak[3]}, fenceKeys...),
		append([]any{tx.ID, kindArg(kind), tx.Account, amount, tx.Currency, tx.Memo,
			nonce, l.windowArg, c}, fenceArgs...)...)
	if v, stale := flagged(v); stale {
		defer l.recoverStale(ctx, tx.Account)
		return l.posting(kind, tx.ID, v, err, &res, tx.Account, "", c, nonce)
	}
	return l.posting(kind, tx.ID, v, err, &res, tx.Account, "", c, nonce)
}

// posting finishes a posting call: a transport failure, or the decoded
// reply joined with a replica acknowledgement shortfall. canon and nonce
// are the call's canonical description and nonce, against which a stored
// marker is judged.
func (l *Ledger) posting(kind, id string, v any, err error, res *Result, from, to, canon, nonce string) (Result, error) {
	if v == nil {
		return *res, fmt.Errorf("%s %s: %w", kind, id, err)
	}
	r := strs(v)
	if status(r, 0) == "marker" {
		r = judgeMarker(r, canon, nonce, kind == "transfer")
	}
	out, derr := decodePosting(kind, id, r, res, from, to)
	if derr == nil && err != nil {
		return out, fmt.Errorf("%s %s: %w", kind, id, err)
	}
	return out, withAck(derr, err)
}

// fence returns the extra KEYS and ARGV of a fenced call (none without
// WithFence).
func (l *Ledger) fence(group string, opts []CallOption) ([]string, []any, error) {
	cc := newCallConfig(opts)
	if cc.fence == nil {
		return nil, nil, nil
	}
	f := *cc.fence
	if err := fence.Validate(f.Name, f.Token); err != nil {
		return nil, nil, err
	}
	return []string{fence.Key(l.cfg.prefix, group, f.Name)}, []any{fence.Token(f.Token)}, nil
}

// Transfer moves t.Amount from t.From to t.To, accounts of one currency,
// idempotent by t.ID. Within one slot group it is one atomic script. Across
// groups it runs in steps (see the package documentation): the amount is
// held on the source, the destination is credited or refuses, then the
// hold is posted or released; a call interrupted midway leaves the
// transfer in flight, finished by calling again with the same t.ID or by
// Recover. The same account on both sides is ErrSameAccount, before any
// I/O. Refusals (remembered under t.ID): ErrAccountNotFound, ErrAccountClosed,
// ErrCurrencyMismatch, ErrInsufficientFunds, and across groups
// ErrTransferExpired (the destination step came a window or more after the
// first) and ErrDestinationFull (the destination filled up after the
// Ledger read it). A destination the amount would take past 2^53-1 is
// ErrInvalid before anything is written, in and across groups. Across
// groups, a failure after the first step was sent is ErrUnknownOutcome.
// Other errors as Credit.
func (l *Ledger) Transfer(ctx context.Context, t Transfer, opts ...CallOption) (res Result, err error) {
	ctx, op := l.tel.start(ctx, "transfer")
	defer func() { op.end(err, res.Replayed) }()
	res.TxID = t.ID
	call, err := l.transferCall(t, opts)
	if errors.Is(err, ErrCrossGroup) {
		op.acrossGroups = true
		return l.crossTransfer(ctx, t, opts, allSteps)
	}
	if err != nil {
		return res, err
	}
	// Both accounts: the script also answers "again" when the
	// destination's balance in its reply would count an expired hold.
	v, err := l.writeSwept(ctx, []string{t.From, t.To}, call.Script, call.Keys, call.Args...)
	canon, nonce := transferMarker(call)
	if v, stale := flagged(v); stale {
		defer l.recoverStale(ctx, t.From)
		return l.posting("transfer", t.ID, v, err, &res, t.From, t.To, canon, nonce)
	}
	return l.posting("transfer", t.ID, v, err, &res, t.From, t.To, canon, nonce)
}

// transferCall validates a transfer and builds its script call, with a
// fresh nonce.
func (l *Ledger) transferCall(t Transfer, opts []CallOption) (script.Call, error) {
	if err := l.check(valid.Name("transaction ID", t.ID), valid.Name("from account", t.From),
		valid.Name("to account", t.To), valid.Amount("amount", t.Amount), validMemo(t.Memo)); err != nil {
		return script.Call{}, err
	}
	if t.From == t.To {
		return script.Call{}, fmt.Errorf("transfer %s: %w", t.ID, errSameAccount)
	}
	g := keys.Group(t.From)
	if keys.Group(t.To) != g {
		return script.Call{}, fmt.Errorf("transfer %s: %w", t.ID, ErrCrossGroup)
	}
	fenceKeys, fenceArgs, err := l.fence(g, opts)
	if err != nil {
		return script.Call{}, err
	}
	fk, tk := l.accountKeys(t.From), l.accountKeys(t.To)
	amount := strconv.FormatInt(t.Amount, 10)
	c := canonical("transfer", t.From, t.To, amount, "", t.Memo)
	nonce := retry.Nonce()
	return script.Call{
		Script: transferScript,
		Keys:   append([]string{fk[0], fk[1], tk[0], tk[1], l.txKey(g, t.ID), fk[2], fk[3], tk[2], tk[3]}, fenceKeys...),
		Args: append([]any{t.ID, t.From, t.To, amount, t.Memo, nonce,
			l.cfg.window.Milliseconds(), c}, fenceArgs...),
	}, nil
}

// transferMarker returns the canonical description and the nonce a
// transferCall carries (ARGV[8] and ARGV[6] of transfer.lua).
func transferMarker(call script.Call) (canon, nonce string) {
	canon, _ = call.Args[7].(string)
	nonce, _ = call.Args[5].(string)
	return canon, nonce
}

// decodePosting reads the reply of post.lua or transfer.lua:
// {status, replayed, field, time_ms, entry, balance(5) [, entry2, balance(5)]}.
func decodePosting(kind, id string, r []string, res *Result, from, to string) (Result, error) {
	res.Replayed = status(r, 1) == "1"
	st := status(r, 0)
	var refusal error
	switch st {
	case "ok":
		if len(r) < 10 {
			return *res, fmt.Errorf("%s %s: unexpected reply %q", kind, id, r)
		}
		ms, _ := strconv.ParseInt(r[3], 10, 64)
		res.Time = time.UnixMilli(ms)
		res.EntryID = r[4]
		res.Balance = decodeBalance(r[5:10])
		if len(r) >= 16 {
			res.ToEntryID = r[10]
			res.To = decodeBalance(r[11:16])
		}
		return *res, nil
	case "conflict":
		return *res, &ConflictError{ID: id, Field: status(r, 2)}
	case "not_found":
		refusal = fmt.Errorf("account %s: %w", from, ErrAccountNotFound)
	case "to_not_found":
		refusal = fmt.Errorf("account %s: %w", to, ErrAccountNotFound)
	case "closed":
		refusal = fmt.Errorf("account %s: %w", from, ErrAccountClosed)
	case "to_closed":
		refusal = fmt.Errorf("account %s: %w", to, ErrAccountClosed)
	case "currency":
		refusal = ErrCurrencyMismatch
	case "insufficient":
		refusal = ErrInsufficientFunds
	case "hold_not_found":
		refusal = ErrHoldNotFound
	case "hold_expired":
		refusal = ErrHoldExpired
	case "stale_fence":
		refusal = ErrStaleFence
	case "again":
		return *res, fmt.Errorf("%s %s: expired holds left unreleased; nothing was posted, call again", kind, id)
	default:
		return *res, fmt.Errorf("%s %s: unexpected reply %q", kind, id, r)
	}
	return *res, fmt.Errorf("%s %s: %w", kind, id, refusal)
}

// decodeBalance reads {currency, overdraft, posted, held, closed}.
func decodeBalance(f []string) Balance {
	od, _ := strconv.ParseInt(f[1], 10, 64)
	posted, _ := strconv.ParseInt(f[2], 10, 64)
	held, _ := strconv.ParseInt(f[3], 10, 64)
	return Balance{Currency: f[0], Overdraft: od, Posted: posted, Held: held,
		Available: posted - held, Closed: f[4] == "1"}
}

// Balance returns an account's current balance, or ErrAccountNotFound.
// Holds whose expiry has passed on the server's clock are released first,
// so Held never counts an expired hold; that release does not wait for
// replicas (WithReplicaAck), see the package documentation.
func (l *Ledger) Balance(ctx context.Context, account string) (_ Balance, err error) {
	ctx, op := l.tel.start(ctx, "balance")
	defer func() { op.end(err, false) }()
	if err := l.check(valid.Name("account", account)); err != nil {
		return Balance{}, err
	}
	// One sweep releases at most sweepLimit holds: sweep until none is due
	// (next > 0 or -1), so Held counts no expired hold.
	for range maxSweepRounds {
		bal, next, err := l.sweep(ctx, account, sweepLimit)
		if err != nil {
			return Balance{}, fmt.Errorf("balance %s: %w", account, err)
		}
		if next != 0 {
			return bal, nil
		}
	}
	return Balance{}, fmt.Errorf("balance %s: more expired holds than %d kept arriving; call again", account,
		maxSweepRounds*sweepLimit)
}

// sweepLimit bounds the hold index entries one sweep handles.
const sweepLimit = 1000

// sweep releases an account's expired holds and forgets decided ones past
// the window (at most limit), and returns the balance and how long until
// the next index entry is due (-1: none). It does not wait for replicas:
// Balance reads through it, and a posting after it waits for it too.
func (l *Ledger) sweep(ctx context.Context, account string, limit int) (Balance, time.Duration, error) {
	bal, next, _, err := l.sweepThen(ctx, account, limit, true)
	return bal, next, err
}

// sweepAcked is sweep for the background work (the hold reclaimer,
// Recover): when it released or forgot a hold, it waits for the replicas
// as WithReplicaAck says, and a shortfall is an error wrapping
// ErrReplicaAck (the sweep happened).
func (l *Ledger) sweepAcked(ctx context.Context, account string, limit int) (time.Duration, error) {
	_, next, handled, err := l.sweepThen(ctx, account, limit, true)
	if err != nil || handled == 0 {
		return next, err
	}
	if _, err := script.Acked(ctx, l.rdb, l.cfg.ack, l.accountKey(keys.Group(account), account)); err != nil {
		if !errors.Is(err, ErrReplicaAck) {
			err = fmt.Errorf("%w: %w", ErrReplicaAck, err)
		}
		return next, err
	}
	return next, nil
}

// sweepThen is sweep, also returning how many hold index entries it
// handled; with recover set, transfers across groups the account's reply
// says may be left in flight are finished (recoverStale), and the account
// swept and read again.
func (l *Ledger) sweepThen(ctx context.Context, account string, limit int, recover bool) (Balance, time.Duration, int64, error) {
	v, err := l.run(ctx, sweepScript, l.accountKeys(account), l.cfg.window.Milliseconds(), limit)
	if err != nil {
		return Balance{}, 0, 0, err
	}
	v, stale := flagged(v)
	r := strs(v)
	if status(r, 0) == "not_found" {
		return Balance{}, 0, 0, ErrAccountNotFound
	}
	if len(r) != 8 {
		return Balance{}, 0, 0, fmt.Errorf("unexpected reply %q", r)
	}
	handled, _ := strconv.ParseInt(r[6], 10, 64)
	if stale && recover {
		// Finished transfers change the balance: read it again after.
		l.recoverStale(ctx, account)
		bal, next, more, err := l.sweepThen(ctx, account, limit, false)
		return bal, next, handled + more, err
	}
	next, _ := strconv.ParseInt(r[7], 10, 64)
	return decodeBalance(r[1:6]), time.Duration(next) * time.Millisecond, handled, nil
}

// CloseAccount closes an account to new postings: every later Credit,
// Debit or Transfer touching it is refused with ErrAccountClosed. Its balance and
// journal stay readable; it cannot be reopened. Closing a closed account is
// a no-op. Errors: ErrInvalid, ErrAccountNotFound, ErrReplicaAck
// (WithReplicaAck: too few replicas have the close, which happened on the
// primary).
func (l *Ledger) CloseAccount(ctx context.Context, account string) (err error) {
	ctx, op := l.tel.start(ctx, "close_account")
	defer func() { op.end(err, false) }()
	if err := l.check(valid.Name("account", account)); err != nil {
		return err
	}
	g := keys.Group(account)
	v, err := l.write(ctx, closeScript, []string{l.accountKey(g, account), l.journalKey(g, account)})
	if v == nil {
		return fmt.Errorf("close account %s: %w", account, err)
	}
	switch s, _ := v.(string); s {
	case "ok", "closed":
		if err != nil { // WithReplicaAck: closed on the primary all the same
			return fmt.Errorf("close account %s: %w", account, err)
		}
		return nil
	case "not_found":
		return fmt.Errorf("close account %s: %w", account, ErrAccountNotFound)
	}
	return fmt.Errorf("close account %s: unexpected reply %v", account, v)
}

// run runs a script with the Ledger's retry policy, sending identical
// arguments on every attempt. A script's "invalid" error reply becomes an
// error wrapping ErrInvalid.
func (l *Ledger) run(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	return l.exec(ctx, script.Ack{}, s, keys, args)
}

// writeSwept is write for a script that answers "again" when it would
// refuse for lack of funds while expired holds of the accounts were left
// unswept (its sweep stops at a limit): nothing was decided or stored, so
// the accounts are swept further and the same call (same nonce) is sent
// again. Each round releases at least sweepLimit expired holds.
func (l *Ledger) writeSwept(ctx context.Context, accounts []string, s *script.Script, keys []string, args ...any) (any, error) {
	for range maxSweepRounds {
		v, err := l.write(ctx, s, keys, args...)
		if v == nil || status(strs(v), 0) != "again" {
			return v, err
		}
		for _, a := range accounts {
			if _, _, err := l.sweep(ctx, a, sweepLimit); err != nil && !errors.Is(err, ErrAccountNotFound) {
				return nil, fmt.Errorf("releasing expired holds (nothing was posted): %w", err)
			}
		}
	}
	return nil, errors.New("more expired holds than " + strconv.Itoa(maxSweepRounds*sweepLimit) +
		" kept arriving; nothing was posted, call again")
}

// maxSweepRounds bounds writeSwept's rounds.
const maxSweepRounds = 100

// write is run for postings, waiting for replicas as WithReplicaAck says.
// When the script ran but too few replicas acknowledged, it returns the
// reply together with an error wrapping ErrReplicaAck; otherwise the reply
// is nil whenever the error is not.
func (l *Ledger) write(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	return l.exec(ctx, l.cfg.ack, s, keys, args)
}

func (l *Ledger) exec(ctx context.Context, ack script.Ack, s *script.Script, keys []string, args []any) (any, error) {
	var v any
	var ackErr error
	err := retry.Do(ctx, l.cfg.policy, func(ctx context.Context, _ int) error {
		cmd, _, err := script.RunAck(ctx, l.rdb, ack, s, keys, args...)
		if errors.Is(err, ErrReplicaAck) {
			v, ackErr = cmd.Val(), err
			return nil
		}
		v = cmd.Val()
		return err
	})
	if err != nil {
		return nil, l.scriptError(ctx, err)
	}
	return v, ackErr
}

// scriptError turns a script's "invalid" error reply into an error wrapping
// ErrInvalid, and counts unknown outcomes.
func (l *Ledger) scriptError(ctx context.Context, err error) error {
	const invalidPrefix = "ERR wallet: invalid: "
	if msg := err.Error(); strings.HasPrefix(msg, invalidPrefix) {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(msg, invalidPrefix))
	}
	if errors.Is(err, ErrUnknownOutcome) {
		l.tel.unknownOutcome(ctx)
	}
	return err
}

// check returns the first argument error.
func (l *Ledger) check(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func validCurrency(code string, required bool) error {
	if code == "" && !required {
		return nil
	}
	if code == "" || len(code) > 16 || valid.Prefix(code) != nil {
		return fmt.Errorf("%w: currency %q: want 1–16 bytes of A-Z a-z 0-9 . _ -", ErrInvalid, code)
	}
	return nil
}

func validMemo(m string) error {
	if len(m) > MaxMemo || !utf8.ValidString(m) {
		return fmt.Errorf("%w: memo: want at most %d bytes of UTF-8", ErrInvalid, MaxMemo)
	}
	return nil
}

func overdraft(v int64) error {
	if v < 0 || v > valid.MaxAmount {
		return fmt.Errorf("%w: overdraft %d outside 0..%d", ErrInvalid, v, int64(valid.MaxAmount))
	}
	return nil
}

// strs converts a script's array reply to strings (integers formatted).
func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		switch x := x.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		}
	}
	return out
}

func status(r []string, i int) string {
	if i < len(r) {
		return r[i]
	}
	return ""
}

// kindArg is a posting's kind as a script argument, boxed without an
// allocation.
func kindArg(kind string) any {
	switch kind {
	case "credit":
		return "credit"
	case "debit":
		return "debit"
	}
	return kind
}
