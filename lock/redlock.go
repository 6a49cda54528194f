package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
)

// Redlock is a lock over N independent Redis masters (no replication
// between them), after the Redlock algorithm: an acquire attempt tries every
// master in parallel with one owner ID (a new one per attempt) and holds the
// lock when a majority
// (N/2+1) granted it while time is left on the TTL; otherwise it releases
// whatever it got. Renewals and releases go to every master the same way,
// and a renewal that no longer reaches a majority ends the lease. Each call
// is decided by the answers in hand: it returns once the answers of a
// majority decide it, and counts a master that has not answered within 5%
// of the TTL as failed, so a silent minority (a partition, a paused host)
// does not hold up the others. A call to such a master goes on in the
// background until go-redis gives up on it; Close waits for those calls. A
// release that failed or went unanswered on a master is retried there in
// the background, like Lease.Release's, until that master answers.
//
// A lease's fencing token (Lease.Fence) is the largest fence counter its
// granting masters drew, and a majority holding the lock has been brought up
// to it before the lease is returned, so tokens strictly increase from one
// holder to the next on the same masters; the protected side checks it with
// FenceLua or CheckFence as a Mutex's (doc.go, "Redlock's fencing token").
//
// Caveats, stated plainly:
//
//   - Safety rests on timing assumptions: bounded process pauses, bounded
//     network delay and clocks that run at about the same rate on every
//     master (the drift allowance is 1% of the TTL plus 2ms). The fence
//     refuses a holder paused past its lease; it does not stop two leases
//     overlapping when the clocks or delays break these assumptions.
//   - A master that restarts without persistence forgets locks it granted,
//     which can hand a majority to a second owner, and its fence counter,
//     which can hand out a token at or below one already used. Keeping it
//     out for one TTL restores the exclusion only. Run the masters with AOF
//     (appendfsync always).
//   - Waiting is by jittered polling (no notifications across masters).
type Redlock struct {
	coord *Client   // the leases' watchdog, tracking and telemetry
	peers []*Client // one per master
}

// NewRedlock returns a Redlock over the given masters (at least 1; use an
// odd number, typically 3 or 5). The go-redis clients stay owned by the
// caller. Options as for New, except those Redlock.Mutex lists as not
// applying; waiting polls with a 10ms..200ms backoff unless WithPolling says
// otherwise. No masters, a nil master, an invalid option or one that cannot
// apply to a Redlock is an error wrapping ErrInvalid.
func NewRedlock(masters []redis.UniversalClient, opts ...Option) (*Redlock, error) {
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w: redlock needs at least one master", ErrInvalid)
	}
	for i, m := range masters {
		if m == nil {
			return nil, fmt.Errorf("%w: redlock master %d is nil", ErrInvalid, i)
		}
	}
	cfg := newConfig()
	for _, o := range append([]Option{WithPolling(10*time.Millisecond, 200*time.Millisecond)}, opts...) {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if err := redlockOptionErr(cfg); err != nil {
		return nil, err
	}
	rl := &Redlock{coord: newClient(masters[0], cfg)}
	for _, m := range masters {
		rl.peers = append(rl.peers, newClient(m, cfg))
	}
	return rl, nil
}

// redlockOptionErr reports an option that cannot apply to a Redlock, as an
// error wrapping ErrInvalid: its masters are independent (nothing to
// acknowledge), it waits by polling (no fair queue), and it tries each
// master once within the quorum's deadline (no retry policy).
func redlockOptionErr(c config) error {
	switch {
	case c.fair:
		return fmt.Errorf("%w: WithFair does not apply to a Redlock: it waits by polling", ErrInvalid)
	case c.ack.Replicas > 0:
		return fmt.Errorf("%w: WithReplicaAck does not apply to a Redlock: its masters are independent", ErrInvalid)
	case c.policy != retry.DefaultPolicy():
		return fmt.Errorf("%w: WithRetry and WithClusterBudget do not apply to a Redlock: each master is tried once", ErrInvalid)
	}
	return nil
}

// Close stops the background work of the Redlock and its leases, like
// Client.Close, and waits for calls to masters still running after their
// caller returned (bounded by go-redis's timeouts).
func (rl *Redlock) Close() error {
	err := rl.coord.Close()
	for _, p := range rl.peers {
		err = errors.Join(err, p.Close())
	}
	return err
}

