package idgen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/server"
	"github.com/redkit-go/redkit/internal/valid"
)

var reserveScript = scripts.Script("reserve.lua")

// replicaProbeTTL is how long the replica count of a counter's primary is
// cached. Any failed write drops the cached value.
const replicaProbeTTL = time.Minute

// counter is one Redis counter shared by Sequence and Segment: it reserves
// ranges above a floor and, when the primary has replicas, waits for one of
// them to acknowledge each reservation.
type counter struct {
	rdb     redis.UniversalClient // a *redis.Client or *redis.ClusterClient (counterClient)
	key     string
	keys    []string // key, as the script's KEYS (made once)
	ackWait time.Duration
	// cluster retries a reservation on a Cluster client whose slot map is
	// out of date (retry.StaleMap) on a reloaded map, within
	// retry.DefaultClusterBudget; on other clients it sends once.
	cluster retry.Policy

	mu       sync.Mutex
	replicas int
	probedAt time.Duration // mono() of the last probe; 0 = never
	// seen: a replica was once connected to the key's primary. From then on
	// every reservation waits for one, even while a probe counts none (a
	// replica resyncing after a failover, or cut off): reserving without
	// one then would let the next failover hand the range out again.
	seen bool
}

func counterKey(prefix, name string) string {
	return keys.Space{Prefix: prefix, Module: "idgen", Version: 1}.Key(keys.Group(name), "seq", name)
}

// newCounter returns the counter named name on rdb and the config of opts,
// once both are valid.
func newCounter(rdb redis.UniversalClient, name string, opts []Option) (*counter, config, error) {
	cfg := newConfig(opts)
	if rdb == nil {
		return nil, cfg, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	}
	if err := valid.Name("name", name); err != nil {
		return nil, cfg, err
	}
	if err := cfg.validateCounter(); err != nil {
		return nil, cfg, err
	}
	rdb, err := counterClient(rdb)
	if err != nil {
		return nil, cfg, err
	}
	once := retry.DefaultPolicy()
	once.SetAttempts(1, 10*time.Millisecond, 200*time.Millisecond)
	k := counterKey(cfg.prefix, name)
	return &counter{rdb: rdb, key: k, keys: []string{k}, ackWait: cfg.replicaAckWait,
		cluster: once.For(rdb)}, cfg, nil
}

// reserve reserves step values above floor and returns the last one. On a
// Cluster client, a reservation that met a moving slot (MOVED, ASK,
// TRYAGAIN...) or a node that is gone (a master killed for good, which a
// stale slot map still names) is sent again on a reloaded map, within
// retry.DefaultClusterBudget and ctx: a send that may have run only skips
// values. Its errors are returned as they came (retry.Read).
func (c *counter) reserve(ctx context.Context, step, floor int64) (int64, error) {
	var last int64
	err := retry.Read(ctx, c.cluster, func(ctx context.Context, _ int) error {
		replicas, err := c.replicaCount(ctx)
		if err != nil {
			return err
		}
		ack := script.Ack{}
		if replicas > 0 {
			ack = script.Ack{Replicas: 1, Timeout: c.ackWait, Required: true}
		}
		cmd, _, err := script.RunAck(ctx, c.rdb, ack, reserveScript, c.keys, step, floor)
		if err != nil {
			c.forgetReplicas()
			return scriptError(err)
		}
		last, err = cmd.Int64()
		return err
	})
	if err != nil {
		return 0, err
	}
	if last-step < floor || last > maxCounterValue {
		return 0, fmt.Errorf("idgen: reserve returned %d for step %d above %d", last, step, floor)
	}
	return last, nil
}

func scriptError(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "IDGEN_EXHAUSTED"):
		return ErrExhausted
	case strings.HasPrefix(msg, "IDGEN_NOTINT"):
		return errors.New("idgen: counter key does not hold an integer")
	}
	return err
}

func (c *counter) replicaCount(ctx context.Context) (int, error) {
	c.mu.Lock()
	n, at := c.replicas, c.probedAt
	c.mu.Unlock()
	now := mono()
	if at != 0 && now-at < replicaProbeTTL {
		return n, nil
	}
	n, err := server.Replicas(ctx, c.rdb, c.key)
	if err != nil {
		// A node that is not the primary (a stale Cluster map after a
		// failover) says nothing about the primary's replicas: counting
		// none would skip the acknowledgement.
		// Nor does a client that cannot reach the primary (newCounter
		// refuses those; this keeps any that slips through closed).
		if retry.Ambiguous(err) || retry.Retryable(err) || errors.Is(err, server.ErrNotPrimary) || errors.Is(err, ErrInvalid) {
			return 0, fmt.Errorf("idgen: probe replicas: %w", err)
		}
		// The server hides its replication state (a managed service, an
		// embedded test server): nothing to wait for that we could count.
		n = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > 0 {
		c.seen = true
	} else if c.seen {
		n = 1
	}
	c.replicas, c.probedAt = n, now
	return n, nil
}

func (c *counter) forgetReplicas() {
	c.mu.Lock()
	c.probedAt = 0
	c.mu.Unlock()
}

// processStart anchors mono.
var processStart = time.Now()

// mono returns the time elapsed on the monotonic clock since the package was
// loaded; it is never 0.
func mono() time.Duration { return time.Since(processStart) + 1 }
