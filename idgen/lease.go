package idgen

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/internal/worker"
)

var (
	acquireScript = scripts.Script("lease_acquire.lua", scripts.File("lease_common.lua"))
	renewScript   = scripts.Script("lease_renew.lua", scripts.File("lease_common.lua"))
)

// leaseRetention is how long the node table outlives its last write. Its
// high-water marks only matter to a clock behind them, never by that much.
const leaseRetention = 24 * time.Hour

// nodeLease keeps a Snowflake's node leased: renewal every TTL/3 in one
// goroutine, re-leasing after a loss, release on close.
type nodeLease struct {
	s       *Snowflake
	rdb     redis.UniversalClient
	service string
	key     string
	ttl     time.Duration
	margin  time.Duration // Next stops this long before the lease could expire
	cfg     config
	tel     *leaseTelemetry
	cause   trace.SpanContext // the span of the acquire that leased the node, linked from renewals
	w       worker.Worker     // the renewal goroutine; stopped by close, which ends any wait

	// mu guards owner, node, err and the current tenure's renewed and hw;
	// it is held while the current tenure is replaced, so Lease sees one
	// consistent state.
	mu    sync.Mutex
	owner string
	node  int64
	err   error // of the last renewal or re-lease attempt, nil after a success

	// issued bounds the timestamps of IDs issued under earlier tenures, so a
	// new tenure stays above them even if the table lost its high-water
	// marks (deleted, or a failover lost writes). Used by the renewal goroutine only.
	issued int64
}

func nodeTableKey(prefix, service string) string {
	return keys.Space{Prefix: prefix, Module: "idgen", Version: 1}.Key(keys.Group(service), "nodes", service)
}

// NewLeasedSnowflake returns a generator whose node ID (0..1023) is leased
// from Redis for service: a free node is taken atomically, renewed in the
// background every TTL/3 and released by Close.
//
// The lease keeps a high-water time per node: a bound on the timestamps of
// every ID the node has issued. A new holder issues IDs only above it: if its
// clock is behind, it waits (up to WithMaxClockWait, bounded by ctx) and
// otherwise fails with an error wrapping ErrClockBehind, so a restart on a
// clock that went backwards never reissues IDs.
//
// If renewal fails, Next returns ErrLeaseLost from TTL − TTL/10 after the
// last successful renewal was sent, that is before the lease can have expired
// in Redis; renewal keeps being retried, and once it succeeds (or a new node is
// leased, when another process took this one) Next recovers by itself.
//
// Errors: ErrInvalid for bad arguments (nothing is written), ErrNoFreeNode
// when all 1,024 nodes are leased, ErrClockBehind, ErrLeaseLost when the
// node was taken by another process while the clock caught up with its
// high-water mark (the lease's TTL was shorter than that wait), or the
// Redis (or ctx) error. Whenever it returns an error after leasing a node,
// it releases the node, retrying in the background until Redis answers.
// That includes an acquire whose reply was lost (it may have leased a node
// nobody knows of): the acquire is sent again in the background with the
// same owner ID, which returns the node that owner holds (or leases one,
// when the first never ran), and that node is released; this goes on until
// Redis answers, for up to two lease TTLs.
//
// Options used: WithKeyPrefix, WithLeaseTTL, WithMaxClockWait, WithClock,
// WithTracerProvider, WithMeterProvider, WithLabel.
func NewLeasedSnowflake(ctx context.Context, rdb redis.UniversalClient, service string, opts ...Option) (*Snowflake, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	}
	if err := valid.Name("service", service); err != nil {
		return nil, err
	}
	cfg := newConfig(opts)
	if err := cfg.validateLease(); err != nil {
		return nil, err
	}
	s, err := newSnowflake(&cfg)
	if err != nil {
		return nil, err
	}
	tel, err := newLeaseTelemetry(&cfg)
	if err != nil {
		return nil, err
	}
	l := &nodeLease{
		s: s, rdb: rdb, service: service, key: nodeTableKey(cfg.prefix, service),
		ttl: cfg.leaseTTL, margin: cfg.leaseTTL / 10, cfg: cfg, tel: tel,
	}
	t, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	s.lease = l
	s.t.Store(t)
	l.w.Start(l.run)
	return s, nil
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// acquire leases a node and waits until the clock has passed its high-water mark.
func (l *nodeLease) acquire(ctx context.Context) (*tenure, error) {
	ctx, span := l.tel.start(ctx, "idgen.lease.acquire", l.cause)
	l.cause = span.SpanContext()
	t, err := l.acquireNode(ctx)
	l.tel.end(ctx, span, "acquire", false, err)
	return t, err
}

