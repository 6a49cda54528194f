package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"go.opentelemetry.io/otel/trace"
)

var (
	acquireScript = lockScript("acquire.lua")
	extendScript  = lockScript("extend.lua")
	releaseScript = lockScript("release.lua")
	raiseScript   = lockScript("redlock_raise.lua")
)

// keyVersion is the layout version of the package's keys (the v<N> in
// them); doc.go says what changed in each and how to upgrade.
const keyVersion = 2

// Client makes mutexes on one Redis deployment (a single server, a
// primary with replicas behind Sentinel, or a Cluster). It owns the process's
// release-notification subscriber and the watchdogs of its leases; Close
// stops them. A Client is safe for concurrent use; make one per process and
// deployment.
type Client struct {
	rdb        redis.UniversalClient
	cfg        config
	space      keys.Space
	sharded    bool   // Cluster: SPUBLISH/SSUBSCRIBE
	publish    string // the release scripts' publish command
	publishArg any    // publish, boxed once
	hub        *hub
	renewer    *renewer
	tel        *telemetry
	bg         sync.WaitGroup // Redlock calls still running after their caller returned; withdrawals retried

	mu     sync.Mutex
	leases map[*Lease]struct{}
	closed bool

	beforeSubscribe func() // test hook
}

// New returns a Client using rdb. rdb stays owned by the caller: Close does
// not close it. A nil rdb or an invalid option is an error wrapping
// ErrInvalid, and no Client is returned.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: lock.New needs a Redis client", ErrInvalid)
	}
	cfg := newConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	return newClient(rdb, cfg), nil
}

func newClient(rdb redis.UniversalClient, cfg config) *Client {
	c := &Client{
		rdb:    rdb,
		cfg:    cfg,
		space:  keys.Space{Prefix: cfg.prefix, Module: "lock", Version: keyVersion},
		leases: make(map[*Lease]struct{}),
	}
	_, c.sharded = rdb.(*redis.ClusterClient)
	c.publish = "PUBLISH"
	if c.sharded {
		c.publish = "SPUBLISH"
	}
	c.publishArg = c.publish
	c.hub = newHub(rdb)
	c.renewer = newRenewer(c)
	c.tel = newTelemetry(cfg)
	return c
}

// Close stops the Client's background work and waits for it: the release
// subscriber, the watchdog of every lease still held, and withdrawals still
// being retried (a call in flight runs to its end, within the release
// timeout; no new attempt starts). Those leases are not
// released in Redis (they end at their TTL); their Context is cancelled with
// cause ErrClosed. Later calls return ErrClosed. Close does not close the
// go-redis client. It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	leases := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	clear(c.leases)
	c.mu.Unlock()
	c.hub.close()
	c.renewer.close()
	for _, l := range leases {
		l.end(ErrClosed)
	}
	c.bg.Wait()
	return nil
}

func (c *Client) track(l *Lease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.leases[l] = struct{}{}
	return nil
}

func (c *Client) forget(l *Lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}

// Do acquires the mutex name (waiting as Mutex.Acquire does), runs fn while
// holding it and releases it. fn's context ends when ctx ends or the lease
// is lost, whichever comes first. Do returns fn's error; when fn succeeded
// but the lease was lost before the release, it returns the loss
// (ErrLeaseExpired, ErrLeaseTaken, ErrRenewFailed): fn may then have run
// without exclusion.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lease) error, opts ...Option) error {
	l, err := c.Mutex(name, opts...).Acquire(ctx)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	ferr := fn(fctx, l)
	stop()
	cancel(nil)
	lost := l.Err()
	rerr := l.Release(ctx)
	switch {
	case ferr != nil:
		return ferr
	case lost != nil:
		return lost
	default:
		return rerr
	}
}

// kind is what makes a resource a mutex or a semaphore: its scripts.
type kind struct {
	acquire, extend, release *script.Script
	// withdraw: a waiter that gives up runs the release script, which
	// clears what its attempts left behind (an RWMutex writer's mark).
	withdraw bool
	// targeted: release messages name the waiter to wake (fair mode), and
	// waiters keep their place with heartbeats.
	targeted bool
	// broadcast: a release wakes every local waiter, not just the first
	// (RWMutex: readers and writers wait on one channel, and many readers
	// may get in at once).
	broadcast bool
}

var (
	mutexKind     = &kind{acquire: acquireScript, extend: extendScript, release: releaseScript}
	fairMutexKind = &kind{
		acquire:  lockScript("fair_acquire.lua"),
		extend:   extendScript,
		release:  lockScript("fair_release.lua"),
		withdraw: true,
		targeted: true,
	}
)

