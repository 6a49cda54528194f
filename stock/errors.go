package stock

import (
	"errors"
	"fmt"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/lock"
)

// Sentinel errors. Refusals (ErrSoldOut, ErrBuyerLimit, ErrSKUClosed,
// ErrSKUNotFound, ErrOrderNotFound) are decisions: the operation was judged and stored, and a
// retry with the same ID returns the same refusal.
var (
	// ErrSoldOut means a SKU had fewer available units than asked for (a
	// deduction, or a write-off beyond what is available).
	ErrSoldOut = errors.New("stock: sold out")
	// ErrBuyerLimit means the order would take the buyer past the SKU's
	// per-buyer limit, counting units reserved and sold to that buyer.
	ErrBuyerLimit = errors.New("stock: per-buyer limit reached")
	// ErrConflict means the operation ID was already used for a different
	// operation; see ConflictError for the field that differs.
	ErrConflict = errors.New("stock: operation ID reused with different fields")
	// ErrSKUClosed means the SKU was closed with CloseSKU.
	ErrSKUClosed = errors.New("stock: sku closed")
	// ErrSKUNotFound means the SKU was never created.
	ErrSKUNotFound = errors.New("stock: sku not found")
	// ErrOrderNotFound means Confirm, ConfirmPartial or Refund named an
	// order that is unknown: never placed, or its marker expired after the
	// idempotency window.
	ErrOrderNotFound = errors.New("stock: order not found")
	// ErrHoldExpired means Confirm came after the reservation's deadline; the
	// units went back to available.
	ErrHoldExpired = errors.New("stock: hold expired")
	// ErrCancelled means the order was cancelled: Confirm after Cancel, or a
	// Reserve that arrived after its own Cancel.
	ErrCancelled = errors.New("stock: order cancelled")
	// ErrCrossGroup means the items of one order are in different slot
	// groups (the part of a SKU before '/'); nothing was sent to Redis.
	ErrCrossGroup = errors.New("stock: items of one order span slot groups")
	// ErrInvalid is wrapped by every error about malformed caller data
	// (nothing was sent to Redis) and by a script's refusal of an operation
	// that would take a level past 2^53-1 (nothing was written, nothing
	// stored under the operation ID: the same call may succeed later).
	ErrInvalid = valid.ErrInvalid
	// ErrUnknownOutcome means the operation may or may not have been
	// applied (the reply was lost and the retries ran out). Call again with
	// the same operation ID to learn the outcome; it is joined with the cause.
	ErrUnknownOutcome = retry.ErrUnknownOutcome
)

// ConflictError reports an operation ID reused with different fields.
// errors.Is(err, ErrConflict) is true for it.
// Field "state" means the operation does not fit the order's state, given
// in State (Cancel of a confirmed order, Refund of a held one). Field "hold"
// means a Reserve whose marker is gone (its window passed) while its hold is
// still indexed and running: placing it again would count its units twice.
type ConflictError struct {
	ID    string // the operation or order ID (the SKU for Create)
	Field string // what differs: "kind", "buyer", "items", "confirmed quantities", "initial", "limit", "state" or "hold"
	State string // for Field "state": "held", "sold", "confirmed", "cancelled", "expired" or "refunded"
}

func (e *ConflictError) Error() string {
	if e.Field == "state" {
		return fmt.Sprintf("stock: %s: not possible for an order that is %s", e.ID, e.State)
	}
	return fmt.Sprintf("stock: %s: %s differs from the first use of this ID", e.ID, e.Field)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ItemError names the SKU an order was refused for. It wraps the reason
// (ErrSoldOut, ErrBuyerLimit, ErrSKUClosed, ErrSKUNotFound or ErrInvalid).
type ItemError struct {
	SKU string
	Err error
}

func (e *ItemError) Error() string { return e.SKU + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *ItemError) Unwrap() error { return e.Err }

// refusal maps a script's reply code to an error; ok codes map to nil.
func refusal(code, id, detail, sku string) error {
	var err error
	switch code {
	case "ok":
		return nil
	case "sold_out":
		err = ErrSoldOut
	case "limit":
		err = ErrBuyerLimit
	case "closed":
		err = ErrSKUClosed
	case "not_found":
		err = ErrSKUNotFound
	case "no_order":
		err = ErrOrderNotFound
	case "expired":
		err = ErrHoldExpired
	case "cancelled":
		err = ErrCancelled
	case "refused":
		return refusal(detail, id, "", sku)
	case "stale_fence":
		return fmt.Errorf("%w: %s", lock.ErrStaleFence, id)
	case "state":
		return &ConflictError{ID: id, Field: "state", State: detail}
	case "overflow":
		err = fmt.Errorf("%w: a level would exceed %d", ErrInvalid, int64(valid.MaxAmount))
	case "conflict":
		return &ConflictError{ID: id, Field: detail}
	case "invalid":
		return fmt.Errorf("%w: rejected by the script: %s", ErrInvalid, detail)
	default:
		return fmt.Errorf("stock: unexpected script reply %q", code)
	}
	if sku != "" {
		return &ItemError{SKU: sku, Err: err}
	}
	return err
}