func (l *nodeLease) acquireNode(ctx context.Context) (*tenure, error) {
	owner := newOwner()
	sent := l.s.nowMs()
	pick := nodePick()
	res, abandoned, err := bounded(ctx, func(ctx context.Context) ([]int64, error) {
		return onFreshMap(ctx, l.rdb, func(ctx context.Context) ([]int64, error) {
			return acquireScript.Run(ctx, l.rdb, []string{l.key},
				owner, l.ttl.Milliseconds(), sent, leaseRetention.Milliseconds(), pick).Int64Slice()
		})
	}, func(res []int64, err error) {
		// A node leased after the caller gave up is given back at once.
		switch {
		case err == nil && len(res) == 2 && res[0] >= 0:
			l.giveBack(context.Background(), owner, res[0])
		case l.mayHaveRun(err):
			l.forsake(owner)
		}
	})
	if err != nil {
		if !abandoned && l.mayHaveRun(err) {
			l.forsake(owner)
		}
		return nil, fmt.Errorf("idgen: lease node: %w", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("idgen: lease node: unexpected reply %v", res)
	}
	node, start := res[0], res[1]
	if node < 0 {
		return nil, ErrNoFreeNode
	}
	hw := max(start, sent+l.ttl.Milliseconds()) // as lease_acquire.lua stores it
	start = max(start, l.issued)
	l.mu.Lock()
	l.owner, l.node = owner, node
	l.mu.Unlock()
	if behind := start + 1 - l.s.nowMs(); behind > 0 {
		wait := time.Duration(behind) * time.Millisecond
		if err := l.waitClock(ctx, start+1, wait); err != nil {
			l.giveBack(ctx, owner, node) // never used
			return nil, err
		}
		// The wait may have outlasted the lease: renew it before use.
		sent = l.s.nowMs()
		ok, err := l.renew(ctx, l.ttl, sent, 0)
		if err != nil {
			// The renewal may still run: the release, retried until
			// Redis answers it, undoes it or comes after it.
			l.giveBack(ctx, owner, node)
			return nil, fmt.Errorf("idgen: lease node: renew after the clock wait: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: node %d was taken while the clock caught up with its high-water mark", ErrLeaseLost, node)
		}
		hw = max(hw, sent+l.ttl.Milliseconds())
	}
	t := newTenure(node, start, sent+(l.ttl-l.margin).Milliseconds())
	t.renewed, t.hw = sent, hw
	return t, nil
}

// waitClock waits until the generator's clock reaches ms, if that takes at
// most the max clock wait.
func (l *nodeLease) waitClock(ctx context.Context, ms int64, behind time.Duration) error {
	if behind > l.cfg.maxClockWait {
		l.tel.clockBehind(ctx, outcomeFailed)
		return fmt.Errorf("%w by %v (max wait %v)", ErrClockBehind, behind, l.cfg.maxClockWait)
	}
	l.tel.clockBehind(ctx, outcomeWaited)
	timer := time.NewTimer(behind)
	defer timer.Stop()
	for l.s.nowMs() < ms {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrClockBehind, ctx.Err())
		case <-timer.C:
			timer.Reset(time.Millisecond)
		}
	}
	return nil
}

// renew extends the lease by ttl from ms, the generator's clock when the
// renewal is sent, or releases it (ttl 0, ms the highest timestamp issued).
// ok is false when this owner no longer holds the node.
//
// until is the current tenure's until, or 0. A renewal sent before it may
// write back the node's entry when the table lost it, since the lease cannot
// have expired in Redis before then; the node is kept only when the reply
// also arrives before until, which bounds when the script ran.
func (l *nodeLease) renew(ctx context.Context, ttl time.Duration, ms, until int64) (ok bool, err error) {
	l.mu.Lock()
	owner, node := l.owner, l.node
	l.mu.Unlock()
	rewrite := 0
	if ttl > 0 && ms < until {
		rewrite = 1
	}
	n, _, err := l.runRenew(ctx, owner, node, ttl, ms, rewrite)
	if n == 2 {
		return l.s.nowMs() < until, err
	}
	return n == 1, err
}

