package otelx

// The values of AttrOutcome. Every module records one of these words, and
// the same result has the same word in every module: a dashboard that
// filters on redkit.outcome="unknown_outcome" finds the unknown outcomes of
// stock and wallet alike. ARCHITECTURE.md and the README list them.
const (
	// Results every module can have.

	OutcomeOK       = "ok"       // done
	OutcomeReplayed = "replayed" // an earlier call had applied it; its result was returned
	OutcomeError    = "error"    // failed; the span's error.type says how
	OutcomeInvalid  = "invalid"  // refused before anything was sent (ErrInvalid)

	// Results of stock and wallet writes.

	OutcomeUnknownOutcome    = "unknown_outcome"     // ErrUnknownOutcome: call again with the same ID
	OutcomeReplicaAckMissing = "replica_ack_missing" // ErrReplicaAck: applied, fewer replicas acknowledged
	OutcomeConflict          = "conflict"            // the same ID with other fields, or a state that forbids it
	OutcomeClosed            = "closed"              // the SKU or account is closed
	OutcomeCrossGroup        = "cross_group"         // ErrCrossGroup
	OutcomeHoldExpired       = "hold_expired"        // ErrHoldExpired
	OutcomeStaleFence        = "stale_fence"         // ErrStaleFence
	OutcomeMismatch          = "mismatch"            // an audit found state the journal does not explain

	// stock's refusals.

	OutcomeSoldOut       = "sold_out"
	OutcomeBuyerLimit    = "buyer_limit"
	OutcomeSKUNotFound   = "sku_not_found"
	OutcomeOrderNotFound = "order_not_found"
	OutcomeCancelled     = "cancelled"

	// wallet's refusals.

	OutcomeInsufficientFunds = "insufficient_funds"
	OutcomeAccountNotFound   = "account_not_found"
	OutcomeCurrencyMismatch  = "currency_mismatch"
	OutcomeHoldNotFound      = "hold_not_found"
	OutcomeTransferExpired   = "transfer_expired"
	OutcomeDestinationFull   = "destination_full"

	// lock's acquisitions and lease ends.

	OutcomeNotAcquired = "not_acquired" // another owner holds it (a lost race, not an error)
	OutcomeExpired     = "expired"      // the lease had expired
	OutcomeTaken       = "taken"        // another owner holds what the lease held
	OutcomeRenewFailed = "renew_failed" // the watchdog could not renew in time

	// idgen's node lease and clock.

	OutcomeLost   = "lost"   // a renewal found the node lease lost
	OutcomeWaited = "waited" // the clock was behind and the generator waited
	OutcomeFailed = "failed" // the clock was behind for longer than allowed
)

// Outcomes returns every value of AttrOutcome that redkit records, in the
// order of the constants above.
func Outcomes() []string {
	return []string{
		OutcomeOK, OutcomeReplayed, OutcomeError, OutcomeInvalid,
		OutcomeUnknownOutcome, OutcomeReplicaAckMissing, OutcomeConflict, OutcomeClosed,
		OutcomeCrossGroup, OutcomeHoldExpired, OutcomeStaleFence, OutcomeMismatch,
		OutcomeSoldOut, OutcomeBuyerLimit, OutcomeSKUNotFound, OutcomeOrderNotFound, OutcomeCancelled,
		OutcomeInsufficientFunds, OutcomeAccountNotFound, OutcomeCurrencyMismatch,
		OutcomeHoldNotFound, OutcomeTransferExpired, OutcomeDestinationFull,
		OutcomeNotAcquired, OutcomeExpired, OutcomeTaken, OutcomeRenewFailed,
		OutcomeLost, OutcomeWaited, OutcomeFailed,
	}
}