// RedlockMutex is a named lock over a Redlock's masters; like Mutex, a
// factory of leases, safe to share.
type RedlockMutex struct{ r *resource }

// Mutex returns the Redlock mutex called name (same grammar as Mutex names).
// Options as for Client.Mutex, except WithFair, WithReplicaAck,
// WithRequiredReplicaAck, WithRetry and WithClusterBudget, which cannot
// apply: with any of them every call fails with ErrInvalid.
func (rl *Redlock) Mutex(name string, opts ...Option) *RedlockMutex {
	r := rl.coord.resource(mutexKind, "redlock", name, opts)
	if r.err == nil {
		r.err = redlockOptionErr(r.cfg)
	}
	for _, p := range rl.peers {
		pr := p.resource(mutexKind, "redlock", name, opts)
		if pr.err == nil {
			counter := p.counterKey(keys.Group(name))
			pr.acquireKeys = append(pr.acquireKeys, counter)
			pr.releaseKeys = append(pr.releaseKeys, counter)
			pr.cfg.ack = r.cfg.ack
		}
		// A master that is down must not hold up the others: no retries
		// beyond go-redis's own, and the coordinator, not the master's
		// attempt, decides what to give back. A Cluster master gets no
		// slot-move budget either: its deadline is the quorum's.
		pr.policy = retry.Policy{Attempts: 1, ClusterBudget: -1}.For(p.rdb)
		pr.peer = true
		r.peers = append(r.peers, pr)
	}
	return &RedlockMutex{r: r}
}

// Name returns the lock's name.
func (m *RedlockMutex) Name() string { return m.r.name }

// TryAcquire takes the lock if a majority of masters grant it, and returns
// ErrNotAcquired otherwise (having released what it got).
func (m *RedlockMutex) TryAcquire(ctx context.Context) (*Lease, error) { return m.r.tryAcquire(ctx) }

// Acquire takes the lock, polling until a majority grants it or ctx ends.
func (m *RedlockMutex) Acquire(ctx context.Context) (*Lease, error) { return m.r.acquire(ctx) }

func (r *resource) quorum() int { return len(r.peers)/2 + 1 }

// peerTimeout is how long the masters' answers wait for a master that has
// not answered: 5% of the TTL, the Redlock algorithm's "timeout much
// smaller than the auto-release time". A silent master (partitioned,
// paused) costs a call at most that, and none when the others' answers
// already decide it, so a lease keeps at least 95% of its TTL, less the
// drift allowance.
func peerTimeout(ttl time.Duration) time.Duration { return ttl / 20 }

// errNoAnswer stands for a master that had not answered by peerTimeout.
var errNoAnswer = errors.New("no answer in time")

// peerAnswer is one master's answer: for an acquire, granted (ok) or the
// holder's remaining milliseconds (n); for an extend or a release, the
// script's status (n).
type peerAnswer struct {
	answered bool
	ok       bool
	n        int64
	err      error
}

// gathering is one call to every master whose answers are read before all
// have come.
type gathering struct {
	mu      sync.Mutex
	answers []peerAnswer
	closed  bool // answers are read; later ones go to late
	notify  chan struct{}
	decided chan struct{} // closed by settle
	late    func(p *resource, a peerAnswer)
}

// gather calls every master in parallel and returns their answers once
// enough says they decide the outcome, all have answered, or peerTimeout
// has passed. A master without an answer by then is reported
// with errNoAnswer; its call goes on in the background (the Client's Close
// waits for it). The caller must call settle once it has decided: late
// (nil for nothing) then gets each answer that came after gather returned.
func (r *resource) gather(ctx context.Context, call func(p *resource) peerAnswer, enough func([]peerAnswer) bool) ([]peerAnswer, func(late func(p *resource, a peerAnswer))) {
	g := &gathering{
		answers: make([]peerAnswer, len(r.peers)),
		notify:  make(chan struct{}, len(r.peers)),
		decided: make(chan struct{}),
	}
	for i, p := range r.peers {
		r.c.bg.Go(func() {
			a := call(p)
			a.answered = true
			g.mu.Lock()
			if !g.closed {
				g.answers[i] = a
				g.mu.Unlock()
				g.notify <- struct{}{}
				return
			}
			g.mu.Unlock()
			<-g.decided
			if g.late != nil {
				g.late(p, a)
			}
		})
	}
	timer := time.NewTimer(peerTimeout(r.cfg.ttl))
	defer timer.Stop()
	for n := 0; n < len(r.peers); n++ {
		g.mu.Lock()
		done := enough(g.answers)
		g.mu.Unlock()
		if done {
			break
		}
		// Not on ctx's end: the calls end with it or at peerTimeout, and
		// an answer in hand is given back now rather than later.
		select {
		case <-g.notify:
			continue
		case <-timer.C:
		}
		break
	}
	g.mu.Lock()
	g.closed = true
	answers := slices.Clone(g.answers)
	g.mu.Unlock()
	for i := range answers {
		if !answers[i].answered {
			answers[i].err = fmt.Errorf("master %d: %w within %v", i, errNoAnswer, peerTimeout(r.cfg.ttl))
		}
	}
	return answers, func(late func(p *resource, a peerAnswer)) {
		g.late = late
		close(g.decided)
	}
}