// resource is a named lockable thing: a mutex or a semaphore. It does the
// acquiring, waiting and releasing; Lease renews through it.
type resource struct {
	c           *Client
	cfg         config
	kind        *kind
	name        string
	key         string   // the key holding the owner(s); extend's KEYS[i]
	acquireKeys []string // KEYS of the acquire script
	extraArgs   []any    // acquire ARGV after owner and TTL, before the mode
	releaseKeys []string // KEYS of the release script
	ttlArg      any      // the TTL in milliseconds, as the scripts take it (boxed once)
	channel     string
	channelArg  any         // channel, boxed once for the release scripts
	peers       []*resource // Redlock: the same lock on each independent master
	peer        bool        // one master of a Redlock: its coordinator gives back what it took
	policy      retry.Policy
	err         error
}

func (c *Client) resource(k *kind, kindName, name string, opts []Option) *resource {
	cfg := c.cfg
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	r := &resource{c: c, cfg: cfg, kind: k, name: name, err: cfg.err, policy: cfg.policy.For(c.rdb)}
	if r.err == nil {
		r.err = valid.Name("lock name", name)
	}
	if r.err == nil {
		g := keys.Group(name)
		r.key = c.space.Key(g, kindName, name)
		r.acquireKeys = []string{r.key}
		r.releaseKeys = []string{r.key}
		r.ttlArg = strconv.FormatInt(cfg.ttl.Milliseconds(), 10)
		r.channel = c.space.Key(g, "wake", kindName, name)
		r.channelArg = r.channel
	}
	return r
}

// Mutex is a named lock. It is a factory: each successful Acquire or
// TryAcquire returns a new *Lease, and one Mutex may be shared by any number
// of goroutines.
type Mutex struct{ r *resource }

// Mutex returns the mutex called name: 1–128 bytes of A-Z a-z 0-9 . _ - :
// with at most one '/'. In "group/name" the part before '/' is the hash tag,
// so locks of one group share a Cluster slot (and are renewed together);
// a name without '/' is its own group. opts override the Client's options
// for this mutex (WithTTL, WithWatchdog, WithMaxHold, WithPolling,
// WithReleaseTimeout, WithReplicaAck). An invalid name or option is
// returned by Acquire and TryAcquire, which then write nothing.
func (c *Client) Mutex(name string, opts ...Option) *Mutex {
	r := c.resource(mutexKind, "mutex", name, opts)
	if r.err == nil {
		g := keys.Group(name)
		counter := c.counterKey(g)
		r.acquireKeys = append(r.acquireKeys, counter)
		r.releaseKeys = append(r.releaseKeys, counter)
		if r.cfg.fair {
			r.kind = fairMutexKind
			queue := []string{c.space.Key(g, "queue", name), c.space.Key(g, "beats", name)}
			r.acquireKeys = append(r.acquireKeys, queue...)
			r.releaseKeys = append(r.releaseKeys, queue...)
			r.extraArgs = []any{strconv.FormatInt(FairEviction.Milliseconds(), 10)}
		}
	}
	return &Mutex{r: r}
}

// Name returns the mutex's name.
func (m *Mutex) Name() string { return m.r.name }

// TryAcquire takes the lock if it is free and returns ErrNotAcquired at once
// if another owner holds it. One round trip (more only when a reply is lost
// and the same acquire is re-sent).
func (m *Mutex) TryAcquire(ctx context.Context) (*Lease, error) { return m.r.tryAcquire(ctx) }

// Acquire takes the lock, waiting until it is free or ctx ends. It is woken
// by the holder's release (a notification on the lock's channel), and
// otherwise tries again when the holder's TTL would have run out, so a
// crashed holder or a lost notification delays it by at most one TTL. When
// ctx ends first the error matches both ErrNotAcquired and ctx.Err().
func (m *Mutex) Acquire(ctx context.Context) (*Lease, error) { return m.r.acquire(ctx) }

// counterKey is the fence counter shared by the names of slot group g: one
// per hash slot (see MaxFenceCounters).
func (c *Client) counterKey(g string) string { return c.space.Key(counterTag(g), "tokens") }

// traced runs do, an acquire, once r is ready, under a lock.acquire span
// that records its outcome and how long it took.
func (r *resource) traced(ctx context.Context, do func(context.Context) (*Lease, error)) (l *Lease, err error) {
	if err := r.ready(); err != nil {
		return nil, err
	}
	start := time.Now()
	ctx, span := r.c.tel.start(ctx, "lock.acquire")
	defer func() { r.c.tel.acquired(ctx, span, start, err) }()
	return do(ctx)
}

