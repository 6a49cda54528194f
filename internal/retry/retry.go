// Package retry runs an idempotent Redis write until it gets a definite
// answer, and says so when it cannot.
//
// # The error contract
//
// Every write of stock, wallet and lock ends in exactly one of:
//
//   - success, or a replay of an earlier call's success;
//   - a decision of the script: a refusal (sold out, insufficient funds), a
//     conflict (same ID, different fields), a stale fence. It is final: a
//     call with the same ID returns it again;
//   - ErrUnknownOutcome, joined with the last cause (and ctx.Err() when the
//     context ended): the write may or may not have been applied, and
//     calling again with the same operation ID returns the first decision;
//   - a bare transport or Redis error only when redkit knows that no attempt
//     reached Redis: invalid input found before any I/O, a context that had
//     ended before the first send, or a failure that says "not sent" (a dial
//     failure, a pool timeout, LOADING...) from a client that sends each
//     command at most once per call. A read that a call makes before its
//     first write (Read: it changes nothing) fails with its bare error too.
//
// idgen is outside the contract: a value fetch whose reply was lost only
// skips values, so it returns the error as it came.
//
// # Why the client matters
//
// go-redis re-sends a command inside its own process loop, below every hook:
// a *redis.Client after a read timeout, EOF, pool timeout, LOADING,
// READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN (MaxRetries, default 3); a
// *redis.ClusterClient also after MOVED and ASK (MaxRedirects, default 3).
// The error a call returns is only the last send's, so "connection refused"
// after a reply that was lost says nothing about the send before it, which
// may have applied the write. Policy.For asks the client: MaxRetries and
// MaxRedirects from Options() for *redis.Client (failover clients too),
// *redis.ClusterClient and *redis.Ring; a client of any other type is taken
// to re-send.
//
// # Classes of a failed attempt
//
//   - Retryable ("not run"): this send certainly did not run (a dial failure,
//     connection refused, a go-redis pool timeout, LOADING, READONLY,
//     MASTERDOWN, TRYAGAIN, CLUSTERDOWN, MOVED, ASK, BUSY, NOREPLICAS, OOM,
//     max clients) and may succeed later;
//   - Ambiguous: the command may have run (read timeout, EOF, connection
//     reset, broken pipe, context ended while the call was in flight);
//   - anything else is an answer (a script decision, a business refusal) and
//     is returned unchanged.
//
// # Redis Cluster
//
// On a *redis.ClusterClient, an error that says the client's slot map is
// out of date (StaleMap: MOVED, ASK, TRYAGAIN, CLUSTERDOWN, READONLY, or a
// refused dial, EOF, reset or i/o timeout on the node the map names) makes
// Do reload the map before the next attempt (Reload: at once, in the
// calling goroutine, at most once per ReloadInterval per client), and Do
// goes on past Attempts for such errors until ClusterBudget has passed. So
// a master killed for good costs its callers the cluster's failover and
// one reload, not go-redis's minute-long wait for its periodic reload. A
// call that ends before it could reload (its context ended, or it gave
// up) after such an error, or after its deadline passed (go-redis dials a
// dead address 5 times 100 ms apart before it says the dial was refused,
// so a short deadline passes first), marks the client's map stale: the
// next Do or Read on the client reloads it before its first attempt
// (TestDo_cluster_masterKilledForGood_shortDeadlines).
//
// An attempt may have run when it failed Ambiguous, or Retryable on a client
// that re-sends. Do retries both classes with jittered, bounded backoff and
// never sleeps past the context's deadline. Retrying is safe only because
// every redkit write is idempotent by its operation ID and is re-sent with
// identical arguments. Do's result is unknown exactly when some attempt may
// have run and no later attempt answered: a "not run" error after an
// ambiguous attempt of Do's own is unknown too. The decision is made in Go
// once per failed call; the success path costs nothing.
package retry

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnknownOutcome means an operation may or may not have been applied.
// Calling again with the same operation ID gives the definite answer.
var ErrUnknownOutcome = errors.New("redkit: outcome unknown; call again with the same operation ID")

