package idgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Snowflake generates 64-bit time-ordered IDs in github.com/bwmarrin/snowflake's
// default layout: 41 bits of milliseconds since Epoch, 10 bits of node, 12
// bits of sequence, so up to 4,096 IDs per millisecond per node.
//
// IDs are unique across generators with different node IDs, and unique and
// increasing within one generator while it keeps its node. Time comes from
// the monotonic clock: the wall clock is read once, at start, so a wall-clock
// step inside a running process causes neither a duplicate nor a stall (IDs
// then drift from wall time by the step until the process restarts).
//
// When the 4,096 IDs of a millisecond are spent, the callers that drew a value
// of the next millisecond wait for it to start, each on its own: no lock is
// held, so no caller queues behind another.
//
// A Snowflake is safe for concurrent use. Create one with NewSnowflake
// (a node ID you assign) or NewLeasedSnowflake (a node ID leased from Redis).
type Snowflake struct {
	t atomic.Pointer[tenure] // hot: read by every Next
	_ [56]byte

	now    func() time.Time
	base   time.Time // now() at start; elapsed time is now().Sub(base)
	baseMs int64     // base in ms since Epoch

	lease     *nodeLease // nil for a static node
	closeOnce sync.Once
	closeErr  error
}

// tenure is one node ID held for a stretch of time.
type tenure struct {
	state atomic.Int64 // last value handed out: ms<<stepBits | sequence
	_     [56]byte
	node  int64        // node << nodeShift
	until atomic.Int64 // IDs must carry timestamps below this (ms since Epoch)
	err   error        // returned once until has passed

	// Of a leased node, guarded by the nodeLease's mu (ms since Epoch):
	renewed int64 // the last successful acquisition or renewal was sent
	hw      int64 // the high-water mark that write left in the node table
}

var _ Generator = (*Snowflake)(nil)

// NewSnowflake returns a generator for a node ID you assign, 0..MaxNode.
// Nothing stops two processes from using the same node ID, or a restart on a
// clock that went backwards from repeating IDs: prefer NewLeasedSnowflake.
//
// Options used: WithClock.
func NewSnowflake(node int64, opts ...Option) (*Snowflake, error) {
	if node < 0 || node > MaxNode {
		return nil, fmt.Errorf("%w: node ID %d outside 0..%d", ErrInvalid, node, MaxNode)
	}
	cfg := newConfig(opts)
	s, err := newSnowflake(&cfg)
	if err != nil {
		return nil, err
	}
	s.t.Store(newTenure(node, -1, math.MaxInt64))
	return s, nil
}

func newSnowflake(cfg *config) (*Snowflake, error) {
	base := cfg.now()
	s := &Snowflake{now: cfg.now, base: base, baseMs: base.UnixMilli() - Epoch}
	if s.baseMs < 0 || s.baseMs > maxMillis {
		return nil, fmt.Errorf("idgen: clock %v outside the Snowflake time range", base)
	}
	return s, nil
}

// newTenure starts a node whose IDs must carry timestamps above after and below until.
func newTenure(node, after, until int64) *tenure {
	t := &tenure{node: node << nodeShift, err: ErrLeaseLost}
	t.state.Store((after+1)<<stepBits - 1)
	t.until.Store(until)
	return t
}

// nowMs returns the generator's clock in ms since Epoch.
func (s *Snowflake) nowMs() int64 {
	return s.baseMs + int64(s.now().Sub(s.base)/time.Millisecond)
}

// Next returns a new ID. It waits only when this millisecond's 4,096 IDs are
// spent (until the next millisecond), or for a WithClock clock that went
// backwards to catch up; ctx bounds that wait, and the value given up is
// skipped, never handed out again. A leased generator returns ErrLeaseLost
// while it holds no valid lease, and ErrClosed after Close.
func (s *Snowflake) Next(ctx context.Context) (ID, error) {
	t := s.t.Load()
	now := s.nowMs()
	var v int64
	for {
		cur := t.state.Load()
		if cur>>stepBits < now {
			// First ID of a new millisecond.
			if v = now << stepBits; t.state.CompareAndSwap(cur, v) {
				break
			}
			continue
		}
		v = t.state.Add(1)
		break
	}
	ms := v >> stepBits
	if ms > now {
		// The sequence of this millisecond is spent: v belongs to a later one.
		if err := s.sleepUntil(ctx, ms); err != nil {
			return 0, err
		}
	}
	if ms >= t.until.Load() {
		return 0, t.err
	}
	if ms > maxMillis {
		return 0, errors.New("idgen: Snowflake time range exhausted")
	}
	return ID(ms<<timeShift | t.node | v&maxStep), nil
}

