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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/script"
)

// Severity ranks a finding. SeverityUnknown (the setting could not be read)
// ranks below SeverityOK, so Report.Err(SeverityWarning) never fails on a
// server that merely hides its configuration.
type Severity int

const (
	SeverityUnknown Severity = iota
	SeverityOK
	SeverityWarning
	SeverityCritical
)

func (s Severity) String() string {
	switch s {
	case SeverityOK:
		return "ok"
	case SeverityWarning:
		return "warning"
	case SeverityCritical:
		return "critical"
	default:
		return "unknown"
	}
}

// Finding is one setting of one node and what it risks.
type Finding struct {
	Node     string // host:port
	Setting  string // e.g. "maxmemory-policy"
	Value    string // as CONFIG GET returned it; "" when unknown
	Severity Severity
	Risk     string // what can be lost; for unknown findings, why
}

func (f Finding) String() string {
	return fmt.Sprintf("%s %s=%q: %s: %s", f.Node, f.Setting, f.Value, f.Severity, f.Risk)
}

// ErrRiskySettings is wrapped by Report.Err.
var ErrRiskySettings = errors.New("redkit: risky server settings")

// Report is the result of Check: findings per node and setting.
type Report struct {
	Findings []Finding
}

// Worst returns the highest severity among the findings (SeverityUnknown
// for an empty report).
func (r Report) Worst() Severity {
	worst := SeverityUnknown
	for _, f := range r.Findings {
		worst = max(worst, f.Severity)
	}
	return worst
}

// Err returns nil when no finding is at least min, otherwise an error
// wrapping ErrRiskySettings that lists those findings.
func (r Report) Err(min Severity) error {
	var risky []string
	for _, f := range r.Findings {
		if f.Severity >= min {
			risky = append(risky, f.String())
		}
	}
	if len(risky) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRiskySettings, strings.Join(risky, "; "))
}

// Check reads maxmemory-policy, appendonly, save and appendfsync on every
// primary (each master of a Cluster) and rates them:
//
//   - maxmemory-policy other than noeviction: critical, keys can be evicted;
//   - appendonly no: critical when RDB snapshots are off too (save ""),
//     otherwise a warning, a restart loses writes since the last snapshot;
//   - appendfsync no: critical; everysec: warning; always: ok.
//
// A setting that cannot be read is a SeverityUnknown finding. The error is
// non-nil only when the nodes cannot be listed (Cluster topology unknown).
func Check(ctx context.Context, c redis.UniversalClient) (Report, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return Report{Findings: checkNode(ctx, c, nodeName(c))}, nil
	}
	var (
		mu  sync.Mutex
		rep Report
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		found := checkNode(ctx, m, m.Options().Addr)
		mu.Lock()
		rep.Findings = append(rep.Findings, found...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("check cluster masters: %w", err)
	}
	return rep, nil
}

func nodeName(c redis.UniversalClient) string {
	if cl, ok := c.(*redis.Client); ok {
		return cl.Options().Addr
	}
	return fmt.Sprintf("%T", c)
}

func checkNode(ctx context.Context, c redis.UniversalClient, node string) []Finding {
	get := func(setting string) (string, error) {
		m, err := c.ConfigGet(ctx, setting).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[setting]
		if !ok {
			return "", errors.New("not reported by CONFIG GET")
		}
		return v, nil
	}
	unknown := func(setting string, err error) Finding {
		return Finding{Node: node, Setting: setting, Severity: SeverityUnknown, Risk: "cannot read: " + err.Error()}
	}
	var out []Finding

	if v, err := get("maxmemory-policy"); err != nil {
		out = append(out, unknown("maxmemory-policy", err))
	} else if v != "noeviction" {
		out = append(out, Finding{node, "maxmemory-policy", v, SeverityCritical,
			"keys can be evicted: markers/balances silently lost"})
	} else {
		out = append(out, Finding{node, "maxmemory-policy", v, SeverityOK, "keys are never evicted"})
	}

	aof, err := get("appendonly")
	switch {
	case err != nil:
		out = append(out, unknown("appendonly", err))
	case aof == "no":
		out = append(out, aofOff(node, get))
	default:
		out = append(out, Finding{node, "appendonly", aof, SeverityOK, "writes are logged to the AOF"})
		out = append(out, fsync(node, get))
	}
	return out
}

func aofOff(node string, get func(string) (string, error)) Finding {
	f := Finding{Node: node, Setting: "appendonly", Value: "no", Severity: SeverityWarning,
		Risk: "a restart loses everything since the last RDB save"}
	switch save, err := get("save"); {
	case err != nil:
		f.Risk += " (save setting unreadable: " + err.Error() + ")"
	case strings.TrimSpace(save) == "":
		f.Severity = SeverityCritical
		f.Risk = "a restart loses everything: RDB snapshots are off too (save \"\")"
	}
	return f
}

func fsync(node string, get func(string) (string, error)) Finding {
	f := Finding{Node: node, Setting: "appendfsync"}
	v, err := get("appendfsync")
	f.Value = v
	switch {
	case err != nil:
		f.Severity, f.Risk = SeverityUnknown, "cannot read: "+err.Error()
	case v == "always":
		f.Severity, f.Risk = SeverityOK, "each write is fsynced before it is acknowledged"
	case v == "everysec":
		f.Severity, f.Risk = SeverityWarning, "a crash can lose up to ~1s of acknowledged writes"
	default: // "no"
		f.Severity, f.Risk = SeverityCritical, "a crash can lose every write the OS has not flushed yet (~30s)"
	}
	return f
}

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
// slot map to name a master again (a reload takes a round trip or two).
const notPrimaryBudget = 3 * time.Second

// Replicas returns connected_slaves from INFO replication of the primary
// that owns key (see script.Primary). An answer from a node whose role is
// not master is refused: on a Cluster client the slot map is reloaded and
// the node it names then is asked, until one is a master, notPrimaryBudget
// passes or ctx ends; the error then wraps ErrNotPrimary.
func Replicas(ctx context.Context, c redis.UniversalClient, key string) (int, error) {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		n, err := replicas(ctx, c, key)
		if !errors.Is(err, ErrNotPrimary) {
			return n, err
		}
		cc, ok := c.(*redis.ClusterClient)
		if !ok || time.Since(start) >= notPrimaryBudget {
			return 0, err
		}
		cc.ReloadState(ctx)
		t := time.NewTimer(min(time.Duration(attempt)*10*time.Millisecond, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, errors.Join(err, ctx.Err())
		case <-t.C:
		}
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
