// Package health rates the settings of the Redis servers redkit runs on:
// those that can lose acknowledged writes, and with them the guarantees of
// lock, stock, wallet and idgen (an evicted idempotency marker lets a retry
// apply twice, a restart without AOF hands out an ID range again). Each of
// those modules has a Check method returning this package's Report; Check
// here does the same for any client.
//
// A setting a server hides (managed services often refuse CONFIG, the
// embedded miniredis has none) is reported as Unknown, never as a failure.
package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Severity ranks a finding. Unknown (the setting could not be read) ranks
// below OK, so Report.Err(Warning) never fails on a server that merely
// hides its configuration.
type Severity int

// The severities, lowest first.
const (
	Unknown  Severity = iota // the setting could not be read
	OK                       // safe for redkit's guarantees
	Warning                  // a crash or restart can lose recent acknowledged writes
	Critical                 // acknowledged writes can be lost in normal operation
)

// String returns the severity's name: "unknown", "ok", "warning" or
// "critical".
func (s Severity) String() string {
	switch s {
	case OK:
		return "ok"
	case Warning:
		return "warning"
	case Critical:
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

// String describes the finding on one line.
func (f Finding) String() string {
	return fmt.Sprintf("%s %s=%q: %s: %s", f.Node, f.Setting, f.Value, f.Severity, f.Risk)
}

// ErrRiskySettings is wrapped by Report.Err.
var ErrRiskySettings = errors.New("redkit: risky server settings")

// Report is the result of Check: findings per node and setting.
type Report struct {
	Findings []Finding
}

// Worst returns the highest severity among the findings (Unknown
// for an empty report).
func (r Report) Worst() Severity {
	worst := Unknown
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
// A setting that cannot be read is a Unknown finding. The error is
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
		return Finding{Node: node, Setting: setting, Severity: Unknown, Risk: "cannot read: " + err.Error()}
	}
	var out []Finding

	if v, err := get("maxmemory-policy"); err != nil {
		out = append(out, unknown("maxmemory-policy", err))
	} else if v != "noeviction" {
		out = append(out, Finding{node, "maxmemory-policy", v, Critical,
			"keys can be evicted: markers/balances silently lost"})
	} else {
		out = append(out, Finding{node, "maxmemory-policy", v, OK, "keys are never evicted"})
	}

	aof, err := get("appendonly")
	switch {
	case err != nil:
		out = append(out, unknown("appendonly", err))
	case aof == "no":
		out = append(out, aofOff(node, get))
	default:
		out = append(out, Finding{node, "appendonly", aof, OK, "writes are logged to the AOF"})
		out = append(out, fsync(node, get))
	}
	return out
}

func aofOff(node string, get func(string) (string, error)) Finding {
	f := Finding{Node: node, Setting: "appendonly", Value: "no", Severity: Warning,
		Risk: "a restart loses everything since the last RDB save"}
	switch save, err := get("save"); {
	case err != nil:
		f.Risk += " (save setting unreadable: " + err.Error() + ")"
	case strings.TrimSpace(save) == "":
		f.Severity = Critical
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
		f.Severity, f.Risk = Unknown, "cannot read: "+err.Error()
	case v == "always":
		f.Severity, f.Risk = OK, "each write is fsynced before it is acknowledged"
	case v == "everysec":
		f.Severity, f.Risk = Warning, "a crash can lose up to ~1s of acknowledged writes"
	default: // "no"
		f.Severity, f.Risk = Critical, "a crash can lose every write the OS has not flushed yet (~30s)"
	}
	return f
}
