package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/otelx"
	"go.opentelemetry.io/otel/trace"
)

// Lease is one acquisition of a Mutex. Its methods are safe for concurrent
// use and for a nil *Lease (which behaves as a lease that was never held:
// Err and Release return ErrNotAcquired).
//
// The lease's Context is cancelled as soon as the lease may be lost: when
// Until passes without a renewal (measured locally, so it happens even when
// Redis cannot be reached), when a renewal finds the lock expired or held by
// another owner, on Release, and on Client.Close. Err gives the reason.
type Lease struct {
	r        *resource
	owner    string
	token    uint64
	acquired time.Time         // before the acquire that succeeded was sent
	cause    trace.SpanContext // the acquire's span, linked from the watchdog's renewals

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	until     time.Time
	renewErr  error
	renewing  int  // extends in flight
	releasing bool // Release has begun: it, not a renewal's answer, ends the lease
	deadline  *time.Timer

	// Watchdog state, guarded by the Client's renewer.
	next    time.Time // when the next renewal is due
	index   int       // position in the renewer's heap; -1 when not queued
	stopped bool      // never renew again

	endOnce     sync.Once
	releaseOnce sync.Once
	releaseErr  error
}

// finish ends the lease with cause, once: later causes are ignored.
func (l *Lease) finish(cause error) {
	l.endOnce.Do(func() {
		l.cancel(cause)
		l.r.c.tel.ended(l.acquired, cause)
	})
}

// driftFor is the allowance for clock-rate differences between this process
// and Redis and for Redis's expiry resolution: 1% of the TTL plus 2ms.
func driftFor(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

func newLease(r *resource, owner string, token uint64, start time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{
		r:        r,
		owner:    owner,
		token:    token,
		acquired: start,
		ctx:      ctx,
		cancel:   cancel,
		until:    start.Add(r.cfg.ttl - driftFor(r.cfg.ttl)),
		index:    -1,
	}
}

// start arms the local deadline and the watchdog.
func (l *Lease) start() {
	l.mu.Lock()
	l.deadline = time.AfterFunc(time.Until(l.until), l.onDeadline)
	l.mu.Unlock()
	if l.r.cfg.watchdog {
		l.r.c.renewer.add(l)
	}
}

func (l *Lease) onDeadline() {
	l.mu.Lock()
	if rem := time.Until(l.until); rem > 0 {
		l.deadline.Reset(rem)
		l.mu.Unlock()
		return
	}
	cause := ErrLeaseExpired
	switch {
	case l.renewErr != nil:
		cause = fmt.Errorf("%w: %w", ErrRenewFailed, l.renewErr)
	case l.renewing > 0:
		cause = fmt.Errorf("%w: no reply before the lease's deadline", ErrRenewFailed)
	}
	l.mu.Unlock()
	l.finish(cause)
}

// renewTTL is the TTL the next renewal sets, and false when WithMaxHold
// allows no more renewals.
func (l *Lease) renewTTL(now time.Time) (time.Duration, bool) {
	ttl := l.r.cfg.ttl
	if mh := l.r.cfg.maxHold; mh > 0 {
		left := l.acquired.Add(mh).Sub(now)
		if left < valid.LockTTLMin {
			return 0, false
		}
		ttl = min(ttl, left)
	}
	return ttl, true
}

// renew runs one extend, bounded by the lease's local deadline, and applies
// its outcome.
func (l *Lease) renew(ctx context.Context, ttl time.Duration) error {
	l.mu.Lock()
	until := l.until
	l.renewing++
	l.mu.Unlock()
	rctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	rctx, span := l.r.c.tel.startRenew(rctx, l.cause)
	start := time.Now()
	status, err := l.r.extend(rctx, l.owner, ttl)
	otelx.End(span, renewOutcome(err), err)
	return l.renewed(start, ttl, status, err)
}

// renewed applies the outcome of an extend sent at start: a new Until, or
// the end of the lease.
func (l *Lease) renewed(start time.Time, ttl time.Duration, status int64, err error) error {
	l.mu.Lock()
	l.renewing--
	if err != nil {
		l.renewErr = err
		l.mu.Unlock()
		return err
	}
	if status == 1 {
		l.renewErr = nil
		if u := start.Add(ttl - driftFor(ttl)); u.After(l.until) {
			l.until = u
		}
	}
	// A renewal answered after the release left may find the lock that
	// release deleted: the release's outcome, not this one, ends the lease.
	releasing := l.releasing
	l.mu.Unlock()
	cause := ErrLeaseExpired
	switch status {
	case 1:
		return nil
	case 2:
		cause = ErrLeaseTaken
	}
	if !releasing {
		l.finish(cause)
	}
	return cause
}

// Extend renews the lease once by the mutex's TTL, for use with the watchdog
// off. It never re-creates a lock that has expired: it then returns
// ErrLeaseExpired (or ErrLeaseTaken when another owner holds it) and the
// lease ends. On a lease that has already ended it returns Err().
func (l *Lease) Extend(ctx context.Context) error {
	if l == nil {
		return ErrNotAcquired
	}
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.renew(ctx, l.r.cfg.ttl); err != nil {
		return fmt.Errorf("lock: extend %s: %w", l.r.name, err)
	}
	return nil
}

// stopRenewal stops the watchdog's renewals of l. A renewal already in
// flight is not waited for (it is bounded by the lease's Until, and a
// release must not wait that long): an extend never re-creates a lock, so
// one that reaches Redis after the release finds nothing to extend.
func (l *Lease) stopRenewal() { l.r.c.renewer.remove(l) }

// end stops the lease's background work and cancels its context with cause
// (unless it already ended for another reason).
func (l *Lease) end(cause error) {
	l.stopRenewal()
	l.mu.Lock()
	if l.deadline != nil {
		l.deadline.Stop()
	}
	l.mu.Unlock()
	l.finish(cause)
}

// Release stops the watchdog, then deletes the lock if this lease still
// holds it, waking a waiter. It returns nil when the lock was released (also
// when a re-sent release finds that its first attempt did it),
// ErrLeaseExpired when the lock had already expired, ErrLeaseTaken when
// another owner holds it, or the Redis error (the release is then retried
// in the background until Redis answers, the Client closes or the lock has
// expired). It runs detached from ctx's
// cancellation (keeping its values), bounded by WithReleaseTimeout, so a
// deferred Release works after the request's context has ended; it does not
// wait for a renewal in flight. Later calls return the first call's result.
//
// A Redlock lease is released when a majority of masters answered and one
// released it; a master that failed or has not answered gets the release
// again in the background, and when the masters that answered are no
// majority Release returns the error.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotAcquired
	}
	l.releaseOnce.Do(func() { l.releaseErr = l.release(ctx) })
	return l.releaseErr
}