// runRenew runs lease_renew.lua for owner and node, bounded by ctx whatever
// the client's options. A renewal or release abandoned by ctx needs no
// follow-up: it is retried, or the lease expires by itself.
func (l *nodeLease) runRenew(ctx context.Context, owner string, node int64, ttl time.Duration, ms int64, rewrite int) (int64, bool, error) {
	return bounded(ctx, func(ctx context.Context) (int64, error) {
		return onFreshMap(ctx, l.rdb, func(ctx context.Context) (int64, error) {
			return renewScript.Run(ctx, l.rdb, []string{l.key},
				owner, ttl.Milliseconds(), ms, leaseRetention.Milliseconds(), node, rewrite).Int64()
		})
	}, nil)
}

// onFreshMap runs send, a lease script, and, on a Cluster client, after an
// error that is not a reply of Redis's (a master killed for good that the
// map still names refuses the dial, or go-redis's own dial retries outlast
// ctx) or that says the slot moved (retry.StaleMap), reloads the map
// (retry.Reload, at most once per retry.ReloadInterval per client, within
// reloadTimeout even when ctx has ended), so that the next send goes to the
// slot's master now, not a minute later when go-redis reloads it by
// itself. When the send certainly did not run there (retry.Retryable: a
// refused dial, MOVED) and ctx allows, it is sent once more on the
// reloaded map: a lease script sent twice is harmless (the same owner gets
// the node it already took; a renewal or release with the same arguments
// does what the first did).
func onFreshMap[T any](ctx context.Context, rdb redis.UniversalClient, send func(context.Context) (T, error)) (T, error) {
	v, err := send(ctx)
	if _, ok := rdb.(*redis.ClusterClient); !ok || err == nil || answered(err) && !retry.StaleMap(err) {
		return v, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reloadTimeout)
	retry.Reload(rctx, rdb)
	cancel()
	if !retry.Retryable(err) || ctx.Err() != nil {
		return v, err
	}
	return send(ctx)
}

// reloadTimeout bounds onFreshMap's reload of the slot map.
const reloadTimeout = time.Second

// answered reports whether a call that ended in err got a reply from Redis.
func answered(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply)
}

// releaseTimeout bounds a release: the lease expires by itself after that.
const releaseTimeout = 2 * time.Second

// giveBack releases node, leased to owner and used by no generator. While
// ctx has not ended it tries once before returning, bounded by
// releaseTimeout; then, unless Redis answered, it goes on in a goroutine of
// its own until Redis answers a release (20ms doubling to 1s between
// attempts, each waiting for its reply), for up to two lease TTLs, or until
// the client is closed (nothing can be sent through it any more). A
// renewal of the node still on its way may run before or after the
// release: after it, it finds the node no longer this owner's and changes
// nothing.
func (l *nodeLease) giveBack(ctx context.Context, owner string, node int64) {
	if ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_, _, err := l.runRenew(rctx, owner, node, 0, 0, 0)
		cancel()
		if answered(err) {
			return
		}
	}
	go func() {
		stop := time.Now().Add(2 * l.ttl)
		wait := 20 * time.Millisecond
		for {
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			err := renewScript.Run(rctx, l.rdb, []string{l.key},
				owner, 0, 0, leaseRetention.Milliseconds(), node, 0).Err()
			cancel()
			if answered(err) || errors.Is(err, redis.ErrClosed) || !time.Now().Before(stop) {
				return
			}
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
		}
	}()
}

// mayHaveRun reports whether a lease script call that failed with err may
// have run: its reply (or that of a re-send by go-redis) was lost.
func (l *nodeLease) mayHaveRun(err error) bool {
	return retry.DefaultPolicy().For(l.rdb).MayHaveRun(err)
}

// forsake gives back, in a goroutine of its own, the node an acquire by
// owner whose outcome is unknown may have leased: it runs the acquire again
// with the same owner, which returns the node that owner already holds (or
// leases one, when the first never ran), and releases that node (giveBack).
// It goes on until Redis answers the acquire (20ms doubling to 1s between
// attempts), for up to two lease TTLs (by then a node the lost acquire
// leased has expired anyway), or until the client is closed.
func (l *nodeLease) forsake(owner string) {
	go func() {
		stop := time.Now().Add(2 * l.ttl)
		wait := 20 * time.Millisecond
		for {
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			res, err := acquireScript.Run(rctx, l.rdb, []string{l.key},
				owner, l.ttl.Milliseconds(), l.s.nowMs(), leaseRetention.Milliseconds(), nodePick()).Int64Slice()
			cancel()
			if err == nil && len(res) == 2 && res[0] >= 0 {
				l.giveBack(context.Background(), owner, res[0])
				return
			}
			if err == nil || !retry.Ambiguous(err) && !retry.Retryable(err) || !time.Now().Before(stop) {
				return // an answer (no node leased), the client closed, or the lease has expired
			}
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
		}
	}()
}

