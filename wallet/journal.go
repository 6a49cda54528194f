package wallet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/stream"
	"github.com/redkit-go/redkit/internal/valid"
)

// Entry kinds in an account's journal.
const (
	KindOpen        = "open"         // the account was opened (balances 0)
	KindCredit      = "credit"       // Credit
	KindDebit       = "debit"        // Debit
	KindTransferIn  = "transfer_in"  // the destination side of a Transfer
	KindTransferOut = "transfer_out" // the source side of a Transfer
	KindClose       = "close"        // CloseAccount
	KindCheckpoint  = "checkpoint"   // Checkpoint: carries the balances; older entries are trimmed
	// Holds add KindHold, KindCapture, KindVoid, KindHoldExpire; transfers
	// across slot groups KindTransferHold and KindTransferVoid.
)

// MaxPage is the largest page Entries returns.
const MaxPage = valid.MaxPage

// Entry is one immutable journal entry of an account.
type Entry struct {
	ID        string    // stream entry ID, increasing; usable as an Entries cursor
	TxID      string    // the transaction; "" for open, close and checkpoint
	Kind      string    // one of the Kind constants
	Delta     int64     // change of Posted
	HeldDelta int64     // change of Held
	Posted    int64     // Posted after the entry
	Held      int64     // Held after the entry
	Peer      string    // the other account of a transfer
	Memo      string    // the transaction's memo
	Currency  string    // the currency a Credit or Debit named (Tx.Currency); "" when it named none
	Time      time.Time // server time of the entry (from its ID)
}

// Entries returns up to limit (1..MaxPage) journal entries of an account
// that come after cursor, oldest first, and the cursor of the next page
// ("" when this page reached the end). An empty cursor starts at the oldest
// retained entry. Entries older than the last checkpoint may have been
// trimmed. Errors: ErrInvalid, ErrAccountNotFound.
func (l *Ledger) Entries(ctx context.Context, account, cursor string, limit int) (_ []Entry, _ string, err error) {
	ctx, op := l.tel.start(ctx, "entries")
	defer func() { op.end(err, false) }()
	if err := l.check(valid.Name("account", account)); err != nil {
		return nil, "", err
	}
	g := keys.Group(account)
	msgs, next, exists, err := stream.Page(ctx, l.rdb, l.cfg.policy, l.journalKey(g, account), cursor, limit, l.accountKey(g, account))
	switch {
	case errors.Is(err, ErrInvalid):
		return nil, "", err
	case err != nil:
		return nil, "", fmt.Errorf("entries %s: %w", account, err)
	case !exists:
		return nil, "", fmt.Errorf("entries %s: %w", account, ErrAccountNotFound)
	}
	out := make([]Entry, len(msgs))
	for i, m := range msgs {
		out[i] = decodeEntry(m)
	}
	return out, next, nil
}

