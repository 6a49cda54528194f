// Package internal holds the mechanics that redkit's modules (idgen, lock,
// stock, wallet) share, so each exists exactly once. Users never import it;
// Go's internal rule is by import path, so the sibling modules of
// github.com/redkit-go/redkit can.
//
// The subpackages, from the bottom up:
//
//   - valid: the grammar and bounds of caller data, checked before anything
//     reaches Redis. Names and IDs are 1–128 bytes of A-Z a-z 0-9 . _ - :
//     with at most one '/' (not first or last); amounts stay within
//     ±(2^53−1), which Lua numbers hold exactly; durations have documented
//     ranges. Every error wraps ErrInvalid and names the field.
//   - keys: the key schema <prefix>:<module>:v<N>:{<group>}:<kind>[:<part>...].
//     The group is the part of an ID before its '/', or the whole ID, and is
//     the key's only hash tag, so every key of one group lives in one
//     cluster slot and one script can touch them all.
//   - retry: the loop every write runs in, and the error contract every
//     write keeps (success, a decision of the script, or ErrUnknownOutcome;
//     a bare error only when nothing was sent). It resends an idempotent
//     call after failures that did not run this send (Retryable) or may
//     have run (Ambiguous), with bounded jittered backoff that never
//     outlives ctx, and ends in ErrUnknownOutcome when some attempt may have
//     run, which includes a "not sent" error from a client that re-sends
//     below every hook (Policy.For reads go-redis's MaxRetries and
//     MaxRedirects); Read is the same loop for reads; Nonce tells a script
//     its own earlier attempt from an earlier call. On a Cluster client an
//     error that says the slot map is out of date (StaleMap: a moving
//     slot, or a node that is gone) is retried within ClusterBudget on a
//     map Reload loaded, at most once per ReloadInterval per client.
//   - script: Lua scripts by EVALSHA with the NOSCRIPT fallback, in
//     pipelines too (only calls that answered NOSCRIPT are resent), and
//     RunAck, which pipelines WAIT with the write on the connection to the
//     primary that owns the key. Bundle is the one loader of a module's
//     scripts (its embedded scripts/*.lua, with the shared chunks each
//     needs).
//   - fence: fencing tokens, once: the redkit_fence Lua chunk, the fence
//     key, the bounds of a caller's fence and the check outside Lua, which
//     lock publishes and stock and wallet build stock.WithFence and
//     wallet.WithFence on.
//   - worker: the owner of a component's background goroutines (lock's
//     watchdog and release hub, idgen's lease heartbeat and segment
//     prefetch, stock's reservation reclaimer, wallet's hold reclaimer and
//     recovery): started with a context Stop cancels, and Stop waits.
//   - stream: Page, one page of a stock or wallet journal (a Redis stream)
//     with whether its record exists, read in one pipeline, so both
//     modules' Entries page the same way; Range, a page read with the
//     record's last checkpoint, so both modules' audits tell a concurrent
//     checkpoint and trim from drift the same way.
//   - server: Check rates the settings that decide what a crash or restart
//     loses (maxmemory-policy, appendonly, save, stop-writes-on-bgsave-error,
//     appendfsync, no-appendfsync-on-rewrite) on every
//     primary; Probe reads the server version to detect optional features;
//     Replicas counts the replicas behind a key's primary. None of them
//     fails because a server hides its configuration: that is reported as
//     unknown.
//
// Dependencies run one way: server uses retry and script; fence uses keys,
// retry, script and valid; script and stream use retry and valid; retry
// uses valid; keys, valid and worker import no other package of internal
// (TestLayers checks this).
package internal
