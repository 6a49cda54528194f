package idgen

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/otelx"
)

// Defaults of the options.
const (
	DefaultMinStep              = 1_000
	DefaultMaxStep              = 10_000_000
	DefaultFetchTimeout         = 2 * time.Second
	DefaultReplicaAckWait       = 500 * time.Millisecond
	DefaultLeaseTTL             = 10 * time.Second
	DefaultMaxClockWait         = 5 * time.Second
	maxClockWaitLimit           = time.Hour
	maxFetchTimeout             = time.Minute
	rangeTarget                 = 10 * time.Second // a Segment range should last about this long
	prefetchFraction            = 5                // prefetch once 1/prefetchFraction (20%) of a range is used
	maxCounterValue       int64 = valid.MaxAmount
)

// Option configures a generator. Options that do not apply to a generator
// are ignored by it.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix         string
	providers      otelx.Providers
	label          string
	segmentLabel   string
	minStep        int64
	maxStep        int64
	fetchTimeout   time.Duration
	replicaAckWait time.Duration
	leaseTTL       time.Duration
	maxClockWait   time.Duration
	now            func() time.Time
}

func newConfig(opts []Option) config {
	c := config{
		prefix:         keys.DefaultPrefix,
		minStep:        DefaultMinStep,
		maxStep:        DefaultMaxStep,
		fetchTimeout:   DefaultFetchTimeout,
		replicaAckWait: DefaultReplicaAckWait,
		leaseTTL:       DefaultLeaseTTL,
		maxClockWait:   DefaultMaxClockWait,
		now:            time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// validate checks the options every generator uses.
func (c *config) validate() error {
	return valid.Prefix(c.prefix)
}

// validateCounter checks the options of Sequence and Segment.
func (c *config) validateCounter() error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := valid.Amount("min step", c.minStep); err != nil {
		return err
	}
	if err := valid.Amount("max step", c.maxStep); err != nil {
		return err
	}
	if c.minStep > c.maxStep {
		return fmt.Errorf("%w: min step %d above max step %d", ErrInvalid, c.minStep, c.maxStep)
	}
	if err := valid.Duration("fetch timeout", c.fetchTimeout, time.Millisecond, maxFetchTimeout); err != nil {
		return err
	}
	return valid.Duration("replica ack timeout", c.replicaAckWait, time.Millisecond, c.fetchTimeout)
}

// validateLease checks the options of a leased Snowflake.
func (c *config) validateLease() error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := valid.Duration("lease TTL", c.leaseTTL, valid.LeaseMin, valid.LeaseMax); err != nil {
		return err
	}
	return valid.Duration("max clock wait", c.maxClockWait, 0, maxClockWaitLimit)
}

// The option shared with the other modules (WithKeyPrefix) repeats theirs
// by design: the
// same names, shapes, defaults and bounds, checked across modules by
// reliability's TestNew_refusesBadOptions. Each module keeps its own copy,
// on its own Option type, so that it builds and is versioned alone.

// WithKeyPrefix sets the first part of every Redis key. Default "redkit".
func WithKeyPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithTracerProvider sets the tracer provider. Default: the global one. nil is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetTracer(tp) })
}

// WithMeterProvider sets the meter provider. Default: the global one. nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.providers.SetMeter(mp) })
}

// WithLabel sets a low-cardinality label recorded on spans and metrics
// instead of the generator's name (names never appear in telemetry). Default "".
func WithLabel(l string) Option { return optionFunc(func(c *config) { c.label = l }) }

// WithSegmentLabel names a Segment in the redkit.idgen.runway gauge, as
// the attribute redkit.idgen.segment, so that a dashboard tells apart the
// Segments a process runs (one series per label) and sees the one running
// dry. The label is the program's choice, bounded by the number of its
// Segments: the generator's name when the program deems it fit to appear
// in telemetry (a fixed set of names), never an ID. Segments sharing a
// label (or without one) report the lowest runway among them. Default ""
// (no attribute). Used by NewSegment only.
func WithSegmentLabel(l string) Option { return optionFunc(func(c *config) { c.segmentLabel = l }) }

// WithMinStep sets the smallest range a Segment fetches, and its first range.
// Default 1,000; must be 1..2^53-1 and at most the max step.
func WithMinStep(n int64) Option { return optionFunc(func(c *config) { c.minStep = n }) }

// WithMaxStep sets the largest range a Segment fetches. Default 10,000,000;
// must be 1..2^53-1. Up to two ranges are lost (left unused) when a process stops.
func WithMaxStep(n int64) Option { return optionFunc(func(c *config) { c.maxStep = n }) }

// WithFetchTimeout bounds one Segment range fetch, including the replica
// acknowledgement, whatever the client's ReadTimeout (a fetch that runs out
// skips its range). Default 2s; 1ms..1m.
func WithFetchTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.fetchTimeout = d })
}

// WithReplicaAckTimeout sets how long a Sequence or Segment write waits for
// one replica's acknowledgement when the server has replicas. Default 500ms;
// 1ms up to the fetch timeout, and shorter than the client's ReadTimeout.
func WithReplicaAckTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.replicaAckWait = d })
}

// WithLeaseTTL sets the node lease TTL of a leased Snowflake. The lease is
// renewed every TTL/3; Next fails with ErrLeaseLost once TTL − TTL/10 has
// passed since the last renewal was sent without success. Default 10s; 1s..1h.
func WithLeaseTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.leaseTTL = d }) }

// WithMaxClockWait bounds how long a leased Snowflake waits for the local
// clock to pass the node's high-water time before failing with
// ErrClockBehind. Default 5s; 0 (do not wait) .. 1h.
func WithMaxClockWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxClockWait = d })
}

// WithClock sets the Snowflake time source. The generator reads it once at
// start for the wall-clock time and then measures elapsed time as
// now().Sub(start), which uses the monotonic clock when now returns times
// derived from time.Now (as time.Now().Add(offset) does), so wall-clock steps
// do not affect a running generator. Default time.Now. nil is ignored.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.now = now
		}
	})
}
