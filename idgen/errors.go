package idgen

import (
	"errors"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

var (
	// ErrInvalid is wrapped by every error about a bad argument or option:
	// nothing was sent to Redis.
	ErrInvalid = valid.ErrInvalid

	// ErrUnavailable is returned by Segment.Next when the values held in
	// memory are spent and a new range could not be fetched (Redis down,
	// replica acknowledgement missing, or ctx ended while waiting). The cause
	// is wrapped too. The next successful fetch ends it.
	ErrUnavailable = errors.New("idgen: unavailable")

	// ErrReplicaAck is wrapped by Sequence.Next (and Segment.Next's cause)
	// when a replica did not acknowledge the reservation in time: the value
	// is not handed out, and the next call reserves again (the same error
	// stock, wallet and lock export).
	ErrReplicaAck = script.ErrReplicaAck

	// ErrLeaseLost is returned by a leased Snowflake's Next when its node lease
	// could not be renewed in time. It is returned before the lease could have
	// expired in Redis, so no other process can hold the node while this one
	// still issues IDs, unless the node table was lost (see "Losing the node
	// table" in the package documentation). The generator re-leases a node in
	// the background and Next recovers by itself.
	ErrLeaseLost = errors.New("idgen: node lease lost")

	// ErrClockBehind means the local clock is behind the high-water time
	// stored with the node lease by longer than the WithMaxClockWait bound:
	// issuing IDs now could repeat IDs the node already issued.
	ErrClockBehind = errors.New("idgen: clock behind the node's high-water mark")

	// ErrNoFreeNode means all 1,024 node IDs of the service are leased.
	ErrNoFreeNode = errors.New("idgen: no free node ID: all 1024 are leased")

	// ErrExhausted means a Redis counter would pass 2^53-1, the largest value
	// Sequence and Segment hand out.
	ErrExhausted = errors.New("idgen: counter exhausted")

	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("idgen: generator closed")
)