func decodeEntry(m redis.XMessage) Entry {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	n := func(k string) int64 { v, _ := strconv.ParseInt(s(k), 10, 64); return v }
	e := Entry{ID: m.ID, TxID: s("tx"), Kind: s("kind"), Delta: n("delta"), HeldDelta: n("hdelta"),
		Posted: n("posted"), Held: n("held"), Peer: s("peer"), Memo: s("memo"), Currency: s("cur")}
	if i := indexByte(m.ID, '-'); i > 0 {
		ms, _ := strconv.ParseInt(m.ID[:i], 10, 64)
		e.Time = time.UnixMilli(ms)
	}
	return e
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// Checkpoint appends a checkpoint entry carrying the account's current
// balances and running totals and trims every older entry of its journal,
// so the journal holds only what happened since. It first verifies the
// account (as Verify does) and writes the checkpoint only if nothing was
// posted since: a checkpoint over a journal that does not match the
// balances would hide the difference from every later Verify. It returns
// the checkpoint's entry ID and how many entries were trimmed. Read (and
// keep elsewhere) what you need with Entries before checkpointing: trimmed
// entries are gone. Safe to call at any time and to repeat. Errors:
// ErrInvalid, ErrAccountNotFound, a *MismatchError (nothing written),
// ErrReplicaAck with the ID (WithReplicaAck: too few replicas have the
// checkpoint, which was written).
func (l *Ledger) Checkpoint(ctx context.Context, account string) (id string, trimmed int64, err error) {
	ctx, op := l.tel.start(ctx, "checkpoint")
	defer func() { op.end(err, false) }()
	if err := l.check(valid.Name("account", account)); err != nil {
		return "", 0, err
	}
	g := keys.Group(account)
	for range verifyRounds {
		last, err := l.verify(ctx, account)
		if err != nil {
			return "", 0, fmt.Errorf("checkpoint %s: %w", account, err)
		}
		v, err := l.write(ctx, checkpointScript, []string{l.accountKey(g, account), l.journalKey(g, account)}, last)
		if v == nil {
			return "", 0, fmt.Errorf("checkpoint %s: %w", account, err)
		}
		ackErr := err // WithReplicaAck: a checkpoint written all the same
		r := strs(v)
		switch status(r, 0) {
		case "not_found":
			return "", 0, fmt.Errorf("checkpoint %s: %w", account, ErrAccountNotFound)
		case "moved":
			continue // posted to meanwhile: verify the new entries too
		}
		if len(r) != 2 {
			return "", 0, fmt.Errorf("checkpoint %s: unexpected reply %q", account, r)
		}
		trimmed, _ = strconv.ParseInt(r[1], 10, 64)
		if ackErr != nil {
			return r[0], trimmed, fmt.Errorf("checkpoint %s: %w", account, ackErr)
		}
		return r[0], trimmed, nil
	}
	return "", 0, fmt.Errorf("checkpoint %s: the account changed during each of %d verifications; nothing written, call again",
		account, verifyRounds)
}

// verifyRounds bounds how often Verify and Checkpoint start over.
const verifyRounds = 5

// Verify proves an account's stored state from its journal: starting at
// the last checkpoint (or the opening entry), it adds up every entry's
// deltas, checks each entry's recorded balance along the way, and compares
// the result with the stored Posted and Held and the sums of each kind of
// entry (credits, debits and captures, transfers in, transfers out) with
// the stored running totals (a checkpoint carries the totals as they were
// at it). It also checks that the account's record of its newest journal
// entry is the journal's newest entry (read together with the balances, in
// one step), so an account hash rolled back to an older copy, or an entry
// appended behind the scripts' back, is a mismatch, and that the running
// totals add up to Posted. It counts the entries it replays against the
// stream's entries-added counter (read in the same step; XDEL and XTRIM do
// not lower it, and a checkpoint records it), so an entry removed from the
// middle is a mismatch even when its deltas are zero or cancel out with
// another's; a server that does not report the counter (before Redis 7.0,
// the embedded miniredis), or a checkpoint written without it, leaves this
// count out. And it checks Held against the open hold records and the
// transfers across groups in flight from the account (read in the same
// step). A disagreement is a *MismatchError (errors.Is ErrMismatch).
// Verify reads the journal in pages while postings continue; it stops at
// the entry that was newest when it began. Each page is read together with
// the account's last checkpoint: when a Checkpoint (which trims) came in
// between, Verify starts over from it (at most 5 times, then an error that
// says to call again), so it never reports what a checkpoint changed. Its first step reads every
// hold record of the account in one script, which an account with very
// many holds in its window makes long.
func (l *Ledger) Verify(ctx context.Context, account string) (err error) {
	ctx, op := l.tel.start(ctx, "verify")
	defer func() { op.end(err, false) }()
	if err := l.check(valid.Name("account", account)); err != nil {
		return err
	}
	if _, err = l.verify(ctx, account); err != nil {
		return fmt.Errorf("verify %s: %w", account, err)
	}
	return nil
}

// verify runs verifyOnce until no checkpoint moves under it, and returns
// the journal entry up to which the account was proved.
func (l *Ledger) verify(ctx context.Context, account string) (last string, err error) {
	// A checkpoint taken while Verify pages trims entries it has not read
	// yet; it then starts over from the new checkpoint. So it does when a
	// transfer across groups began in the account's group between its
	// read of the in-flight index and head.lua.
	for range verifyRounds {
		if last, err = l.verifyOnce(ctx, account); err != errRestart {
			return last, err
		}
	}
	return "", fmt.Errorf("a checkpoint, or a transfer across groups beginning in the account's group, "+
		"came between each of %d reads; nothing is wrong with the journal so far, call again", verifyRounds)
}

// totals are an account's running totals, in the order of head.lua's reply.
type totals struct{ cr, db, tin, tout int64 }

func (l *Ledger) verifyOnce(ctx context.Context, account string) (string, error) {
	g := keys.Group(account)
	ak, jk := l.accountKey(g, account), l.journalKey(g, account)
	hk, _ := l.holdKeys(g, account)
	// The group's transfers in flight, whose records head.lua reads (every
	// key it touches is named up front); it answers "moved" when the index
	// changed since.
	xk := l.space.Key(g, "xpend")
	var ids []string
	err := retry.Read(ctx, l.cfg.policy, func(ctx context.Context, _ int) error {
		var err error
		ids, err = l.rdb.ZRange(ctx, xk, 0, -1).Result()
		return err
	})
	if err != nil {
		return "", err
	}
	headKeys, headArgs := []string{ak, jk, hk, xk}, []any{account}
	for _, id := range ids {
		headKeys = append(headKeys, l.txKey(g, id))
		headArgs = append(headArgs, id)
	}
	v, err := l.run(ctx, headScript, headKeys, headArgs...)
	if err != nil {
		return "", err
	}
	r := strs(v)
	switch status(r, 0) {
	case "not_found":
		return "", ErrAccountNotFound
	case "moved":
		return "", errRestart
	}
	if len(r) != 12 {
		return "", fmt.Errorf("unexpected reply %q", r)
	}
	n := func(i int) int64 { x, _ := strconv.ParseInt(r[i], 10, 64); return x }
	posted, held := n(1), n(2)
	stored := totals{n(3), n(4), n(5), n(6)}
	ck, last, tail := r[7], r[8], r[9]
	if last != tail {
		return "", &MismatchError{Account: account, EntryID: tail, Field: "last entry"}
	}
	if want := stored.cr - stored.db + stored.tin - stored.tout; want != posted {
		return "", &MismatchError{Account: account, Field: "totals", Want: want, Got: posted}
	}
	if open := n(11); open != held {
		return "", &MismatchError{Account: account, Field: "holds", Want: open, Got: held}
	}
	// added counts every entry the journal was ever given; the entries
	// from the opening entry (the first) or from a checkpoint that carries
	// its own count (seq) up to last must be exactly those appended since.
	added, countable := n(10), r[10] != ""
	start, fromCheckpoint := "-", ck != ""
	if fromCheckpoint {
		start = ck
	}
	var p, h int64
	var sum totals
	var count, base int64 = 0, 1 // entries read; the count of the first
	first, seenLast := true, false
	for !seenLast {
		// Each page comes with the account's checkpoint: while it is ck, no
		// entry from ck on was trimmed, so what the page lacks is drift.
		msgs, now, err := stream.Range(ctx, l.rdb, l.cfg.policy, jk, start, last, MaxPage, ak, "ck")
		if err != nil {
			return "", err
		}
		if now != ck {
			return "", errRestart
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			e := decodeEntry(m)
			mismatch := func(field string, want, got int64) error {
				return &MismatchError{Account: account, EntryID: e.ID, Field: field, Want: want, Got: got}
			}
			switch {
			case first && fromCheckpoint:
				if e.ID != ck || e.Kind != KindCheckpoint {
					return "", mismatch("checkpoint", 0, 0)
				}
				p, h = e.Posted, e.Held
				sum = checkpointTotals(m)
				seq, _ := m.Values["seq"].(string)
				base, err = strconv.ParseInt(seq, 10, 64)
				countable = countable && err == nil // a checkpoint written without the counter
			case first && e.Kind != KindOpen:
				return "", mismatch("open", 0, 0)
			case first: // the opening entry: balances and totals 0
				p, h = e.Delta, e.HeldDelta
			default:
				p += e.Delta
				h += e.HeldDelta
				if !sum.add(e) {
					return "", mismatch("kind "+e.Kind, 0, e.Delta)
				}
			}
			first = false
			count++
			if e.Posted != p {
				return "", mismatch("posted", p, e.Posted)
			}
			if e.Held != h {
				return "", mismatch("held", h, e.Held)
			}
			seenLast = e.ID == last
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	if !seenLast {
		return "", &MismatchError{Account: account, Field: "last entry"}
	}
	if p != posted {
		return "", &MismatchError{Account: account, Field: "posted", Want: p, Got: posted}
	}
	if h != held {
		return "", &MismatchError{Account: account, Field: "held", Want: h, Got: held}
	}
	for _, c := range []struct {
		field     string
		want, got int64
	}{{"credits", sum.cr, stored.cr}, {"debits", sum.db, stored.db},
		{"transfers in", sum.tin, stored.tin}, {"transfers out", sum.tout, stored.tout}} {
		if c.want != c.got {
			return "", &MismatchError{Account: account, Field: c.field, Want: c.want, Got: c.got}
		}
	}
	if want := added - base + 1; countable && count != want {
		return "", &MismatchError{Account: account, Field: "entries", Want: want, Got: count}
	}
	return last, nil
}

// add counts an entry in the running totals it belongs to, and reports
// whether its kind may change Posted by its delta.
func (t *totals) add(e Entry) bool {
	switch e.Kind {
	case KindCredit:
		t.cr += e.Delta
	case KindDebit, KindCapture:
		t.db -= e.Delta
	case KindTransferIn:
		t.tin += e.Delta
	case KindTransferOut:
		t.tout -= e.Delta
	case KindHold, KindVoid, KindHoldExpire, KindTransferHold, KindTransferVoid, KindClose:
		return e.Delta == 0
	default: // open and checkpoint only start a journal
		return false
	}
	return true
}

// checkpointTotals reads the running totals a checkpoint entry carries.
func checkpointTotals(m redis.XMessage) totals {
	n := func(k string) int64 {
		s, _ := m.Values[k].(string)
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	return totals{n("cr"), n("db"), n("tin"), n("tout")}
}

// errRestart makes Verify start over: a checkpoint moved under it.
var errRestart = errors.New("wallet: verify: checkpoint moved")

type accountInts struct {
	n        []int64
	ck, last string
}

// readInts reads integer fields of an account hash plus its ck and last
// fields in one command; nil when the account does not exist.
func (l *Ledger) readInts(ctx context.Context, key string, fields ...string) (*accountInts, error) {
	var vals []any
	err := retry.Read(ctx, l.cfg.policy, func(ctx context.Context, _ int) error {
		var err error
		vals, err = l.rdb.HMGet(ctx, key, append([]string{"cur", "ck", "last"}, fields...)...).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	if vals[0] == nil {
		return nil, nil
	}
	st := &accountInts{n: make([]int64, len(fields))}
	st.ck, _ = vals[1].(string)
	st.last, _ = vals[2].(string)
	for i := range fields {
		s, _ := vals[3+i].(string)
		st.n[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return st, nil
}

// Trial is the trial balance of a set of accounts, from their running
// totals (kept since each account was opened, unaffected by checkpoints).
type Trial struct {
	Accounts     int   // accounts read
	Credits      int64 // sum of credits
	Debits       int64 // sum of debits
	TransfersIn  int64 // sum of amounts transferred into the accounts
	TransfersOut int64 // sum of amounts transferred out of them
	Posted       int64 // sum of posted balances
}

// NetTransfers is TransfersIn - TransfersOut. Over a set of accounts that
// includes both sides of every transfer among them (for example every
// account of a group), it is zero: transfers move money, never create it.
// The exception is a transfer across slot groups caught in flight: credited
// at the destination, not yet posted at the source (see Recover).
func (t Trial) NetTransfers() int64 { return t.TransfersIn - t.TransfersOut }

// Balanced reports whether Posted equals Credits - Debits + NetTransfers.
func (t Trial) Balanced() bool { return t.Posted == t.Credits-t.Debits+t.NetTransfers() }

// TrialBalance sums the running totals of the given accounts, reading each
// account in one command (accounts are read one after another, so postings
// made meanwhile may fall between them: call it on a quiet set for an
// exact figure). Errors: ErrInvalid, ErrAccountNotFound.
func (l *Ledger) TrialBalance(ctx context.Context, accounts ...string) (_ Trial, err error) {
	ctx, op := l.tel.start(ctx, "trial_balance")
	defer func() { op.end(err, false) }()
	var t Trial
	for _, a := range accounts {
		if err := l.check(valid.Name("account", a)); err != nil {
			return Trial{}, err
		}
		st, err := l.readInts(ctx, l.accountKey(keys.Group(a), a), "posted", "cr", "db", "tin", "tout")
		if err != nil {
			return Trial{}, fmt.Errorf("trial balance %s: %w", a, err)
		}
		if st == nil {
			return Trial{}, fmt.Errorf("trial balance %s: %w", a, ErrAccountNotFound)
		}
		t.Accounts++
		t.Posted += st.n[0]
		t.Credits += st.n[1]
		t.Debits += st.n[2]
		t.TransfersIn += st.n[3]
		t.TransfersOut += st.n[4]
	}
	return t, nil
}
