package stock

import (
	"time"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/otelx"
)

// Option configures an Inventory.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix    string
	window    time.Duration
	retry     retry.Policy
	ack       script.Ack
	providers otelx.Providers
	label     string
	// reclaimEvery is the reclaimer's period; 0 disables it.
	reclaimEvery time.Duration
	// holdback bounds how long a consumer group keeps journal entries
	// from Trim.
	holdback time.Duration
	err      error // the first invalid option, returned by New
}

func newConfig(opts []Option) config {
	c := config{prefix: keys.DefaultPrefix, window: 24 * time.Hour, retry: retry.DefaultPolicy(),
		reclaimEvery: time.Second, holdback: 7 * 24 * time.Hour}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if err := valid.Prefix(c.prefix); err != nil && c.err == nil {
		c.err = err
	}
	if err := valid.Duration("idempotency window", c.window, valid.IdemWindowFloor(), valid.IdemWindowMax); err != nil && c.err == nil {
		c.err = err
	}
	if err := valid.Duration("journal holdback", c.holdback, holdbackMin, holdbackMax); err != nil && c.err == nil {
		c.err = err
	}
	if err := c.retry.Validate(); err != nil && c.err == nil {
		c.err = err
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
// 1–64 bytes of A-Z a-z 0-9 . _ -. New refuses an invalid prefix with an
// error wrapping ErrInvalid.
func WithKeyPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithIdempotencyWindow sets how long an operation's marker is kept
// (default 24h, allowed 1m–30d). Within the window a repeated operation ID
// returns the first result; after it, the same ID is a new operation.
func WithIdempotencyWindow(d time.Duration) Option {
	return optionFunc(func(c *config) { c.window = d })
}

// WithRetry sets how often a write is attempted when its outcome is unknown
// or it failed before it ran (default 3 attempts with 10ms..200ms jittered
// backoff, never past the call's context; allowed 1..100 attempts and
// 0 <= minBackoff <= maxBackoff <= 1m). Every attempt carries the same
// operation ID, so retrying never applies an operation twice; 1 attempt
// turns retrying off.
func WithRetry(attempts int, minBackoff, maxBackoff time.Duration) Option {
	return optionFunc(func(c *config) { c.retry.SetAttempts(attempts, minBackoff, maxBackoff) })
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
	return optionFunc(func(c *config) { c.retry.SetClusterBudget(d) })
}

// ErrReplicaAck is returned, joined with the operation's own outcome, when
// WithReplicaAck is set and fewer replicas than asked acknowledged a write in
// time. The write HAS happened on the primary (the Result is valid); it can
// be lost if the primary fails before a replica has it.
var ErrReplicaAck = script.ErrReplicaAck

// WithReplicaAck makes every write wait until n replicas acknowledged it,
// at most timeout (default: no waiting): orders, restocks, write-offs,
// Create, CloseSKU, Checkpoint, and Reclaim and Trim when they changed
// something (the package documentation lists the consumer-group
// bookkeeping of Consume, which does not wait, and why). WAIT is pipelined with the script on
// the connection to the primary that owns the SKU's slot, so it counts this
// write (and, for a replay, the first call's). timeout must be shorter than
// the client's ReadTimeout. A refill between the buckets of a SKU split into
// buckets never goes past a transfer step its replicas did not acknowledge:
// the order then fails with ErrUnknownOutcome and ErrReplicaAck, undecided,
// its units in flight (Audit counts them), and calling again with the same
// order finishes the transfer once the replicas acknowledge.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return optionFunc(func(c *config) {
		c.ack = script.Ack{Replicas: max(n, 0), Timeout: timeout, Required: true}
	})
}

// WithReclaimInterval sets how often the background reclaimer returns the
// units of expired holds of the SKUs this Inventory reserved (default 1s; 0
// disables it). The reclaimer starts at the first Reserve and stops at
// Close. Correctness does not depend on it: Deduct and Reserve reclaim
// expired holds of their SKUs first, and Confirm after the deadline fails.
func WithReclaimInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.reclaimEvery = max(d, 0) })
}

// Bounds of WithJournalHoldback.
const (
	holdbackMin = time.Hour
	holdbackMax = 365 * 24 * time.Hour
)

// WithJournalHoldback bounds how long a consumer group (Consume) can hold
// back Trim (default 7 days, allowed 1h–365d): Trim keeps the entries a
// group has not read or acknowledged only while they are younger than d,
// by the Redis server's clock. A group that lags further, abandoned or
// broken, loses its entries older than d behind the last checkpoint; each
// Trim that deletes entries a group had not acknowledged counts that group
// in the redkit.stock.journal.overrun counter.
func WithJournalHoldback(d time.Duration) Option {
	return optionFunc(func(c *config) { c.holdback = d })
}

// SKUOption configures a SKU at Create.
type SKUOption interface{ applySKU(*skuConfig) }

type skuOptionFunc func(*skuConfig)

func (f skuOptionFunc) applySKU(c *skuConfig) { f(c) }

type skuConfig struct {
	limit   int64
	buckets int
}

// WithBuyerLimit caps the units of the SKU one buyer may hold reserved or
// bought at once (default 0: no limit). Cancelled, expired and refunded
// units count no more.
func WithBuyerLimit(n int64) SKUOption { return skuOptionFunc(func(c *skuConfig) { c.limit = n }) }