func (r *resource) tryAcquire(ctx context.Context) (*Lease, error) {
	return r.traced(ctx, func(ctx context.Context) (*Lease, error) {
		l, _, err := r.attempt(ctx, newOwner(), modeTry)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, ErrNotAcquired
		}
		return l, nil
	})
}

func (r *resource) acquire(ctx context.Context) (*Lease, error) { return r.traced(ctx, r.wait) }

// wait is Acquire within its span: attempts until one takes the lock,
// waiting for a release in between.
func (r *resource) wait(ctx context.Context) (l *Lease, err error) {
	// One owner ID for the whole call: an attempt whose reply was lost is
	// recognised by a later attempt instead of blocking everyone until TTL.
	owner := newOwner()
	// A subscription already listening before the first attempt (other
	// local waiters) makes the retry after joining unnecessary: a release
	// after that attempt reaches this process's waiters anyway (in fair
	// mode, a message naming this owner before it joined is kept for it).
	var since *chanState
	if r.cfg.pollMin == 0 {
		since = r.c.hub.listening(r.channel)
	}
	if r.kind.withdraw {
		// Whatever an attempt announced (an RWMutex writer's mark, a
		// fair-mode queue entry) is withdrawn before Acquire returns
		// without a lease, from whichever step it gave up at.
		defer func() {
			if l == nil {
				r.abandon(ctx, owner)
			}
		}()
	}
	l, pttl, err := r.attempt(ctx, owner, r.firstMode(modeWait))
	if l != nil || err != nil {
		return l, r.waitErr(ctx, err)
	}
	var (
		w          *waiter
		continuous bool
	)
	if f := r.c.beforeSubscribe; f != nil {
		f()
	}
	if r.cfg.pollMin == 0 {
		// Subscribe before the next attempt: a release after that attempt
		// is then certain to wake us.
		w, continuous, err = r.c.hub.join(ctx, r.channel, r.kind.broadcast, owner, since)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return nil, r.waitErr(ctx, err)
			}
			w = nil // no notifications: fall back to the TTL cap
		}
		defer w.leave()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for n := 0; ; n++ {
		if w == nil || n > 0 || continuous {
			timer.Reset(r.waitFor(n, pttl))
			select {
			case <-w.woken():
			case <-timer.C:
			case <-r.c.hub.done:
				return nil, ErrClosed
			case <-ctx.Done():
				return nil, errors.Join(ErrNotAcquired, ctx.Err())
			}
		}
		l, pttl, err = r.attempt(ctx, owner, modeWaited)
		if l != nil || err != nil {
			return l, r.waitErr(ctx, err)
		}
	}
}

// waitFor is the longest wait before attempt n+1: the holder's remaining TTL
// (plus a millisecond for Redis's expiry to pass), and in polling mode a
// jittered backoff.
func (r *resource) waitFor(n int, pttl time.Duration) time.Duration {
	if pttl <= 0 {
		pttl = r.cfg.ttl
	}
	d := pttl + time.Millisecond
	if r.kind.targeted {
		d = min(d, FairHeartbeat) // keep our place in the queue
	}
	if r.cfg.pollMin > 0 {
		b := r.cfg.pollMin
		for i := 0; i < n && b < r.cfg.pollMax; i++ {
			b *= 2
		}
		b = min(b, r.cfg.pollMax)
		d = min(d, b/2+mathrand.N(b/2+1))
	}
	return d
}

func (r *resource) waitErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return errors.Join(ErrNotAcquired, ctx.Err())
	}
	return err
}