func (l *Lease) release(ctx context.Context) (err error) {
	ctx, span := l.r.c.tel.start(ctx, "lock.release")
	defer func() {
		outcome := releaseOutcome(err)
		if outcome != outcomeError {
			otelx.End(span, outcome, nil) // expired or taken: an outcome, not a failure
		} else {
			otelx.End(span, outcome, err)
		}
	}()
	l.mu.Lock()
	l.releasing = true
	l.mu.Unlock()
	l.stopRenewal()
	// Still valid as the release leaves: the lock is then this lease's in
	// Redis (Until allows for clock drift), so a send that finds it gone or
	// taken after an earlier send of this release may have run is looking
	// at that send's effect. Nothing is written per release to remember it.
	valid := l.Err() == nil && time.Now().Before(l.Until())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.r.cfg.releaseTimeout)
	defer cancel()
	status, resent, err := l.r.release(rctx, l.owner, l.token)
	status = releaseStatus(status, valid, resent)
	l.r.c.forget(l)
	switch {
	case err != nil:
		// The release may not have run (its replies lost, and the re-sends
		// with them): keep trying, so the lock is not left held by nobody
		// until its TTL once Redis answers again. A Redlock release has
		// done so already, on each master that did not answer.
		if l.r.peers == nil {
			l.r.withdrawLater(ctx, l.owner)
		}
		err = fmt.Errorf("lock: release %s: %w", l.r.name, err)
		l.end(ErrReleased)
	case status == 1:
		l.end(ErrReleased)
	case status == 2:
		err = ErrLeaseTaken
		l.end(err)
	default:
		err = ErrLeaseExpired
		l.end(err)
	}
	return err
}

// releaseStatus decides a release from the script's reply: relReleased
// (1), relFree (0, the lease expired) or relTaken (2). A reply of
// relFree or relTaken to a release that left while its lease was valid, when
// an earlier send of it may have run (resent), means that send released the
// lock: it found the lock held, as the lease guaranteed, and deleted it; a
// waiter may have taken it since. Only when the fence counter shows that
// Redis lost the acquisition (relLost) is it not: then the lease was lost,
// not released.
func releaseStatus(status int64, valid, resent bool) int64 {
	switch {
	case status >= relLost:
		return status - relLost
	case status != relReleased && valid && resent:
		return relReleased
	}
	return status
}

// releaseBegun reports whether Release has been called: from then on,
// nothing sent for the lease after it (a Redlock master's late grant) is
// reached by it.
func (l *Lease) releaseBegun() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.releasing
}

// Fence returns the lease's fencing token: pass it to the protected
// resource, which refuses tokens older than the newest it has seen
// (FenceLua, CheckFence). Token is 0 for leases without a fence (semaphore
// permits, RWMutex read leases, Redlock); the zero Fence for a nil lease.
func (l *Lease) Fence() Fence {
	if l == nil {
		return Fence{}
	}
	return Fence{Name: l.r.name, Token: l.token}
}

// Context returns a context that is cancelled when the lease ends (lost,
// released, or its Client closed); context.Cause gives the same reason as
// Err. It does not derive from the context given to Acquire. For a nil lease
// it is already cancelled.
func (l *Lease) Context() context.Context {
	if l == nil {
		return endedCtx
	}
	return l.ctx
}

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, and otherwise why it ended:
// ErrLeaseExpired, ErrLeaseTaken, ErrRenewFailed (wrapping the last Redis
// error), ErrReleased or ErrClosed.
func (l *Lease) Err() error {
	if l == nil {
		return ErrNotAcquired
	}
	return context.Cause(l.ctx)
}

// Until returns the time, on this process's monotonic clock, before which
// the lease is certainly still held (barring a Redis failover that lost the
// key): the send time of the acquire or of the last successful renewal plus
// the TTL, minus a drift allowance of 1% of the TTL plus 2ms. The lease's
// Context is cancelled when Until passes. Compare it with time.Now(), never
// with a time from another clock. The zero time for a nil lease.
func (l *Lease) Until() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotAcquired)
	return ctx
}()