// peerCtx bounds one master's part of an acquire or renewal by peerTimeout
// (go-redis applies the deadline when its ContextTimeoutEnabled is on; the
// answers are not waited for longer in any case).
func (r *resource) peerCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, peerTimeout(r.cfg.ttl))
}

// attemptQuorum makes one acquire attempt on every master. It takes a new
// owner ID rather than the caller's: what a failed attempt may have got is
// given back, on a master that does not answer in the background, by a
// release for that attempt's owner ID, which must never match the lock of
// a later attempt of the same Acquire on that master.
//
// Each master's grant draws its fence counter (acquire.lua's INCR, or the
// value stored with the lock when a re-send finds it already granted). The
// lease's token is the largest drawn; it is returned at once when a
// majority drew exactly it, and otherwise only once raiseQuorum has brought
// a majority holding the lock up to it (doc.go, "Redlock's fencing token").
func (r *resource) attemptQuorum(ctx context.Context, _ string) (*Lease, time.Duration, error) {
	owner := newOwner()
	start := time.Now()
	q := r.quorum()
	enough := func(as []peerAnswer) bool {
		var got, no int
		for _, a := range as {
			switch {
			case !a.answered:
			case a.ok:
				got++
			default:
				no++
			}
		}
		return got >= q || no > len(as)-q
	}
	answers, settle := r.gather(ctx, func(p *resource) peerAnswer {
		pctx, cancel := r.peerCtx(ctx)
		defer cancel()
		ok, n, _, err := p.acquireOnce(pctx, owner, modeTry)
		return peerAnswer{ok: ok, n: n, err: err}
	}, enough)
	var (
		got   int
		token int64
		wait  time.Duration
		errs  []error
	)
	// A master not waited for, because the others' answers had decided the
	// attempt, is no failure: a master down and another held by someone
	// else leave an Acquire to wait, not to fail. What it may grant is
	// given back when it answers (settle).
	decided := enough(answers)
	for i, o := range answers {
		switch {
		case o.ok:
			got++
			token = max(token, o.n)
		case !o.answered && decided:
		case o.err != nil:
			errs = append(errs, r.peerErr(i, o.err))
		case wait == 0 || time.Duration(o.n)*time.Millisecond < wait:
			wait = time.Duration(o.n) * time.Millisecond
		}
	}
	inTime := func() bool { return r.cfg.ttl-time.Since(start)-driftFor(r.cfg.ttl) > 0 }
	fenced, raised := false, false
	if got >= q && inTime() {
		// at: the masters whose grant drew the token itself: their
		// counter was at it while the lock was this owner's.
		at := make([]bool, len(answers))
		n := 0
		for i, o := range answers {
			if o.ok && o.n == token {
				at[i] = true
				n++
			}
		}
		fenced = n >= q
		if !fenced {
			raised = true
			fenced, errs = r.raiseQuorum(ctx, owner, token, at)
		}
		fenced = fenced && inTime()
	}
	tok := strconv.FormatInt(token, 10)
	if fenced {
		// A master that grants it late holds it for this lease: renewals
		// and the release reach it like the others, unless the release has
		// begun (it may have reached that master before the grant did):
		// then the late grant is given back. A master whose grant drew
		// less than the token is brought up to it in the background, so
		// that later acquires find the counters equal and need one round.
		l, wait, err := r.newLease(ctx, owner, uint64(token), start)
		settle(func(p *resource, a peerAnswer) {
			if (a.ok || a.err != nil) && (l == nil || l.releaseBegun()) {
				p.abandonLate(ctx, owner)
			}
			if a.ok && a.n < token {
				p.raiseOnce(ctx, owner, tok)
			}
		})
		if l != nil && !raised {
			for i, a := range answers {
				if a.ok && a.n < token {
					r.peers[i].raiseLater(ctx, owner, tok)
				}
			}
		}
		return l, wait, err
	}
	// Give back what was granted, and what may have been (an error, a
	// late answer), on each master once its call has ended.
	giveBack := func(p *resource, a peerAnswer) {
		if a.ok || a.err != nil {
			p.abandon(ctx, owner)
		}
	}
	settle(func(p *resource, a peerAnswer) {
		if a.ok || a.err != nil {
			p.abandonLate(ctx, owner)
		}
	})
	var wg sync.WaitGroup
	for i, a := range answers {
		if a.answered {
			wg.Go(func() { giveBack(r.peers[i], a) })
		}
	}
	wg.Wait()
	if len(errs) > len(r.peers)-q {
		return nil, 0, fmt.Errorf("lock: redlock %s: %d of %d masters failed: %w", r.name, len(errs), len(r.peers), errors.Join(errs...))
	}
	return nil, wait, nil
}