// Policy bounds the retries of Do.
type Policy struct {
	Attempts   int           // total calls, first one included; < 1 means 1
	MinBackoff time.Duration // wait before the second call; doubles per attempt
	MaxBackoff time.Duration // cap on one wait

	// ClusterBudget is how long, from the first call, Do goes on past
	// Attempts while a Redis Cluster client meets errors that say its
	// slot map is out of date (see StaleMap): the cluster is moving the
	// key's slot, or the node the map names is gone. A slot migration or
	// a failover ends within seconds, and every retry runs on a reloaded
	// map. 0 means DefaultClusterBudget; < 0 means none. It applies only
	// to a policy made by For for a *redis.ClusterClient, and never past
	// ctx.
	ClusterBudget time.Duration

	// sendsOnce is set by For when the client sends each command at most
	// once per call. The zero value assumes re-sends, the safe side.
	sendsOnce bool
	// cluster is set by For for a Cluster client: Do reloads its slot
	// map after a StaleMap error and applies ClusterBudget.
	cluster *redis.ClusterClient
	// reload is cluster's Reload state, found once by For.
	reload *reloader
}

// DefaultClusterBudget is ClusterBudget's default: longer than a slot
// migrated key by key with pauses between batches and than a failover's
// election on a default cluster-node-timeout's detection already done.
const DefaultClusterBudget = 5 * time.Second

// DefaultPolicy is 3 attempts with 10ms..200ms jittered backoff.
func DefaultPolicy() Policy {
	return Policy{Attempts: 3, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

// For returns p for calls made through rdb: it records whether rdb may send
// one command more than once per call (see Resends). Call it once, where the
// client is stored; it reads the client's options, never Redis.
func (p Policy) For(rdb any) Policy {
	p.sendsOnce = !Resends(rdb)
	p.cluster, _ = rdb.(*redis.ClusterClient)
	p.reload = nil
	if p.cluster != nil {
		p.reload = reloaderOf(p.cluster)
	}
	return p
}

// Moving reports whether err is a reply that says the key's slot is being
// moved or its shard failed over: MOVED, ASK (a redirection go-redis did
// not follow to the end), TRYAGAIN (a script's keys split by a migration),
// CLUSTERDOWN (a failover in progress), READONLY (a master just demoted).
// Each means this send did not run.
func Moving(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || redis.IsReadOnlyError(err)
}

// StaleMap reports whether err says that the slot map which routed the
// command may be out of date: the cluster is moving the key's slot or failed
// its shard over (Moving), or the node the map names is gone: a refused or
// failed dial, EOF, a reset or broken connection, an i/o timeout. After
// such an error a Cluster client's next attempt must run on a freshly
// loaded map (Reload): go-redis reloads its own only on MOVED and ASK, and
// otherwise once a minute, so a master killed for good stays in the map,
// and every command for its slots is refused, until then. A context that
// ended is not such an error.
func StaleMap(err error) bool {
	if err == nil {
		return false
	}
	if Moving(err) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true // a dial timeout wraps context.DeadlineExceeded too
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stale reports whether err, on the policy's client, calls for a reload
// of the slot map and may be retried within ClusterBudget.
func (p Policy) stale(err error) bool { return p.cluster != nil && StaleMap(err) }

func (p Policy) withinBudget(start time.Time) bool {
	budget := p.ClusterBudget
	if budget == 0 {
		budget = DefaultClusterBudget
	}
	return time.Since(start) < budget
}

// Resends reports whether rdb may send a command more than once within one
// call: go-redis's MaxRetries (and a Cluster client's MaxRedirects) above 0.
// A client of a type it does not know is taken to re-send.
func Resends(rdb any) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().MaxRetries > 0
	case *redis.ClusterClient:
		o := c.Options()
		return o.MaxRedirects > 0 || o.MaxRetries > 0
	case *redis.Ring:
		return c.Options().MaxRetries > 0
	}
	return true
}

// Retryable reports whether err means this send certainly did not run and
// may succeed if sent again later. It says nothing about earlier sends of
// the same call by a client that re-sends: see Policy.MayHaveRun.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true // the connection never existed, so nothing was sent
	}
	if errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, redis.ErrPoolTimeout) ||
		redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) ||
		redis.IsTryAgainError(err) ||
		redis.IsClusterDownError(err) ||
		redis.IsReadOnlyError(err) ||
		redis.IsMaxClientsError(err) ||
		redis.IsNoReplicasError(err) ||
		redis.IsOOMError(err) {
		return true
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	// BUSY: another script holds the server; this command was not run.
	// (BUSYKEY and BUSYGROUP are answers about data, not this.)
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "BUSY ")
}

