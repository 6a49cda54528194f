package idgen

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Sequence hands out consecutive values of a Redis counter, one round trip
// (one script running INCRBY, with WAIT pipelined when the primary has
// replicas) per value, plus an INFO replication probe once a minute. Values are strictly increasing
// across every process sharing the name: each one is larger than every value
// returned before it was requested. Use it for fencing tokens and anything
// that needs strict global order; use Segment when uniqueness is enough.
//
// A Sequence is safe for concurrent use and holds no goroutine.
type Sequence struct {
	c     *counter
	floor atomic.Int64 // highest value this Sequence has returned
}

var _ Generator = (*Sequence)(nil)

// NewSequence returns a Sequence over the counter named name (see the
// package documentation for the key). It validates its arguments and sends
// nothing to Redis. Errors wrap ErrInvalid.
//
// Options used: WithKeyPrefix, WithReplicaAckTimeout.
func NewSequence(rdb redis.UniversalClient, name string, opts ...Option) (*Sequence, error) {
	cfg := newConfig(opts)
	c, err := newCounter(rdb, name, &cfg)
	if err != nil {
		return nil, err
	}
	return &Sequence{c: c}, nil
}

// Next increments the counter and returns its new value, starting at 1.
// If the counter is behind a value this Sequence already returned (the key
// was deleted, or a failover without replicas lost writes) it is first moved
// up to that value, so this Sequence never repeats itself.
func (s *Sequence) Next(ctx context.Context) (ID, error) {
	v, err := s.c.reserve(ctx, 1, s.floor.Load())
	if err != nil {
		return 0, err
	}
	for {
		f := s.floor.Load()
		if v <= f || s.floor.CompareAndSwap(f, v) {
			return ID(v), nil
		}
	}
}