// raiseHeld is redlock_raise.lua's reply when the lock is this owner's
// (and the counter at the token or above); 0 and 2 say it is not.
const raiseHeld = 1

// raiseQuorum is the second round of an acquire whose granting masters
// drew different counters: it raises the fence counter of every master
// not in at (those whose grant drew the token) to token, and reports
// whether at and the masters that answered that they still hold the lock
// for owner make a majority, with the failures of the others. It returns
// as soon as the answers decide it, waiting up to peerTimeout.
func (r *resource) raiseQuorum(ctx context.Context, owner string, token int64, at []bool) (bool, []error) {
	q := r.quorum()
	tok := strconv.FormatInt(token, 10)
	answers, settle := r.gather(ctx, func(p *resource) peerAnswer {
		for i, o := range r.peers {
			if o == p && at[i] {
				return peerAnswer{n: raiseHeld}
			}
		}
		pctx, cancel := r.peerCtx(ctx)
		defer cancel()
		n, err := p.raise(pctx, owner, tok)
		return peerAnswer{n: n, err: err}
	}, func(as []peerAnswer) bool { return decides(as, q) })
	settle(nil)
	var (
		held int
		errs []error
	)
	decided := decides(answers, q)
	for i, a := range answers {
		switch {
		case !a.answered && decided: // not waited for: no failure
		case a.err != nil:
			errs = append(errs, r.peerErr(i, a.err))
		case a.n == raiseHeld:
			held++
		}
	}
	return held >= q, errs
}

// raise runs redlock_raise.lua on one master (go-redis's re-sends are
// harmless: the script is idempotent): raiseHeld when the lock there is
// owner's, 0 when nobody holds it, 2 when another owner does.
func (r *resource) raise(ctx context.Context, owner, token string) (int64, error) {
	var n int64
	err := retry.Do(ctx, r.policy, func(ctx context.Context, _ int) error {
		var err error
		n, err = raiseScript.Run(ctx, r.c.rdb, r.acquireKeys, owner, token).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("lock: redlock raise %s: %w", r.name, err)
	}
	return n, nil
}

// raiseOnce raises the master's counter to token, best effort: bounded by
// the release timeout, its outcome unused. It runs after the acquire that
// left it has returned (a late grant, or raiseLater), so it is background
// work: a lock.raise root span linked to the span in ctx, that acquire's.
func (r *resource) raiseOnce(ctx context.Context, owner, token string) {
	ctx, span := r.c.tel.startRaise(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.releaseTimeout)
	defer cancel()
	_, err := r.raise(rctx, owner, token)
	withdrawn(span, err)
}

// raiseLater runs raiseOnce in the background (Close waits for it).
func (r *resource) raiseLater(ctx context.Context, owner, token string) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.closed {
		return
	}
	r.c.bg.Go(func() { r.raiseOnce(ctx, owner, token) })
}

