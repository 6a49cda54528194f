package idgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/internal/worker"
)

// Segment hands out values of a Redis counter from ranges it reserves with
// one round trip each (Meituan Leaf's segment mode, without a database).
//
// Values are unique across every Segment and Sequence sharing the name, and
// increasing within one Segment: each value is larger than every value the
// Segment returned before it was requested. They are not in global order
// across processes, and values reserved but never handed out (the rest of a
// range when a process stops) are skipped.
//
// Ranges: the first one has the min step. When a fifth (20%) of the current
// range is used, the next one is reserved in the background (the double
// buffer), sized so it lasts about 10 seconds at the rate observed on the
// current one, between WithMinStep and WithMaxStep (growing at once, shrinking
// at most by half per range). A goroutine exists only while a fetch is in
// flight or waits for its retry; Close cancels and waits for it. The fetch
// gives up on its Redis call at its deadline or at Close, whatever the
// client's ReadTimeout: that call then runs on until Redis answers or
// go-redis gives up, and its range is skipped.
//
// Faults: while Redis is unreachable a Segment serves what it holds (its
// runway, see Runway); once that is spent Next returns an error wrapping
// ErrUnavailable, without waiting past ctx, and the next successful fetch
// ends the outage. After a failed fetch the next one is attempted no sooner
// than a backoff (20ms doubling to 1s) later; Next returns ErrUnavailable at
// once in between. A failed background fetch is tried again after the
// backoff, by a timer, for as long as the current range lasts.
//
// A Segment never hands out a value at or below one it already holds: each
// fetch passes the highest value it has reserved, and a counter found behind
// it is moved up first (see the package documentation).
type Segment struct {
	cur atomic.Pointer[segRange] // hot: read by every Next
	_   [56]byte

	c      *counter
	cfg    config
	tel    *segTelemetry
	w      worker.Worker // the fetch and retry goroutines; stopped by Close
	runway atomic.Int64  // size of the buffered range, for Runway

	mu       sync.Mutex
	next     *segRange // the buffered range, nil if none
	fetching *fetchCall
	closed   bool
	step     int64
	floor    int64 // highest value reserved so far
	backoff  time.Duration
	retryAt  time.Duration // mono() before which no fetch starts after a failure
	retrying bool          // a prefetch waits to be retried after the backoff
	lastErr  error
	empty    segRange          // exhausted sentinel: the initial and the closed state
	cause    trace.SpanContext // the span of the Next that last asked for a fetch, linked from it
}

// segRange is a reserved range [first, last]. next is the last value handed
// out; next+1 is the next one.
type segRange struct {
	next    atomic.Int64
	first   int64
	last    int64
	trigger int64         // handing out this value starts the prefetch
	since   time.Duration // mono() when the range became current
	_       [24]byte
}

type fetchCall struct {
	done chan struct{}
	err  error
}

var _ Generator = (*Segment)(nil)

// NewSegment returns a Segment over the counter named name (the same counter
// a Sequence of that name uses). It validates its arguments and sends nothing
// to Redis: the first range is fetched by the first Next. Errors wrap
// ErrInvalid; rdb must be a *redis.Client, a *redis.ClusterClient or a
// ClientWrapper of one.
//
// Options used: WithKeyPrefix, WithMinStep, WithMaxStep, WithFetchTimeout,
// WithReplicaAckTimeout, WithTracerProvider, WithMeterProvider, WithLabel.
func NewSegment(rdb redis.UniversalClient, name string, opts ...Option) (*Segment, error) {
	c, cfg, err := newCounter(rdb, name, opts)
	if err != nil {
		return nil, err
	}
	s := &Segment{c: c, cfg: cfg, step: cfg.minStep}
	s.cur.Store(&s.empty)
	s.tel, err = newSegTelemetry(&cfg, s)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Next returns the next value. It waits for Redis only when the values in
// memory are spent; ctx bounds that wait. It returns ErrUnavailable (wrapping
// the cause) when no value can be had, and ErrClosed after Close.
func (s *Segment) Next(ctx context.Context) (ID, error) {
	r := s.cur.Load()
	if v := r.next.Add(1); v <= r.last {
		if v == r.trigger {
			s.prefetch(ctx, r)
		}
		return ID(v), nil
	}
	return s.refill(ctx)
}

// Runway returns how many values the Segment can hand out without Redis.
func (s *Segment) Runway() int64 {
	r := s.cur.Load()
	n := max(r.last-r.next.Load(), 0)
	return n + s.runway.Load()
}

// Close stops the background fetch, waits for it and makes Next return
// ErrClosed. Values held in memory are dropped (they are never reissued). It
// is safe to call more than once.
func (s *Segment) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.next = nil
	s.runway.Store(0)
	s.cur.Store(&s.empty)
	s.mu.Unlock()
	s.w.Stop()
	s.tel.close()
	return nil
}