// sleepUntil returns once the clock has reached ms. Waits longer than
// sleepMin sleep; shorter ones yield the processor until the millisecond
// starts: Go's timers wake an idle process no sooner than 1ms later on Linux
// (epoll's resolution), which would lose up to a fifth of the layout's
// throughput. No lock is held meanwhile, so no other caller waits on this one.
// It returns early, with an error wrapping ctx's, when ctx ends: a clock
// stepped back by WithClock can be behind by any amount.
func (s *Snowflake) sleepUntil(ctx context.Context, ms int64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ahead := time.Duration(ms-s.baseMs)*time.Millisecond - s.now().Sub(s.base)
		if ahead <= 0 {
			return nil
		}
		if ahead <= sleepMin {
			runtime.Gosched()
			continue
		}
		if timer == nil {
			timer = time.NewTimer(ahead - sleepMin)
		} else {
			timer.Reset(ahead - sleepMin)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("idgen: waiting for the clock: %w", ctx.Err())
		}
	}
}

// sleepMin is the shortest wait worth a sleep.
const sleepMin = 2 * time.Millisecond

// Node returns the node ID in use, or -1 while a leased generator holds none.
func (s *Snowflake) Node() int64 {
	t := s.t.Load()
	if t.node < 0 {
		return -1
	}
	return t.node >> nodeShift
}

// LeaseStatus describes a Snowflake's node lease, as Lease reports it.
type LeaseStatus struct {
	// Service is the service the node is leased for; empty for a static node.
	Service string
	// Node is the node ID in use, as Node returns it: -1 while a leased
	// generator holds none, and after Close.
	Node int64
	// Leased is true for a generator from NewLeasedSnowflake, false for a
	// static node (NewSnowflake).
	Leased bool
	// TTL is the lease's time to live (WithLeaseTTL); it is renewed every
	// TTL/3. Zero for a static node.
	TTL time.Duration
	// Until is when Next starts returning ErrLeaseLost unless a renewal gets
	// through first: Renewed + TTL − TTL/10, on the generator's clock (the
	// monotonic clock, or WithClock's).
	Until time.Time
	// Renewed is when the last successful acquisition or renewal of the node
	// was sent, on the generator's clock.
	Renewed time.Time
	// HighWater is the node's high-water mark in Redis as that write left it,
	// in ID time (compare it with ID.SnowflakeTime): no ID of the node carries
	// a later timestamp. A renewal that failed may have raised it since.
	HighWater time.Time
	// Err is the error of the last renewal or re-lease attempt when it
	// failed; nil once one succeeds. It wraps ErrLeaseLost when the node was
	// found taken by another process (or the node table lost).
	Err error
}

// Lease returns the state of the node lease. Until, Renewed and HighWater
// are zero while no node is held (Node is -1) and for a static node, which
// never fails closed. Safe for concurrent use; it makes no Redis call.
func (s *Snowflake) Lease() LeaseStatus {
	l := s.lease
	if l == nil {
		return LeaseStatus{Node: s.Node()}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := LeaseStatus{Service: l.service, Node: -1, Leased: true, TTL: l.ttl, Err: l.err}
	t := s.t.Load()
	if t.node < 0 {
		return st
	}
	st.Node = t.node >> nodeShift
	st.Until = s.timeOf(t.until.Load())
	st.Renewed = s.timeOf(t.renewed)
	st.HighWater = time.UnixMilli(Epoch + t.hw)
	return st
}

// timeOf returns the moment the generator's clock reaches ms (since Epoch).
func (s *Snowflake) timeOf(ms int64) time.Time {
	return s.base.Add(time.Duration(ms-s.baseMs) * time.Millisecond)
}

// Close stops a leased generator's renewal, releases its node lease (keeping
// its high-water mark) and makes Next return ErrClosed. It returns the
// release error, if any; the lease then simply expires. Safe to call more
// than once; for a static node it only makes Next return ErrClosed.
func (s *Snowflake) Close() error {
	s.closeOnce.Do(func() {
		closed := newTenure(-1, 0, 0)
		closed.err = ErrClosed
		if s.lease == nil {
			s.t.Store(closed)
			return
		}
		s.closeErr = s.lease.close(closed)
	})
	return s.closeErr
}