func (r *resource) ready() error {
	if r.err != nil {
		return r.err
	}
	r.c.mu.Lock()
	closed := r.c.closed
	r.c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// An acquire attempt's mode, the acquire scripts' last argument.
const (
	modeTry    = "0" // the caller will not wait if refused
	modeWait   = "1" // it will wait if refused: a refusal marks the lock (or queues the caller)
	modeWaited = "2" // it has waited: as modeWait, and a lock it takes starts marked
)

// modeArg is mode as a script argument: a constant, so passing it boxes
// nothing.
func modeArg(mode string) any {
	switch mode {
	case modeTry:
		return modeTry
	case modeWait:
		return modeWait
	case modeWaited:
		return modeWaited
	}
	return mode
}

// firstMode is the mode of Acquire's first attempt: mode, or modeWaited
// when goroutines of this process already wait for the lock, so that a lock
// this call takes starts marked and its release wakes one of them (a
// releaser taking the lock straight back must not leave them asleep until
// their TTL cap, nor hold the lock unchallenged). TryAcquire, which never
// waits, keeps modeTry: a refusal in another mode would announce a waiter.
func (r *resource) firstMode(mode string) string {
	if r.cfg.pollMin == 0 && r.peers == nil && r.c.hub.waiting(r.channel) {
		return modeWaited
	}
	return mode
}

// waiting reports whether any local waiter waits on channel.
func (h *hub) waiting(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.chans[channel]
	return st != nil && len(st.waiters) > 0
}

// attempt makes one acquire attempt in mode. It returns the lease, or how
// long the current holders still hold it.
func (r *resource) attempt(ctx context.Context, owner, mode string) (*Lease, time.Duration, error) {
	if r.peers != nil {
		return r.attemptQuorum(ctx, owner)
	}
	ok, n, start, err := r.acquireOnce(ctx, owner, mode)
	if err != nil || !ok {
		return nil, time.Duration(n) * time.Millisecond, err
	}
	return r.newLease(ctx, owner, uint64(n), start)
}

// newLease registers and starts the lease of a successful acquire.
func (r *resource) newLease(ctx context.Context, owner string, token uint64, start time.Time) (*Lease, time.Duration, error) {
	l := newLease(r, owner, token, start)
	l.cause = trace.SpanContextFromContext(ctx)
	if err := r.c.track(l); err != nil {
		r.abandon(ctx, owner)
		return nil, 0, err
	}
	l.start()
	return l, 0, nil
}

// acquireOnce runs the acquire script (re-sent with the same owner ID when
// the reply is lost): acquired and the token, or not and the holders'
// remaining milliseconds. start is when the attempt that answered was sent.
// When the outcome stays unknown, or a required replica ack was not
// reached, it removes whatever the attempt may have created, so no lock is
// left held by nobody.
func (r *resource) acquireOnce(ctx context.Context, owner, mode string) (ok bool, n int64, start time.Time, err error) {
	var (
		res    []any
		ackErr error
	)
	args := make([]any, 0, 3+len(r.extraArgs))
	args = append(append(append(args, owner, r.ttlArg), r.extraArgs...), modeArg(mode))
	err = retry.Do(ctx, r.policy, func(ctx context.Context, _ int) error {
		start = time.Now()
		cmd, _, err := script.RunAck(ctx, r.c.rdb, r.cfg.ack, r.kind.acquire, r.acquireKeys, args...)
		ackErr = nil
		if errors.Is(err, ErrReplicaAck) {
			ackErr = err
		}
		res, err = cmd.Slice()
		return err
	})
	if err != nil {
		if !r.peer && (errors.Is(err, retry.ErrUnknownOutcome) || retry.Ambiguous(err)) {
			r.abandon(ctx, owner)
		}
		return false, 0, start, fmt.Errorf("lock: acquire %s: %w", r.name, err)
	}
	if ok, n, err = parsePair(res); err != nil {
		return false, 0, start, fmt.Errorf("lock: acquire %s: %w", r.name, err)
	}
	if !ok {
		r.c.tel.contention.Add(ctx, 1, r.c.tel.attrs.Add...)
		return false, n, start, nil
	}
	if ackErr != nil {
		// Too few replicas have the lock to survive a failover: give it up.
		r.abandon(ctx, owner)
		return false, 0, start, fmt.Errorf("lock: acquire %s: %w", r.name, ackErr)
	}
	return true, n, start, nil
}

// abandon deletes what owner's attempts may have left: the lock, if an
// attempt with an unknown outcome took it, a writer's mark, a queue entry.
// When Redis does not answer (the fault that made the outcome unknown often
// lasts), it goes on trying in the background until Redis answers, the
// Client closes, or what it would delete has expired anyway.
func (r *resource) abandon(ctx context.Context, owner string) {
	ctx = context.WithoutCancel(ctx)
	if r.withdraw(ctx, owner) == nil {
		return
	}
	r.withdrawLater(ctx, owner)
}

// abandonLate is abandon for an answer that came after the call that
// caused it returned (a Redlock master's late grant): every attempt is
// background work.
func (r *resource) abandonLate(ctx context.Context, owner string) {
	ctx = context.WithoutCancel(ctx)
	if r.withdrawDetached(ctx, owner) == nil {
		return
	}
	r.withdrawLater(ctx, owner)
}

// withdrawLater runs the release script for owner in the background until
// Redis answers, the Client closes, or what it would delete has expired.
// Each attempt is background work (withdrawDetached): the call that caused
// it has returned, and its span has ended.
func (r *resource) withdrawLater(ctx context.Context, owner string) {
	ctx = context.WithoutCancel(ctx)
	// A lock lives one TTL and a queue entry FairEviction; a writer's mark
	// that outlives this (it waits for holders on longer TTLs) still ends
	// two writer TTLs after them.
	until := time.Now().Add(max(2*r.cfg.ttl, FairEviction))
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.closed {
		return
	}
	r.c.bg.Go(func() {
		wait := 20 * time.Millisecond
		for time.Now().Before(until) {
			select {
			case <-r.c.hub.done:
				return
			case <-time.After(wait):
			}
			if r.withdrawDetached(ctx, owner) == nil {
				return
			}
			wait = min(2*wait, time.Second)
		}
	})
}

// withdrawDetached is withdraw as background work: under a lock.release
// span of its own, a root linked to the span in ctx (the call that gave
// the work up), so nothing it sends hangs off a span that has ended.
func (r *resource) withdrawDetached(ctx context.Context, owner string) error {
	ctx, span := r.c.tel.startWithdraw(ctx)
	err := r.withdraw(ctx, owner)
	withdrawn(span, err)
	return err
}

// withdraw runs the release script once (with its retries) for abandon.
func (r *resource) withdraw(ctx context.Context, owner string) error {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.releaseTimeout)
	defer cancel()
	_, _, _, err := r.release(rctx, owner, 0)
	return err
}

