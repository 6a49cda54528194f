// Package server inspects the Redis servers redkit runs on: Check reports
// settings that can lose acknowledged writes, Probe detects optional
// features, Replicas counts the replicas behind a key's primary.
//
// None of them ever fails because a server hides its configuration (managed
// services often refuse CONFIG, miniredis has none): what cannot be read is
// reported as unknown.
package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
)

// The server check is the public module health's; these names keep the
// internal callers and tests short.
type (
	Severity = health.Severity
	Finding  = health.Finding
	Report   = health.Report
)

// Severities, as health names them.
const (
	SeverityUnknown  = health.Unknown
	SeverityOK       = health.OK
	SeverityWarning  = health.Warning
	SeverityCritical = health.Critical
)

// ErrRiskySettings is health.ErrRiskySettings.
var ErrRiskySettings = health.ErrRiskySettings

// Check is health.Check.
func Check(ctx context.Context, c redis.UniversalClient) (Report, error) { return health.Check(ctx, c) }

// Features are the optional server capabilities redkit uses when present.
type Features struct {
	Known               bool // false when the version could not be read
	Major, Minor, Patch int
	WaitAOF             bool // WAITAOF, Redis 7.2+
	HExpire             bool // HEXPIRE and per-field TTLs, Redis 7.4+
}

// AtLeast reports whether the server version is at least major.minor.
func (f Features) AtLeast(major, minor int) bool {
	return f.Known && (f.Major > major || f.Major == major && f.Minor >= minor)
}

// Probe reads redis_version from INFO server (on a Cluster, from any
// node). Any error, or a reply without a version, gives Known=false and all
// features off.
func Probe(ctx context.Context, c redis.UniversalClient) Features {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return Features{}
	}
	var f Features
	v, ok := infoField(info, "redis_version")
	if !ok {
		return Features{}
	}
	parts := strings.SplitN(v, ".", 3)
	nums := []*int{&f.Major, &f.Minor, &f.Patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Features{}
		}
		*nums[i] = n
	}
	f.Known = len(parts) >= 2
	if !f.Known {
		return Features{}
	}
	f.WaitAOF = f.AtLeast(7, 2)
	f.HExpire = f.AtLeast(7, 4)
	return f
}

// ErrNotPrimary means the node asked for a key's replication state is not a
// master (role is not master in INFO replication): a replica, for instance
// the old master after a failover that a stale Cluster slot map still names.
// Its connected_slaves says nothing about the key's primary.
var ErrNotPrimary = errors.New("redkit: the node asked is not the key's primary")

// notPrimaryBudget bounds how long Replicas waits for a Cluster client's
// slot map to name a live master again (a reload takes a round trip or two;
// a master killed for good, until the cluster promotes its replica).
const notPrimaryBudget = 3 * time.Second

// Replicas returns connected_slaves from INFO replication of the primary
// that owns key (see script.Primary). An answer from a node whose role is
// not master is refused. On a Cluster client, such an answer, or a failure
// to reach the node the slot map names (a master killed for good: the dial
// is refused; see retry.StaleMap), reloads the map (retry.Reload) and asks
// the master it names then, until one answers as a master,
// notPrimaryBudget passes or ctx ends; the error then wraps ErrNotPrimary
// or the last failure.
func Replicas(ctx context.Context, c redis.UniversalClient, key string) (int, error) {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		n, err := replicas(ctx, c, key)
		if err == nil || !errors.Is(err, ErrNotPrimary) && !retry.StaleMap(err) {
			return n, err
		}
		cc, ok := c.(*redis.ClusterClient)
		if !ok || time.Since(start) >= notPrimaryBudget {
			return 0, err
		}
		t := time.NewTimer(min(time.Duration(attempt)*10*time.Millisecond, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		retry.Reload(ctx, cc)
	}
}

func replicas(ctx context.Context, c redis.UniversalClient, key string) (int, error) {
	primary, err := script.Primary(ctx, c, key)
	if err != nil {
		return 0, err
	}
	info, err := primary.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("info replication: %w", err)
	}
	if role, ok := infoField(info, "role"); ok && role != "master" {
		return 0, fmt.Errorf("%w: %s has role %s", ErrNotPrimary, primary.Options().Addr, role)
	}
	v, ok := infoField(info, "connected_slaves")
	if !ok {
		return 0, errors.New("info replication: no connected_slaves field")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("info replication: connected_slaves=%q: %w", v, err)
	}
	return n, nil
}

// infoField returns the value of "name:value" in an INFO reply.
func infoField(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}
