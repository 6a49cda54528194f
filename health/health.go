// Package health rates the settings of the Redis servers redkit runs on:
// those that decide what an acknowledged write survives, and with them the guarantees of
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

// Check reads, on every primary (each master of a Cluster), the settings
// that decide what an acknowledged write survives, and rates them:
//
//   - maxmemory-policy other than noeviction: critical, keys can be evicted;
//   - appendonly no: critical when RDB snapshots are off too (save ""),
//     otherwise a warning, a restart loses writes since the last snapshot;
//     then stop-writes-on-bgsave-error no is a warning too: a snapshot that
//     fails (a full disk) goes unnoticed while writes are still
//     acknowledged, so that "last snapshot" can be hours old;
//   - with appendonly yes, appendfsync no: critical; everysec: warning;
//     always: ok; and no-appendfsync-on-rewrite yes: a warning (unless
//     appendfsync is no, when there is no fsync to skip), since Redis then
//     skips the fsync while an AOF rewrite or RDB save child runs (they
//     start on their own), so a crash meanwhile can lose up to ~30 s of
//     acknowledged writes even with appendfsync always.
//
// Settings that change no acknowledged write's fate are not read:
// aof-use-rdb-preamble (the format of a rewritten AOF), aof-load-truncated
// (it decides whether Redis starts on an AOF whose last command was cut
// off by a crash; that command was never acknowledged under appendfsync
// always), and the replication settings (replication is asynchronous
// whatever they say; WithReplicaAck in lock, stock and wallet is what
// waits for replicas).
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
	var out []Finding

	if v, err := get("maxmemory-policy"); err != nil {
		out = append(out, unknownFinding(node, "maxmemory-policy", err))
	} else if v != "noeviction" {
		out = append(out, Finding{node, "maxmemory-policy", v, Critical,
			"keys can be evicted: markers/balances silently lost"})
	} else {
		out = append(out, Finding{node, "maxmemory-policy", v, OK, "keys are never evicted"})
	}

	aof, err := get("appendonly")
	switch {
	case err != nil:
		out = append(out, unknownFinding(node, "appendonly", err))
	case aof == "no":
		out = append(out, aofOff(node, get)...)
	default:
		out = append(out, Finding{node, "appendonly", aof, OK, "writes are logged to the AOF"})
		out = append(out, fsync(node, get)...)
	}
	return out
}

func aofOff(node string, get func(string) (string, error)) []Finding {
	f := Finding{Node: node, Setting: "appendonly", Value: "no", Severity: Warning,
		Risk: "a restart loses everything since the last RDB save"}
	save, err := get("save")
	switch {
	case err != nil:
		f.Risk += " (save setting unreadable: " + err.Error() + ")"
		return []Finding{f}
	case strings.TrimSpace(save) == "":
		f.Severity = Critical
		f.Risk = "a restart loses everything: RDB snapshots are off too (save \"\")"
		return []Finding{f}
	}
	// The snapshots are what a restart keeps: a failing one must stop writes.
	const stop = "stop-writes-on-bgsave-error"
	switch v, err := get(stop); {
	case err != nil:
		return []Finding{f, unknownFinding(node, stop, err)}
	case v == "no":
		return []Finding{f, {node, stop, v, Warning,
			"writes are still acknowledged while RDB saves fail: a restart then loses everything since the last save that worked"}}
	default:
		return []Finding{f, {node, stop, v, OK, "writes are refused while RDB saves fail"}}
	}
}

func fsync(node string, get func(string) (string, error)) []Finding {
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
	return []Finding{f, rewriteFsync(node, get, err == nil && v == "no")}
}

// rewriteFsync rates no-appendfsync-on-rewrite: with yes, Redis does not
// fsync the AOF while a child process (AOF rewrite, RDB save) runs, and
// such children start on their own (auto-aof-rewrite-percentage, save).
func rewriteFsync(node string, get func(string) (string, error), noFsync bool) Finding {
	const setting = "no-appendfsync-on-rewrite"
	v, err := get(setting)
	switch {
	case err != nil:
		return unknownFinding(node, setting, err)
	case v != "yes":
		return Finding{node, setting, v, OK, "the AOF is fsynced during rewrites and RDB saves too"}
	case noFsync:
		return Finding{node, setting, v, OK, "no fsync to skip: appendfsync is no"}
	default:
		return Finding{node, setting, v, Warning,
			"no fsync while an AOF rewrite or RDB save runs: a crash then can lose up to ~30s of acknowledged writes, whatever appendfsync says"}
	}
}

func unknownFinding(node, setting string, err error) Finding {
	return Finding{Node: node, Setting: setting, Severity: Unknown, Risk: "cannot read: " + err.Error()}
}