// nodePick returns the random number, 0..2^48-1, by which the acquire script
// picks one of the candidate free nodes uniformly: processes starting while
// the table misses the entries of running holders (a FLUSHALL, a restart
// from an older snapshot) take a node such a holder still uses with a chance
// of k in the number of free nodes for k such holders. 48 bits keep the
// modulo's bias below 2^-38 and the number exact in Lua's doubles.
func nodePick() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 16)
}

// release gives the node back, recording lastMs (the highest timestamp
// issued on it, 0 if none) as its high-water mark.
func (l *nodeLease) release(lastMs int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	ctx, span := l.tel.start(ctx, "idgen.lease.release", l.cause)
	_, err := l.renew(ctx, 0, max(lastMs, 0), 0)
	l.tel.end(ctx, span, "release", false, err)
	if err != nil {
		return fmt.Errorf("idgen: release node: %w", err)
	}
	return nil
}

// run renews the lease until ctx, which close cancels, ends, and leases a
// new node after a loss.
func (l *nodeLease) run(ctx context.Context) {
	interval := l.ttl / 3
	retry := min(interval, 200*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(l.step(ctx, interval, retry))
	}
}

// step makes one renewal (or re-lease) attempt and returns the delay to the next.
func (l *nodeLease) step(life context.Context, interval, retry time.Duration) time.Duration {
	t := l.s.t.Load()
	if t.node < 0 { // lost earlier: lease a new node
		return l.reacquire(life, retry)
	}
	ctx, cancel := context.WithTimeout(life, interval)
	defer cancel()
	ctx, span := l.tel.start(ctx, "idgen.lease.renew", l.cause)
	sent := l.s.nowMs()
	ok, err := l.renew(ctx, l.ttl, sent, t.until.Load())
	switch {
	case err != nil:
		l.tel.end(ctx, span, "renew", false, err)
		l.tel.renewFailed(ctx)
		l.setErr(fmt.Errorf("idgen: renew node lease: %w", err))
		return retry
	case !ok:
		l.tel.end(ctx, span, "renew", true, nil)
		l.tel.renewFailed(ctx)
		l.mu.Lock()
		old := l.s.t.Swap(newTenure(-1, 0, 0)) // Next fails closed at once
		l.err = fmt.Errorf("%w: node %d is no longer held by this generator", ErrLeaseLost, old.node>>nodeShift)
		l.mu.Unlock()
		l.issued = max(l.issued, retire(old))
		return l.reacquire(life, retry)
	}
	l.tel.end(ctx, span, "renew", false, nil)
	until := sent + (l.ttl - l.margin).Milliseconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = nil
	t.renewed, t.hw = sent, max(t.hw, sent+l.ttl.Milliseconds()) // as lease_renew.lua stores it
	for {
		cur := t.until.Load()
		if until <= cur || t.until.CompareAndSwap(cur, until) {
			return interval
		}
	}
}

func (l *nodeLease) setErr(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// reacquire leases a new node after the old one was taken.
func (l *nodeLease) reacquire(life context.Context, retry time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(life, l.ttl/3+l.cfg.maxClockWait)
	defer cancel()
	t, err := l.acquire(ctx)
	if err != nil {
		l.setErr(err)
		return retry
	}
	l.mu.Lock()
	l.s.t.Store(t)
	l.err = nil
	l.mu.Unlock()
	return l.ttl / 3
}

// close stops renewal, makes Next return ErrClosed and releases the node.
func (l *nodeLease) close(closed *tenure) error {
	l.w.Stop()
	l.mu.Lock()
	held := l.s.t.Swap(closed)
	l.mu.Unlock()
	l.tel.close()
	if held.node < 0 {
		return nil
	}
	err := l.release(retire(held))
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (the lease expires by itself)", err)
	}
	return err
}

// retire ends a tenure that is no longer current and returns a bound on the
// timestamps of every ID issued under it. After until is 0, a Next either
// made its change to state visible to the Load below or will see until == 0
// and fail.
func retire(t *tenure) int64 {
	t.until.Store(0)
	return t.state.Load() >> stepBits
}
