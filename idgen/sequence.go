package idgen

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Sequence hands out consecutive values of a Redis counter, one round trip
// (one script running INCRBY, with WAIT pipelined when the primary has
// replicas) per value, plus an INFO replication probe once a minute. Values are strictly increasing
// across every process sharing the name: each one is larger than every value
// returned before it was requested. Use it for fencing tokens and anything
// that needs strict global order; use Segment when uniqueness is enough.
//
// A Sequence is safe for concurrent use and holds no goroutine of its own:
// a Next whose ctx ends while Redis has not answered returns at once, and
// its round trip goes on in a goroutine until Redis answers or the client's
// ReadTimeout ends it (the value it gets is skipped). Close the client to end
// such calls at once.
type Sequence struct {
	c *counter

	mu    sync.Mutex
	floor int64 // highest value this Sequence has returned
	// inflight counts the calls in flight by the floor each one sent.
	inflight map[int64]int
	// recent holds the values returned while other calls were in flight,
	// down to the lowest floor any call in flight sent: a call that sent an
	// older floor than a value returned meanwhile can be handed that value
	// again when the key was lost in between (the script moves the counter
	// up only to the floor it was sent).
	recent    map[int64]struct{}
	pruneSize int // len(recent) after the last pruning
}

var _ Generator = (*Sequence)(nil)

// NewSequence returns a Sequence over the counter named name (see the
// package documentation for the key). It validates its arguments and sends
// nothing to Redis. Errors wrap ErrInvalid; rdb must be a *redis.Client, a
// *redis.ClusterClient or a ClientWrapper of one.
//
// Options used: WithKeyPrefix, WithReplicaAckTimeout.
func NewSequence(rdb redis.UniversalClient, name string, opts ...Option) (*Sequence, error) {
	c, _, err := newCounter(rdb, name, opts)
	if err != nil {
		return nil, err
	}
	return &Sequence{c: c, inflight: map[int64]int{}, recent: map[int64]struct{}{}}, nil
}

// Next increments the counter and returns its new value, starting at 1.
// If the counter is behind a value this Sequence already returned (the key
// was deleted, or a failover without replicas lost writes) it is first moved
// up to that value, so this Sequence never repeats itself: a value that
// another call of this Sequence returned while this one was in flight is
// refused, and the counter moved up again above every value returned.
func (s *Sequence) Next(ctx context.Context) (ID, error) {
	s.mu.Lock()
	floor := s.start(-1)
	s.mu.Unlock()
	for {
		sent := floor
		v, abandoned, err := bounded(ctx, func(ctx context.Context) (int64, error) {
			return s.c.reserve(ctx, 1, sent)
		}, func(v int64, err error) {
			// Abandoned: v is skipped, never returned, yet no later call
			// may go below it.
			if err == nil {
				s.mu.Lock()
				s.floor = max(s.floor, v)
				s.mu.Unlock()
			}
		})
		if abandoned {
			// Nobody checks the value this call may still get: it needs no
			// registration, and values returned meanwhile need not be kept
			// for it. A reply lost for good then costs nothing per Next.
			s.mu.Lock()
			s.finish(sent)
			s.prune()
			s.mu.Unlock()
			return 0, err
		}
		s.mu.Lock()
		if err != nil {
			s.finish(floor)
			s.mu.Unlock()
			return 0, err
		}
		// reserve checked v > floor, so v can only repeat a value returned
		// since this call started, and those are in recent.
		if _, seen := s.recent[v]; seen {
			floor = s.start(floor)
			s.mu.Unlock()
			continue
		}
		s.finish(floor)
		s.floor = max(s.floor, v)
		if len(s.inflight) > 0 {
			s.recent[v] = struct{}{}
		}
		s.prune()
		s.mu.Unlock()
		return ID(v), nil
	}
}

// start registers a call in flight with the current floor, ending its
// earlier registration (prev) if it had one, and returns that floor.
// s.mu is held.
func (s *Sequence) start(prev int64) int64 {
	if prev >= 0 {
		s.finish(prev)
	}
	s.inflight[s.floor]++
	return s.floor
}

// finish ends a call's registration. s.mu is held.
func (s *Sequence) finish(floor int64) {
	if s.inflight[floor]--; s.inflight[floor] <= 0 {
		delete(s.inflight, floor)
	}
}

// prune drops the values of recent that no call in flight can be handed:
// each gets a value above the floor it sent. s.mu is held.
func (s *Sequence) prune() {
	if len(s.inflight) == 0 {
		clear(s.recent)
		s.pruneSize = 0
		return
	}
	if len(s.recent) < 2*s.pruneSize+64 {
		return
	}
	low := s.floor
	for f := range s.inflight {
		low = min(low, f)
	}
	for v := range s.recent {
		if v <= low {
			delete(s.recent, v)
		}
	}
	s.pruneSize = len(s.recent)
}
