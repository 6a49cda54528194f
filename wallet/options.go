package wallet

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultIdempotencyWindow is how long a transaction ID is remembered.
const DefaultIdempotencyWindow = 24 * time.Hour

// Option configures a Ledger.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix       string
	window       time.Duration
	policy       retry.Policy
	providers    otelx.Providers
	label        string
	ack          script.Ack
	recoverEvery time.Duration
	err          error
}

func newConfig(opts []Option) config {
	c := config{prefix: keys.DefaultPrefix, window: DefaultIdempotencyWindow, policy: retry.DefaultPolicy(),
		recoverEvery: time.Duration(defaultRecovery.Load())}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err == nil {
		c.err = valid.Prefix(c.prefix)
	}
	if c.err == nil {
		c.err = valid.Duration("idempotency window", c.window, valid.IdemWindowFloor(), valid.IdemWindowMax)
	}
	if c.err == nil && (c.ack.Replicas < 0 || c.ack.Replicas > 0 && c.ack.Timeout <= 0) {
		c.err = fmt.Errorf("%w: replica ack %d within %v", ErrInvalid, c.ack.Replicas, c.ack.Timeout)
	}
	if c.err == nil && c.recoverEvery > 0 && c.recoverEvery != time.Duration(defaultRecovery.Load()) {
		c.err = valid.Duration("recovery interval", c.recoverEvery, time.Second, 24*time.Hour)
	}
	if c.err == nil {
		c.err = c.policy.Validate()
	}
	return c
}

// The options below repeat, by design, those of the other modules: every
// module declares WithKeyPrefix, lock, stock and wallet WithRetry and
// WithClusterBudget, stock and wallet WithIdempotencyWindow, with the same
// names, shapes, defaults and bounds (reliability's
// TestNew_refusesBadOptions checks the prefix, retry and budget bounds
// where they exist). Each module keeps its own copy, on its own Option
// type, so that it builds and is versioned alone.

// WithKeyPrefix sets the first part of every key (default "redkit"):
// 1–64 bytes of A-Z a-z 0-9 . _ -. Ledgers with different prefixes share
// nothing.
func WithKeyPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithIdempotencyWindow sets how long a transaction ID is remembered after
// its transaction was decided (default 24h, allowed 1m..30d). Within the
// window a repeated call returns the first outcome; after it, the same ID is
// a NEW transaction and is applied again. Callers that may retry later
// than the window must not reuse IDs.
func WithIdempotencyWindow(d time.Duration) Option {
	return optionFunc(func(c *config) { c.window = d })
}

// WithRetry sets how often a write is attempted when its outcome is unknown
// or it failed before it ran (default 3 attempts with 10ms..200ms jittered
// backoff, never past the call's context; allowed 1..100 attempts and
// 0 <= minBackoff <= maxBackoff <= 1m). Every attempt carries the same
// transaction ID, so retrying never applies a transaction twice; 1 attempt
// turns retrying off.
func WithRetry(attempts int, minBackoff, maxBackoff time.Duration) Option {
	return optionFunc(func(c *config) { c.policy.SetAttempts(attempts, minBackoff, maxBackoff) })
}

// WithClusterBudget sets how long, from a call's first attempt, a write is
// sent again past WithRetry's attempts while a Redis Cluster client meets
// errors that say its slot map is out of date: replies that say the key's
// slot is moving (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the command did not
// run where it was sent), or a node the map names that is gone (a refused
// dial, EOF, a reset, an i/o timeout: a master killed, not yet replaced in
// the map). Each attempt runs on a map reloaded after the error. Never past
// the call's context (default 5s, allowed up to 1m; 0 turns it off).
func WithClusterBudget(d time.Duration) Option {
	return optionFunc(func(c *config) { c.policy.SetClusterBudget(d) })
}

// WithReplicaAck makes every posting (Credit, Debit, Transfer, Hold,
// Capture, Void), and Open, CloseAccount, Checkpoint and Recover, wait
// until n replicas have it, up to timeout (default: no waiting); the
// package documentation names the two writes that do not wait, and why.
// WAIT is sent in the same pipeline as the script, on the connection to
// the primary that owns the account's slot, so it covers exactly that
// write. The timeout must be shorter than the
// client's ReadTimeout. When fewer replicas acknowledge in time, the call
// returns its Result together with an error wrapping ErrReplicaAck: the
// transaction WAS applied on the primary, but a failover before the
// replicas catch up may lose it. A refusal (ErrInsufficientFunds, say) is
// stored under its ID like a success, so a refusal the replicas did not
// acknowledge also wraps ErrReplicaAck: after a failover the same ID may be
// decided anew. Calling again with the same transaction ID replays it and
// waits again. A transfer across slot groups waits at each of its steps and
// never goes on past one the replicas did not acknowledge (a failover could
// undo it under the next step: a credit without its hold, a posted source
// without its credit): it stays in flight and the call fails with
// ErrUnknownOutcome and ErrReplicaAck; calling again with the same ID, or
// Recover, finishes it once the replicas acknowledge.
//
// Replicas only acknowledge what they received; with appendfsync everysec
// on the replicas a simultaneous crash of all nodes can still lose it.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return optionFunc(func(c *config) { c.ack = script.Ack{Replicas: n, Timeout: timeout, Required: true} })
}