// extendQuorum: 1 when a majority extended; 0 or 2 when the answers rule a
// majority out (2 if some master has another owner); an error otherwise.
func (r *resource) extendQuorum(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	q := r.quorum()
	answers, settle := r.gather(ctx, func(p *resource) peerAnswer {
		pctx, cancel := r.peerCtx(ctx)
		defer cancel()
		n, err := p.extend(pctx, owner, ttl)
		return peerAnswer{n: n, err: err}
	}, func(as []peerAnswer) bool { return decides(as, q) })
	settle(nil)
	return r.tally(answers, q)
}

// releaseQuorum decides a release by a majority: relReleased when a
// majority released the lock; otherwise relTaken when one has another
// owner, relFree when none has; an error when the masters that answered are
// no majority (the lock may still be this owner's on a majority). Answers
// that came while the lease was held (before Until) found the lock on a
// majority, so Release decides a reply other than relReleased as a
// Mutex's (releaseStatus): released when resent, that is when some master
// released it (the others never granted this lease, or had already
// released it) or a master's client may have sent the release to it more
// than once. It returns as soon as the answers decide it, waiting up to
// peerTimeout for the rest. A master whose
// release failed, or that answers after that with a failure, gets the
// release again in the background until it answers; one that has not
// answered yet goes on, bounded by the release timeout.
func (r *resource) releaseQuorum(ctx context.Context, owner string) (status int64, resent bool, err error) {
	q, n := r.quorum(), len(r.peers)
	answers, settle := r.gather(ctx, func(p *resource) peerAnswer {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.releaseTimeout)
		defer cancel()
		s, _, _, err := p.release(pctx, owner, 0)
		return peerAnswer{n: s, err: err}
	}, func(as []peerAnswer) bool {
		var ok, failed int
		for _, a := range as {
			switch {
			case !a.answered:
			case a.err == nil:
				ok++
			default:
				failed++
			}
		}
		return ok > n-q || n-failed <= n-q
	})
	retryLater := func(p *resource, a peerAnswer) {
		if a.err != nil {
			p.withdrawLater(ctx, owner)
		}
	}
	settle(retryLater)
	var (
		ok, released, taken int
		errs                []error
	)
	for i, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, r.peerErr(i, a.err))
			if a.answered {
				retryLater(r.peers[i], a)
			}
			continue
		case a.n == relReleased:
			released++
		case a.n%relSure == relTaken:
			taken++
		}
		ok++
		resent = resent || retry.Resends(r.peers[i].c.rdb)
	}
	// A master that released it explains the others' answers: they never
	// granted this lease, or an earlier send had released it there.
	resent = resent || released > 0
	switch {
	case ok <= n-q:
		return 0, false, fmt.Errorf("lock: redlock %s: %d of %d masters failed: %w", r.name, len(errs), n, errors.Join(errs...))
	case released >= q:
		return relReleased, resent, nil
	case taken > 0:
		return relTaken, resent, nil
	}
	return relFree, resent, nil
}

// decides reports whether the answers so far settle a renewal needing need
// successes: need succeeded, or too many failed.
func decides(as []peerAnswer, need int) bool {
	var done, not int
	for _, a := range as {
		switch {
		case !a.answered:
		case a.err == nil && a.n == 1:
			done++
		default:
			not++
		}
	}
	return done >= need || not > len(as)-need
}

func (r *resource) tally(answers []peerAnswer, need int) (int64, error) {
	var (
		done, definite int
		errs           []error
	)
	taken := false
	for i, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, r.peerErr(i, a.err))
		case a.n == 1:
			done++
		default:
			definite++
			taken = taken || a.n == 2
		}
	}
	switch {
	case done >= need:
		return 1, nil
	case definite > len(answers)-need:
		if taken {
			return 2, nil
		}
		return 0, nil
	default:
		return 0, fmt.Errorf("lock: redlock %s: %w", r.name, errors.Join(errs...))
	}
}

// peerErr marks the failure of master i's call with ErrUnknownOutcome when
// the call may have run there: no answer in time, or a failure that its
// client's policy says may have run (it is already marked when its own
// retries said so). Joined, the masters' failures of a call without a
// majority then match ErrUnknownOutcome when any of them may have run.
func (r *resource) peerErr(i int, err error) error {
	if errors.Is(err, ErrUnknownOutcome) {
		return err
	}
	if errors.Is(err, errNoAnswer) || r.peers[i].policy.MayHaveRun(err) {
		return errors.Join(ErrUnknownOutcome, err)
	}
	return err
}
