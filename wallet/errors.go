package wallet

import (
	"errors"
	"fmt"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/lock"
)

var (
	// ErrInvalid is wrapped by every error about caller input: an account
	// or transaction ID outside the grammar (1–128 bytes of
	// A-Z a-z 0-9 . _ - : with at most one '/'), an amount outside
	// 1..2^53-1, a posting whose resulting balance would leave ±(2^53-1),
	// a bad option. Nothing is written.
	ErrInvalid = valid.ErrInvalid

	// ErrInsufficientFunds refuses a debit or transfer that would take the
	// account's available balance below minus its overdraft limit. The
	// refusal is remembered under the transaction ID.
	ErrInsufficientFunds = errors.New("wallet: insufficient funds")

	// ErrAccountNotFound reports an account that was never opened. A
	// posting refused for it stays refused under its transaction ID.
	ErrAccountNotFound = errors.New("wallet: account not found")

	// ErrCurrencyMismatch refuses a transfer between accounts of different
	// currencies, or a Tx whose Currency differs from its account's.
	ErrCurrencyMismatch = errors.New("wallet: currency mismatch")

	// ErrAccountClosed refuses a posting on an account closed with CloseAccount.
	// The refusal is remembered under the transaction ID.
	ErrAccountClosed = errors.New("wallet: account closed")

	// ErrConflict is matched by every *ConflictError: a transaction ID, or
	// an account being opened, was seen before with a different field.
	ErrConflict = errors.New("wallet: conflict")

	// ErrCrossGroup refuses, in TransferBatch, a transfer between accounts
	// of different slot groups ("a/x" and "b/y"), before any I/O: a batch
	// holds single-script transfers only. Send those with Transfer.
	ErrCrossGroup = errors.New("wallet: transfer across slot groups")

	// ErrSameAccount refuses a transfer whose source and destination are
	// the same account, before any I/O. It also matches ErrInvalid.
	ErrSameAccount = errors.New("wallet: transfer to the same account")

	// ErrUnknownOutcome means the transaction may or may not have been
	// applied (every attempt timed out or lost its connection after the
	// request was sent). It is joined with the cause. Call again with the
	// same transaction ID and fields to learn the outcome.
	ErrUnknownOutcome = retry.ErrUnknownOutcome

	// ErrTransferExpired refuses a transfer across slot groups whose
	// destination step came a whole idempotency window or more after the
	// transfer began (a call stalled that long, or Recover run that late):
	// the amount is released on the source, never credited. The refusal is
	// remembered under the transaction ID.
	ErrTransferExpired = errors.New("wallet: transfer not credited within the idempotency window")

	// ErrDestinationFull refuses a transfer across slot groups whose
	// destination filled up between the Ledger's read of it and the
	// credit step, so that the amount would take its balance past 2^53-1
	// or its transfers-in total past its bound: the amount held on the
	// source was released (journal "transfer_void"), and the refusal is
	// remembered under the transaction ID. Found before anything is
	// written (inside one group, or at a transfer's first step), the same
	// condition is ErrInvalid and is not remembered.
	ErrDestinationFull = errors.New("wallet: destination balance would leave its bounds")

	// ErrHoldNotFound reports a hold that was never placed, was refused,
	// or was forgotten after the idempotency window.
	ErrHoldNotFound = errors.New("wallet: hold not found")

	// ErrHoldExpired refuses a Capture or Void of a hold whose TTL has
	// passed on the server's clock; its amount was released.
	ErrHoldExpired = errors.New("wallet: hold expired")

	// ErrStaleFence refuses a call made WithFence whose fencing token is
	// lower than one already seen for that lock in the account's slot group:
	// the lock.Lease it came from has been lost. Nothing was written.
	ErrStaleFence = lock.ErrStaleFence

	// ErrReplicaAck is joined to the Result of a posting that was applied
	// on the primary but not acknowledged by the replicas WithReplicaAck
	// asked for within its timeout.
	ErrReplicaAck = script.ErrReplicaAck

	// ErrMismatch is matched by every *MismatchError from Verify.
	ErrMismatch = errors.New("wallet: journal does not match balance")
)

// ConflictError reports a transaction ID reused with a different field,
// or an account opened again with different settings. Field is one of
// "kind", "account", "from", "to", "amount", "currency", "memo" (postings)
// or "currency", "overdraft" (Open), or, for holds, "amount", "ttl", "memo"
// and "resolution" (a Capture of a voided hold or a Void of a captured one).
type ConflictError struct {
	ID    string // transaction or account ID
	Field string // the first field that differs
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("wallet: conflict: %s was used before with a different %s", e.ID, e.Field)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// MismatchError is returned by Verify when replaying an account's journal
// does not give the stored balance or running totals, the stored running
// totals do not add up to the balance, the journal lost entries, or the
// held balance is not what the open holds and transfers in flight add up
// to.
type MismatchError struct {
	Account string
	EntryID string // the journal entry where replay disagreed; "" for the stored balance
	// Field is "posted", "held", "totals" (the running totals do not add
	// up to Posted), "credits", "debits", "transfers in", "transfers out"
	// (a running total differs from the journal's sum), "last entry" (the
	// account's newest entry is not the journal's), "open", "checkpoint"
	// (the journal does not start as it should), "kind <kind>" (an
	// entry that may not change Posted does), "entries" (the journal holds
	// another number of entries than were appended since its start: Want
	// appended, Got found) or "holds" (Held, Got, is not the sum of the
	// account's open holds and transfers across groups in flight, Want).
	Field string
	Want  int64 // what the journal (or the totals) says
	Got   int64 // what is stored
}

func (e *MismatchError) Error() string {
	at := "stored balance"
	if e.EntryID != "" {
		at = "entry " + e.EntryID
	}
	if e.Want == 0 && e.Got == 0 {
		return fmt.Sprintf("wallet: verify %s: %s does not match the journal at %s", e.Account, e.Field, at)
	}
	return fmt.Sprintf("wallet: verify %s: %s at %s is %d, journal says %d", e.Account, e.Field, at, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// sameAccount is ErrSameAccount that also matches ErrInvalid.
var errSameAccount = fmt.Errorf("%w (%w)", ErrSameAccount, ErrInvalid)