// Ambiguous reports whether err means the command may have run: the request
// may have reached the server but no reply came back.
func Ambiguous(err error) bool {
	if err == nil || Retryable(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// MayHaveRun reports whether an attempt that ended in err, made through a
// client described by p, may have run its command: err is Ambiguous, or it
// is Retryable and the client may have sent the command before, in the same
// call, without the reply reaching us. nil and answers did not leave the
// outcome open.
func (p Policy) MayHaveRun(err error) bool {
	if err == nil {
		return false
	}
	if Retryable(err) {
		return !p.sendsOnce
	}
	return Ambiguous(err)
}

// Do calls fn until it succeeds, returns an error that is neither Ambiguous
// nor Retryable, p.Attempts calls were made (on a Cluster client, and for a
// Moving error, until p.ClusterBudget has passed), or ctx ends. attempt is 1 for
// the first call. fn must be idempotent: send identical arguments each time.
//
// Results:
//   - nil when a call succeeded;
//   - the error unchanged when it is an answer, or when no call may have run
//     (every failure Retryable on a client that sends once), joined with
//     ctx.Err() if ctx ended;
//   - errors.Join(ErrUnknownOutcome, last error[, ctx.Err()]) when some call
//     may have run (see MayHaveRun) and no later call gave an answer.
//
// Do never sleeps past ctx's deadline: when the next wait would end after
// it, Do gives up at once instead.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context, attempt int) error) error {
	return do(ctx, p, false, fn)
}

func do(ctx context.Context, p Policy, read bool, fn func(ctx context.Context, attempt int) error) error {
	if err := ctx.Err(); err != nil {
		return err // nothing was sent
	}
	if p.reload != nil && p.reload.stale.Load() {
		// An earlier call met a stale map and ended before it could
		// reload it (a short deadline spent in go-redis's dial retries).
		p.reload.reload(ctx, p.cluster)
	}
	unknown := false
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := fn(ctx, attempt)
		if err == nil || !Ambiguous(err) && !Retryable(err) {
			return err
		}
		unknown = unknown || !read && p.MayHaveRun(err)
		stale := p.stale(err)
		if attempt >= p.Attempts && !(stale && p.withinBudget(start)) || !sleep(ctx, backoff(p, attempt)) {
			if stale || p.cluster != nil && errors.Is(err, context.DeadlineExceeded) {
				// For the next call (no I/O past ctx here). A deadline
				// may have passed in go-redis's dial retries to a dead
				// node (5 dials 100 ms apart), before any error said so.
				p.reload.stale.Store(true)
			}
			return giveUp(ctx, unknown, err)
		}
		if stale {
			// After the wait, so the map is the freshest the next
			// attempt can have.
			Reload(ctx, p.cluster)
		}
	}
}

// Read is Do for commands that change nothing (HMGET, XRANGE...): the same
// retries, but a failure is returned with its cause alone, never joined
// with ErrUnknownOutcome, since a read that may have run decided nothing.
// A caller that reads before it writes thus reports "not sent" for a read
// that failed.
func Read(ctx context.Context, p Policy, fn func(ctx context.Context, attempt int) error) error {
	return do(ctx, p, true, fn)
}

// After is the outcome of a call whose first attempt was made outside Do (a
// pipeline of many calls) and ended in first, and whose further attempts
// Do ended in err. An answer or success in err stands; otherwise the call
// is unknown when first may have run.
func (p Policy) After(first, err error) error {
	if err == nil || errors.Is(err, ErrUnknownOutcome) || !p.MayHaveRun(first) ||
		!Ambiguous(err) && !Retryable(err) {
		return err
	}
	return errors.Join(ErrUnknownOutcome, err)
}

func giveUp(ctx context.Context, unknown bool, cause error) error {
	errs := []error{cause}
	if unknown {
		errs = []error{ErrUnknownOutcome, cause}
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(cause, ctxErr) {
		errs = append(errs, ctxErr)
	}
	if len(errs) == 1 {
		return cause
	}
	return errors.Join(errs...)
}

// backoff is the wait after the given attempt: MinBackoff doubled per
// attempt, capped at MaxBackoff, then jittered down to half at random so
// clients that failed together do not retry together.
func backoff(p Policy, attempt int) time.Duration {
	d := p.MinBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d and reports whether ctx still allows another attempt.
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false // a zero wait must not race ctx.Done
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Nonce returns 16 random hex characters. A public call makes one nonce and
// passes it, unchanged, to every attempt of its script: a script that finds
// its operation marker carrying the same nonce knows it is looking at its own
// earlier attempt, not at an earlier call, and reports "not replayed".
func Nonce() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return hex.EncodeToString(b[:])
}
