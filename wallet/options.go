package wallet

import (
	"fmt"
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
	c := config{prefix: keys.DefaultPrefix, window: DefaultIdempotencyWindow, policy: retry.DefaultPolicy()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err == nil {
		c.err = valid.Prefix(c.prefix)
	}
	if c.err == nil {
		c.err = valid.Duration("idempotency window", c.window, valid.IdemWindowMin, valid.IdemWindowMax)
	}
	if c.err == nil && (c.ack.Replicas < 0 || c.ack.Replicas > 0 && c.ack.Timeout <= 0) {
		c.err = fmt.Errorf("%w: replica ack %d within %v", ErrInvalid, c.ack.Replicas, c.ack.Timeout)
	}
	if c.err == nil && c.policy.Attempts < 1 {
		c.err = fmt.Errorf("%w: retry attempts %d, want at least 1", ErrInvalid, c.policy.Attempts)
	}
	return c
}

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

// WithRetry sets how often a write is attempted when its outcome is
// unknown or the server is briefly unavailable (default 3 attempts with
// 10ms..200ms jittered backoff, never past the call's context). Every
// attempt carries the same transaction ID, so retrying never applies a
// transaction twice.
func WithRetry(attempts int, minBackoff, maxBackoff time.Duration) Option {
	return optionFunc(func(c *config) {
		c.policy = retry.Policy{Attempts: attempts, MinBackoff: minBackoff, MaxBackoff: maxBackoff}
	})
}

// WithReplicaAck makes every posting (Credit, Debit, Transfer, Hold,
// Capture, Void) wait until n replicas have it, up to
// timeout (default: no waiting). WAIT is sent in the same pipeline as the
// script, on the connection to the primary that owns the account's slot,
// so it covers exactly that write. The timeout must be shorter than the
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

// WithRecovery runs Recover every interval in the background until Close
// (default: never; a transfer left in flight is finished anyway by the next
// call on its source account, see the package documentation; Recover also
// finds those no call touches, and those begun before that mark). Each
// run scans the keyspace for transfers in flight, so keep the interval at
// a minute or more on large databases.
func WithRecovery(interval time.Duration) Option {
	return optionFunc(func(c *config) { c.recoverEvery = interval })
}

// WithTracerProvider sets the tracer provider for the Ledger's spans
// (default: the global provider). nil is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.providers.Tracer = tp
		}
	})
}

// WithMeterProvider sets the meter provider for the Ledger's metrics
// (default: the global provider). nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.providers.Meter = mp
		}
	})
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