// Release script replies.
const (
	relFree     = 0 // nobody holds the lock
	relReleased = 1 // it was this owner's and is deleted now
	relTaken    = 2 // another owner holds it
	// relSure is added to relFree or relTaken when no earlier send of the
	// same release can have released the lock: the fence counter is below
	// the lease's token, or the holder's token is not above it (Redis lost
	// the acquisition), or a permit is still there, expired.
	relSure = 3
)

// release runs the release script for owner, whose lease has token (0 for
// none, and for a withdrawal): relReleased, relFree or relTaken, plus
// relSure when the script found that no earlier send of it can have
// released the lock. answered is when the reply that decided it came: the
// send that found what status says ran before then. resent reports that a
// send before that one may have run: an attempt of its own failed that way,
// or the client re-sends on its own (go-redis's MaxRetries), below anything
// redkit sees.
func (r *resource) release(ctx context.Context, owner string, token uint64) (status int64, resent bool, answered time.Time, err error) {
	if r.peers != nil {
		status, resent, err = r.releaseQuorum(ctx, owner)
		return status, resent, time.Now(), err
	}
	tok := strconv.FormatUint(token, 10)
	resent = retry.Resends(r.c.rdb)
	var last error
	err = retry.Do(ctx, r.policy, func(ctx context.Context, _ int) error {
		resent = resent || r.policy.MayHaveRun(last)
		status, last = r.kind.release.Run(ctx, r.c.rdb, r.releaseKeys, owner, r.channelArg, r.c.publishArg, tok).Int64()
		answered = time.Now()
		return last
	})
	return status, resent, answered, err
}

// extend runs the extend script for one lease: 1 extended, 0 expired, 2 taken.
//
// On a Cluster client an error that says the slot map is out of date (a
// master killed for good that the map still names, a moved slot: see
// retry.StaleMap) is sent again on a reloaded map within the Cluster
// budget and ctx (the lease's Until); any other error, and every error on
// another client, is returned after one send, as before. Each send after
// the first asks for what is left of ttl since the first, so no send sets
// a deadline past the one the first would have set (WithMaxHold).
func (r *resource) extend(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	if r.peers != nil {
		return r.extendQuorum(ctx, owner, ttl)
	}
	p := r.policy
	p.Attempts = 1
	first := time.Now()
	var (
		res  []int64
		last error
	)
	err := retry.Read(ctx, p, func(ctx context.Context, attempt int) error {
		left := ttl
		if attempt > 1 {
			if left -= time.Since(first); left < valid.LockTTLMin {
				return errNoTimeLeft // last stands
			}
		}
		res, last = r.kind.extend.Run(ctx, r.c.rdb, []string{r.key}, owner, left.Milliseconds()).Int64Slice()
		return last
	})
	if errors.Is(err, errNoTimeLeft) {
		err = last
	}
	if err != nil {
		return 0, err
	}
	if len(res) != 1 {
		return 0, errUnexpectedReply
	}
	return res[0], nil
}

// errNoTimeLeft ends extend's re-sends when what is left of the TTL is
// below the shortest lock TTL.
var errNoTimeLeft = errors.New("lock: no time left to extend again")

func parsePair(res []any) (bool, int64, error) {
	if len(res) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	ok, ok1 := res[0].(int64)
	n, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	return ok == 1, n, nil
}

// newOwner returns a random 128-bit owner ID as 32 hex characters.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return hex.EncodeToString(b[:])
}
