// Package script runs redkit's Lua scripts: one EVALSHA round trip per call,
// with the NOSCRIPT fallback go-redis gives single calls extended to
// pipelines, and optional replica acknowledgement (WAIT) pipelined with the
// write on the connection to the key's primary.
package script

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/retry"
)

// Script is a Lua script identified by its SHA1. It is safe for concurrent use.
type Script struct {
	src string
	rs  *redis.Script
}

// New returns a Script for src (typically a //go:embed'ed scripts/x.lua).
func New(src string) *Script {
	return &Script{src: src, rs: redis.NewScript(src)}
}

// Hash returns the script's SHA1 in hex, as EVALSHA expects it.
func (s *Script) Hash() string { return s.rs.Hash() }

// Source returns the Lua source.
func (s *Script) Source() string { return s.src }

// Run sends EVALSHA and, when the server answers NOSCRIPT (script cache
// flushed, failover to a node that never saw it), EVAL with the source,
// which also caches it. On a Cluster client the command goes to the node
// owning keys[0]; all keys must share one hash tag.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.rs.Run(ctx, c, keys, args...)
}

// Call is one script invocation in a Pipeline.
type Call struct {
	Script *Script
	Keys   []string
	Args   []any
}

// Pipeline sends every call as EVALSHA in one pipeline and returns one
// command per call, in order. Calls answered NOSCRIPT never ran: their
// scripts are loaded (SCRIPT LOAD, on every master of a Cluster) and only
// those calls are resent, in a second pipeline; the calls that ran are never
// sent twice. Errors are per command, read them with Cmd.Err.
func Pipeline(ctx context.Context, c redis.UniversalClient, calls []Call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	send(ctx, c, calls, cmds, all(len(calls)))

	var missing []int
	loaded := map[*Script]error{}
	for i, cmd := range cmds {
		if !isNoScript(cmd.Err()) {
			continue
		}
		s := calls[i].Script
		if _, done := loaded[s]; !done {
			loaded[s] = c.ScriptLoad(ctx, s.src).Err()
		}
		if loaded[s] == nil { // a failed load leaves the NOSCRIPT reply in place
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		send(ctx, c, calls, cmds, missing)
	}
	absorbMoving(ctx, c, calls, cmds)
	return cmds
}

// absorbMoving re-sends, on a Cluster client, the calls whose reply says
// their slot is being moved (retry.Moving: MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN, READONLY) and only those: such a call did not run where it
// was sent, and each call carries its operation's ID, so a send that an
// earlier go-redis re-send may have applied is replayed, not applied again.
// It goes on, with the slot map reloaded (retry.Reload) and a short growing
// wait, until none is left, retry.DefaultClusterBudget has passed, or ctx
// ends. A call that failed on a node that is gone (a refused dial, EOF: see
// retry.StaleMap) is left to its caller, who knows whether it may have
// run, but the map is reloaded for its next attempt.
func absorbMoving(ctx context.Context, c redis.UniversalClient, calls []Call, cmds []*redis.Cmd) {
	if _, ok := c.(*redis.ClusterClient); !ok {
		return
	}
	start := time.Now()
	loaded := map[*Script]error{}
	for round := 1; ; round++ {
		var moving []int
		stale := false
		for i, cmd := range cmds {
			switch err := cmd.Err(); {
			case retry.Moving(err):
				moving = append(moving, i)
			case retry.StaleMap(err):
				stale = true
			case round > 1 && isNoScript(err):
				// Re-sent to a master that has not had the script.
				s := calls[i].Script
				if _, done := loaded[s]; !done {
					loaded[s] = c.ScriptLoad(ctx, s.src).Err()
				}
				if loaded[s] == nil {
					moving = append(moving, i)
				}
			}
		}
		if len(moving) == 0 || time.Since(start) >= retry.DefaultClusterBudget {
			if stale {
				retry.Reload(ctx, c)
			}
			return
		}
		t := time.NewTimer(min(time.Duration(round)*10*time.Millisecond, 200*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry.Reload(ctx, c)
		send(ctx, c, calls, cmds, moving)
	}
}

// send pipelines EVALSHA for calls[i], i in which, storing each in cmds[i].
func send(ctx context.Context, c redis.UniversalClient, calls []Call, cmds []*redis.Cmd, which []int) {
	pipe := c.Pipeline()
	for _, i := range which {
		call := calls[i]
		cmds[i] = pipe.EvalSha(ctx, call.Script.Hash(), call.Keys, call.Args...)
	}
	_, _ = pipe.Exec(ctx) // errors are on each command
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }
