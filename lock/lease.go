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

	mu sync.Mutex
	// until is computed from sends (see setUntil), never raised or lowered
	// otherwise.
	until time.Time
	// sends are the acquire, renewals and extends that may be the last to
	// have set the key's expiry in Redis; ranSent is the latest send time of
	// one known to have run.
	sends     []*ttlSend
	ranSent   time.Time
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
	l := &Lease{
		r:        r,
		owner:    owner,
		token:    token,
		acquired: start,
		ctx:      ctx,
		cancel:   cancel,
		sends:    []*ttlSend{{sent: start, ttl: r.cfg.ttl, answered: time.Now()}},
		ranSent:  start,
		index:    -1,
	}
	l.setUntil()
	return l
}

// ttlSend is one send that sets the lease's TTL in Redis: the acquire, a
// renewal or an Extend.
type ttlSend struct {
	sent     time.Time // before it was handed to go-redis: it ran no earlier
	ttl      time.Duration
	answered time.Time // when its reply said it ran; zero until then
	unknown  bool      // it failed without an answer: it may have run, or may run later
}

// setUntil sets Until to the earliest expiry the key can have in Redis,
// from the sends that may be the last to have run. The last one to run, s,
// ran after every send known to have run, hence after the latest of their
// send times (ranSent), and after its own: it left the key's expiry at
// max(s.sent, ranSent) + s.ttl or later. Every send still in flight or
// without an answer may be that last one, so Until falls as soon as a send
// with a shorter TTL leaves, and a reply raises it only when no such send
// remains. l.mu is held.
func (l *Lease) setUntil() {
	if len(l.sends) == 0 {
		return
	}
	var u time.Time
	for i, s := range l.sends {
		from := s.sent
		if from.Before(l.ranSent) {
			from = l.ranSent
		}
		if e := from.Add(s.ttl - driftFor(s.ttl)); i == 0 || e.Before(u) {
			u = e
		}
	}
	lowered := u.Before(l.until)
	l.until = u
	if lowered && l.deadline != nil && l.ctx.Err() == nil {
		l.deadline.Reset(time.Until(u))
	}
}

// sending records a send of ttl that leaves now and lowers Until to what it
// can set. renewed must be called with its outcome.
func (l *Lease) sending(ttl time.Duration, now time.Time) *ttlSend {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &ttlSend{sent: now, ttl: ttl}
	l.sends = append(l.sends, s)
	l.renewing++
	l.setUntil()
	return s
}

// compact drops the sends that cannot be the last to have run: those whose
// reply came before a send known to have run was sent. The sends without an
// answer that left before that one all count from ranSent: only the
// shortest of their TTLs matters. l.mu is held.
func (l *Lease) compact() {
	keep := l.sends[:0]
	var floor *ttlSend
	for _, s := range l.sends {
		switch {
		case !s.answered.IsZero() && s.answered.Before(l.ranSent):
			continue
		case s.unknown && !s.sent.After(l.ranSent):
			if floor == nil {
				floor = &ttlSend{ttl: s.ttl, unknown: true}
			} else {
				floor.ttl = min(floor.ttl, s.ttl)
			}
			continue
		}
		keep = append(keep, s)
	}
	if floor != nil {
		keep = append(keep, floor)
	}
	clear(l.sends[len(keep):])
	l.sends = keep
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
	s := l.sending(ttl, time.Now())
	rctx, cancel := context.WithDeadline(ctx, l.Until())
	defer cancel()
	rctx, span := l.r.c.tel.startRenew(rctx, l.cause)
	status, err := l.r.extend(rctx, l.owner, ttl)
	otelx.End(span, renewOutcome(status, err), err)
	return l.renewed(s, status, err)
}

// renewed applies the outcome of the extend s: a new Until, or the end of
// the lease.
func (l *Lease) renewed(s *ttlSend, status int64, err error) error {
	l.mu.Lock()
	l.renewing--
	if err != nil {
		s.unknown = true
		l.renewErr = err
		l.compact()
		l.mu.Unlock()
		return err
	}
	if status == 1 {
		l.renewErr = nil
		s.answered = time.Now()
		if s.sent.After(l.ranSent) {
			l.ranSent = s.sent
		}
		l.compact()
		l.setUntil()
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
// holds it, waking a waiter. It returns nil when this release ended the
// hold: a send of it found the lock this lease's and deleted it (also when
// a re-sent release finds, before Until, that an earlier send did it).
// It returns ErrLeaseExpired when the lock had expired (or Redis lost it)
// before the release ran, ErrLeaseTaken when another owner holds it, or
// the Redis error (the release is then retried in the background until
// Redis answers, the Client closes or the lock has expired). What was true
// when Release was called does not decide it: a send that runs after
// Until, because it waited for a connection or on a paused server, may
// find the lock expired. It runs detached from ctx's
// cancellation (keeping its values), bounded by WithReleaseTimeout, so a
// deferred Release works after the request's context has ended; it does not
// wait for a renewal in flight. Later calls return the first call's result.
//
// A Redlock lease is released (nil) when a majority of masters released
// the lock, or when a majority answered before Until and one of them
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
	ended := l.Err() != nil
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.r.cfg.releaseTimeout)
	defer cancel()
	status, resent, answered, err := l.r.release(rctx, l.owner, l.token)
	// The send that answered ran before its reply came: when that was
	// before Until, the lock was this lease's when it ran unless an earlier
	// send of this release had deleted it (doc.go, "Retries are safe").
	// Nothing is written per release to remember it.
	status = releaseStatus(status, !ended && answered.Before(l.Until()), resent)
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
// (1), relFree (0, the lease expired) or relTaken (2). held says that the
// send that answered ran while the lease was certainly held (its reply came
// before Until, and the lease had not ended before Release). A reply of
// relFree or relTaken to such a send, when an earlier send of the release
// may have run (resent), means that earlier send released the lock: it ran
// before this one, so while the lease was held, found the lock this
// lease's, and deleted it; a waiter may have taken it since. Without an
// earlier send, or when the script found that none can have released it
// (relSure), the lease was lost; when the answer came after Until, the
// lease may have ended before any send ran: neither is a release.
func releaseStatus(status int64, held, resent bool) int64 {
	switch {
	case status >= relSure:
		return status - relSure
	case status != relReleased && held && resent:
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
// permits, RWMutex read leases); the zero Fence for a nil lease. A Redlock
// lease's token comes from its masters' counters (doc.go, "Redlock's
// fencing token").
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
// the lease is certainly still held (barring a Redis failover or restart
// that lost the key): the earliest expiry the lock can have in Redis after
// the acquire and every renewal and Extend sent so far, minus a drift
// allowance of 1% of the TTL plus 2ms (see the package documentation). It
// falls as soon as a renewal with a shorter TTL than the lock has leaves
// (WithMaxHold), and rises when a renewal's reply leaves no shorter one
// that may still run. The lease's Context is cancelled when Until passes.
// Compare it with time.Now(), never with a time from another clock. The
// zero time for a nil lease.
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