// DefaultRecoveryInterval is how often, by default, the Ledgers sharing a
// Redis and a key prefix run Recover in the background (WithRecovery).
const DefaultRecoveryInterval = time.Minute

// defaultRecovery is DefaultRecoveryInterval; tests shorten it.
var defaultRecovery = func() *atomic.Int64 {
	var v atomic.Int64
	v.Store(int64(DefaultRecoveryInterval))
	return &v
}()

// WithRecovery sets how often Recover runs in the background until Close
// (default DefaultRecoveryInterval, allowed 1s..24h; 0 or less turns it
// off). It finishes the transfers across slot groups that crashed or
// cancelled calls left in flight, with their amounts held, and sweeps the
// hold records of accounts nobody calls any more, so neither money nor
// records stay behind a process that died, even on an account no call
// touches again (a call on the source account finishes its own stale
// transfers anyway, see the package documentation).
//
// Of all the Ledgers sharing a Redis and a key prefix, one runs it per
// interval (the first to take a turn key, SET NX with a lifetime of half
// the interval), so its cost does not grow with the number of processes.
// Each run scans the keyspace (SCAN on every primary of a Cluster): keep
// the interval at a minute or more on large databases. It runs only on a
// *redis.Client or a *redis.ClusterClient (Recover needs one of those).
func WithRecovery(interval time.Duration) Option {
	return optionFunc(func(c *config) { c.recoverEvery = interval })
}

// WithTracerProvider sets the tracer provider for the Ledger's spans
// (default: the global provider). nil is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetTracer(tp) })
}

// WithMeterProvider sets the meter provider for the Ledger's metrics
// (default: the global provider). nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetMeter(mp) })
}

// WithLabel sets a low-cardinality label ("payouts") recorded on every span
// instead of account or transaction IDs, which are never recorded
// (default: none).
func WithLabel(label string) Option { return optionFunc(func(c *config) { c.label = label }) }

// AccountOption configures an account at Open.
type AccountOption interface{ applyAccount(*accountConfig) }

type accountOptionFunc func(*accountConfig)

func (f accountOptionFunc) applyAccount(c *accountConfig) { f(c) }

type accountConfig struct {
	currency  string
	overdraft int64
}

// WithCurrency sets the account's currency code (required): 1–16 bytes of
// A-Z a-z 0-9 . _ -, e.g. "CNY". Transfers only move money between
// accounts of one currency.
func WithCurrency(code string) AccountOption {
	return accountOptionFunc(func(c *accountConfig) { c.currency = code })
}

// WithOverdraft lets the account's available balance go down to -limit
// (default 0: it never goes negative). limit is 0..2^53-1 minor units.
func WithOverdraft(limit int64) AccountOption {
	return accountOptionFunc(func(c *accountConfig) { c.overdraft = limit })
}

// CallOption configures one write call (Credit, Debit, Transfer, Hold,
// Capture, Void).
type CallOption interface{ applyCall(*callConfig) }

type callOptionFunc func(*callConfig)

func (f callOptionFunc) applyCall(c *callConfig) { f(c) }

type callConfig struct {
	fence *lock.Fence
}

// WithFence makes the call conditional on a lock.Lease still being the
// latest holder of its lock: pass lease.Fence(). The script records the
// fencing token in the account's slot (key
// <prefix>:fence:v1:{<group>}:<lock name>, kept for good) and refuses the
// call with ErrStaleFence, writing nothing, when a higher token of that lock
// has already been seen there. Use it when a debit is one step of work done
// under a lock that may have expired meanwhile. A replay of a transaction
// that was applied earlier is returned whatever the token.
func WithFence(f lock.Fence) CallOption {
	return callOptionFunc(func(c *callConfig) { c.fence = &f })
}

func newCallConfig(opts []CallOption) callConfig {
	var c callConfig
	for _, o := range opts {
		if o != nil {
			o.applyCall(&c)
		}
	}
	return c
}
