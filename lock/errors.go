package lock

import (
	"errors"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

var (
	// ErrInvalid is wrapped by every error about caller input: a name outside
	// the grammar (1–128 bytes of A-Z a-z 0-9 . _ - : and at most one '/'),
	// a TTL outside 10ms..24h, a bad prefix. Nothing is written.
	ErrInvalid = valid.ErrInvalid

	// ErrStaleFence reports a fencing token lower than one the protected
	// resource has already seen: the lease that carried it has been lost.
	ErrStaleFence = fence.ErrStale

	// ErrNotAcquired is returned by TryAcquire when another owner holds the
	// lock, and by Acquire (joined with the context's error) when ctx ended
	// before the lock could be taken.
	ErrNotAcquired = errors.New("lock: not acquired")

	// ErrLeaseExpired means the lease's TTL ran out: it was not renewed in
	// time (watchdog off, WithMaxHold reached) or Redis no longer had the key.
	ErrLeaseExpired = errors.New("lock: lease expired")

	// ErrLeaseTaken means another owner holds the lock the lease was for.
	ErrLeaseTaken = errors.New("lock: lease taken by another owner")

	// ErrRenewFailed means the watchdog could not reach Redis before the
	// lease's local deadline, so the lease must be treated as lost. It wraps
	// the last renewal error.
	ErrRenewFailed = errors.New("lock: lease renewal failed")

	// ErrReleased is the cause of a lease's Context after a successful
	// Release.
	ErrReleased = errors.New("lock: lease released")

	// ErrReplicaAck wraps an acquire that fewer replicas acknowledged than
	// WithRequiredReplicaAck asked for; the lock was released again.
	ErrReplicaAck = script.ErrReplicaAck

	// ErrUnknownOutcome is wrapped by a write (an acquire, a release,
	// CheckFence) whose reply was lost and that no later attempt answered:
	// it may or may not have run. An acquire with this outcome has already
	// deleted the lock it may have taken; a release is retried until Redis
	// answers; CheckFence may be called again with the same Fence.
	ErrUnknownOutcome = retry.ErrUnknownOutcome

	// ErrClosed is returned by calls on a closed Client, and is the cause of
	// the Context of every lease that was still held when the Client closed.
	ErrClosed = errors.New("lock: client closed")
)

var errUnexpectedReply = errors.New("lock: unexpected script reply")
