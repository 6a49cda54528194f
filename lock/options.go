package lock

import (
	"fmt"
	"time"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/otelx"
)

// Option configures a Client (lock.New) or one Mutex (Client.Mutex). Options
// given to New are the defaults of every Mutex the Client makes; options
// given to Mutex override them for that Mutex. Key-space and telemetry
// options only take effect on New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Defaults.
const (
	DefaultTTL            = 10 * time.Second
	DefaultReleaseTimeout = 5 * time.Second
)

type config struct {
	prefix         string
	ttl            time.Duration
	watchdog       bool
	maxHold        time.Duration
	pollMin        time.Duration
	pollMax        time.Duration
	releaseTimeout time.Duration
	fair           bool
	ack            script.Ack
	providers      otelx.Providers
	label          string
	policy         retry.Policy
	err            error // first invalid option
}

func newConfig() config {
	return config{
		prefix:         keys.DefaultPrefix,
		ttl:            DefaultTTL,
		watchdog:       true,
		releaseTimeout: DefaultReleaseTimeout,
		policy:         retry.DefaultPolicy(),
	}
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// The options shared with the other modules (WithKeyPrefix, WithRetry and
// WithClusterBudget) repeat theirs by design: the
// same names, shapes, defaults and bounds, checked across modules by
// reliability's TestNew_refusesBadOptions. Each module keeps its own copy,
// on its own Option type, so that it builds and is versioned alone.

// WithKeyPrefix sets the first part of every key and channel this Client
// uses (default "redkit"): 1–64 bytes of A-Z a-z 0-9 . _ -
func WithKeyPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if err := valid.Prefix(p); err != nil {
			c.fail(err)
			return
		}
		c.prefix = p
	})
}

// WithTTL sets how long a lock lives in Redis without renewal (default 10s,
// allowed 10ms..24h). With the watchdog on, the lease is renewed every TTL/3,
// so the TTL bounds how long a crashed holder blocks others.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if err := valid.Duration("lock TTL", d, valid.LockTTLMin, valid.LockTTLMax); err != nil {
			c.fail(err)
			return
		}
		c.ttl = d
	})
}

// WithWatchdog switches the background renewal of leases on or off (default
// on). Without it a lease ends at its TTL unless Lease.Extend is called.
func WithWatchdog(on bool) Option {
	return optionFunc(func(c *config) { c.watchdog = on })
}

// WithMaxHold bounds how long the watchdog keeps a lease alive, counted from
// the acquire (default 0: no bound). Past it the lease is no longer renewed
// and ends at its TTL with ErrLeaseExpired, so a stuck holder cannot keep a
// lock forever. The watchdog's renewals near the bound set only the time
// left of it, shorter than the TTL, also after an Extend that set more:
// Lease.Until falls with them.
func WithMaxHold(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.fail(fmt.Errorf("%w: max hold %v is negative", ErrInvalid, d))
			return
		}
		c.maxHold = d
	})
}

// WithPolling makes Acquire wait by polling instead of by release
// notifications: it retries after a jittered backoff that starts at min and
// doubles up to max, each wait still capped by the holder's remaining TTL.
// The default is notification-based waiting. min must be > 0 and <= max.
func WithPolling(min, max time.Duration) Option {
	return optionFunc(func(c *config) {
		if min <= 0 || max < min {
			c.fail(fmt.Errorf("%w: polling backoff %v..%v", ErrInvalid, min, max))
			return
		}
		c.pollMin, c.pollMax = min, max
	})
}

// WithReleaseTimeout bounds Lease.Release (default 5s). Release runs detached
// from the caller's context, so it works even when that context has ended.
func WithReleaseTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("%w: release timeout %v", ErrInvalid, d))
			return
		}
		c.releaseTimeout = d
	})
}

// WithReplicaAck makes every acquire wait, in the same round trip, until n
// replicas of the lock's primary acknowledged it or timeout passed (WAIT
// pipelined with the acquire script on the primary's connection; on a
// Cluster, the shard owning the lock). It is best effort: fewer
// acknowledgements are accepted. Default off. timeout must be shorter than
// the go-redis client's ReadTimeout. Renewals and releases are not waited
// for. See WithRequiredReplicaAck and the package documentation for what a
// failover can still lose.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return replicaAck(n, timeout, false)
}

// WithRequiredReplicaAck is WithReplicaAck where fewer than n
// acknowledgements fail the acquire: the lock it took on the primary is
// released again and the error wraps ErrReplicaAck.
func WithRequiredReplicaAck(n int, timeout time.Duration) Option {
	return replicaAck(n, timeout, true)
}

func replicaAck(n int, timeout time.Duration, required bool) Option {
	return optionFunc(func(c *config) {
		if n < 1 || timeout <= 0 {
			c.fail(fmt.Errorf("%w: replica ack %d within %v", ErrInvalid, n, timeout))
			return
		}
		c.ack = script.Ack{Replicas: n, Timeout: timeout, Required: required}
	})
}

// WithFair switches a Mutex to fair (FIFO) mode (default off): waiters queue
// in Redis in order of arrival (server time) and a release wakes only the
// head of the queue, so the lock is handed over in order and a releaser
// that asks again goes to the back. Waiters renew their place every
// FairHeartbeat; one not heard from for FairEviction (it crashed) leaves
// the queue. TryAcquire succeeds only when the lock is free and nobody
// waits. Every user of a name must agree on the mode.
func WithFair(on bool) Option {
	return optionFunc(func(c *config) { c.fair = on })
}

// Fair-mode timing.
const (
	FairHeartbeat = 500 * time.Millisecond
	FairEviction  = 2 * time.Second
)

// WithRetry sets how often an acquire, extend or release is attempted when
// its outcome is unknown or it failed before it ran (default 3 attempts
// with 10ms..200ms jittered backoff, never past the call's context; allowed
// 1..100 attempts and 0 <= minBackoff <= maxBackoff <= 1m). Every attempt
// carries the same owner ID, so a retry never takes a second lease; 1
// attempt turns retrying off.
func WithRetry(attempts int, minBackoff, maxBackoff time.Duration) Option {
	return optionFunc(func(c *config) {
		c.policy.SetAttempts(attempts, minBackoff, maxBackoff)
		if err := c.policy.Validate(); err != nil {
			c.fail(err)
		}
	})
}

// WithClusterBudget sets how long, from a call's first attempt, a lock
// script is sent again past WithRetry's attempts while a Redis Cluster
// client meets errors that say its slot map is out of date: replies that
// say the name's slot is moving (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the
// command did not run where it was sent), or a node the map names that is
// gone (a refused dial, EOF, a reset, an i/o timeout: a master killed, not
// yet replaced in the map). Each attempt runs on a map reloaded after the
// error. Never past the call's context (default 5s, allowed up to 1m; 0
// turns it off).
func WithClusterBudget(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.policy.SetClusterBudget(d)
		if err := c.policy.Validate(); err != nil {
			c.fail(err)
		}
	})
}