func (s *Segment) prefetch(ctx context.Context, r *segRange) {
	s.mu.Lock()
	s.cause = trace.SpanContextFromContext(ctx)
	s.prefetchLocked(r)
	s.mu.Unlock()
}

func (s *Segment) prefetchLocked(r *segRange) {
	if s.closed || s.next != nil || s.fetching != nil || s.cur.Load() != r {
		return
	}
	if now := mono(); now < s.retryAt {
		s.retryLocked(r, s.retryAt-now)
		return
	}
	s.adapt(min(r.next.Load(), r.last)-r.first+1, mono()-r.since)
	s.startFetchLocked()
}

// retryLocked starts the prefetch for r after d, unless one is already
// scheduled: a fetch that failed is tried again while the current range
// lasts, not only when a caller happens to hand out the trigger value.
func (s *Segment) retryLocked(r *segRange, d time.Duration) {
	if s.retrying {
		return
	}
	s.retrying = s.w.Go(func(ctx context.Context) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.retrying = false
		s.prefetchLocked(r)
	})
}

// adapt sizes the next range from used values over elapsed time.
func (s *Segment) adapt(used int64, elapsed time.Duration) {
	elapsed = max(elapsed, time.Millisecond)
	want := float64(used) * float64(rangeTarget) / float64(elapsed)
	next := s.cfg.maxStep
	if want < float64(next) {
		next = max(int64(want), s.step/2)
	}
	s.step = min(max(next, s.cfg.minStep), s.cfg.maxStep)
}

func (s *Segment) startFetchLocked() *fetchCall {
	fc := &fetchCall{done: make(chan struct{})}
	step, floor, cause := s.step, s.floor, s.cause
	if !s.w.Go(func(ctx context.Context) { s.fetch(ctx, fc, step, floor, cause) }) {
		fc.err = ErrClosed // Close has begun
		close(fc.done)
		return fc
	}
	s.fetching = fc
	return fc
}

// fetch reserves a range; life, cancelled by Close, ends its wait.
func (s *Segment) fetch(life context.Context, fc *fetchCall, step, floor int64, cause trace.SpanContext) {
	ctx, cancel := context.WithTimeout(life, s.cfg.fetchTimeout)
	start := time.Now()
	ctx, span := s.tel.startFetch(ctx, cause)
	last, _, err := bounded(ctx, func(ctx context.Context) (int64, error) {
		return s.c.reserve(ctx, step, floor)
	}, func(last int64, err error) {
		// The range came after the fetch gave up on it: it is skipped, and
		// later fetches stay above it. Close does not wait for this call.
		if err == nil {
			s.mu.Lock()
			s.floor = max(s.floor, last)
			s.mu.Unlock()
		}
	})
	s.tel.endFetch(ctx, span, start, step, err)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetching = nil
	fc.err = err
	defer close(fc.done)
	if err != nil {
		s.lastErr = err
		s.backoff = min(max(2*s.backoff, 20*time.Millisecond), time.Second)
		s.retryAt = mono() + s.backoff
		if r := s.cur.Load(); !s.closed && r != &s.empty && r.next.Load() >= r.trigger && r.next.Load() < r.last {
			s.retryLocked(r, s.backoff)
		}
		return
	}
	s.lastErr, s.backoff, s.retryAt = nil, 0, 0
	s.floor = max(s.floor, last)
	if s.closed {
		return
	}
	r := &segRange{first: last - step + 1, last: last}
	r.next.Store(r.first - 1)
	r.trigger = r.first + max(step/prefetchFraction, 1) - 1
	s.next = r
	s.runway.Store(step)
}

func (s *Segment) unavailable(err error) error {
	if errors.Is(err, ErrExhausted) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// refill is Next's slow path: switch to the buffered range, or fetch one and
// wait for it.
func (s *Segment) refill(ctx context.Context) (ID, error) {
	for {
		s.mu.Lock()
		s.cause = trace.SpanContextFromContext(ctx)
		if s.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		r := s.cur.Load()
		if v := r.next.Add(1); v <= r.last {
			if v == r.trigger {
				s.prefetchLocked(r)
			}
			s.mu.Unlock()
			return ID(v), nil
		}
		if n := s.next; n != nil {
			s.next = nil
			s.runway.Store(0)
			n.since = mono()
			s.cur.Store(n)
			s.mu.Unlock()
			continue
		}
		fc := s.fetching
		if fc == nil {
			if mono() < s.retryAt {
				err := s.lastErr
				s.mu.Unlock()
				return 0, s.unavailable(err)
			}
			if r != &s.empty {
				s.adapt(r.last-r.first+1, mono()-r.since)
			}
			fc = s.startFetchLocked()
		}
		s.mu.Unlock()
		select {
		case <-fc.done:
			if fc.err != nil {
				select {
				case <-s.w.Done():
					return 0, ErrClosed
				default:
				}
				return 0, s.unavailable(fc.err)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}
