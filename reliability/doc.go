// Package reliability is redkit's cross-module robustness suite: random
// workloads against lock, stock and wallet (and the idgen generators) on
// real redis-server processes, while a controller injects faults one at a
// time; the histories are checked for linearizability with porcupine and
// the end state for the invariants the modules promise.
//
// The package is the harness; its tests are the suite. Everything runs on
// redistest: no Redis is mocked.
//
// # The harness
//
// Run takes a Scenario: a Deployment (Single: one redis-server with AOF and
// appendfsync always behind a fault Proxy; Pair: a primary and a replica
// whose clients always dial the current primary; Cluster: three masters
// with a replica each), the faults to inject, and the workloads. Each
// workload has N clients (8 by default) issuing random operations on a
// small key space, each client with its own random stream derived from the
// seed, through two client processes' worth of go-redis clients:
//
//   - lock: TryAcquire or Acquire one of two mutexes (2s TTL, watchdog on),
//     read the counter the mutex protects and write it back plus one, both
//     through a Lua script that starts with lock.FenceLua, then Release.
//     Every access is idempotent by its operation ID (the counter keeps the
//     answers), so a lost reply is resolved by sending it again.
//   - stock: Deduct (one or two SKUs of a slot group), DeductBatch, Restock,
//     WriteOff, Refund, Level on two slot groups of three SKUs; plus a SKU
//     split into four buckets with a per-buyer limit (orders, restocks,
//     refunds).
//   - wallet: Credit, Debit, Transfer within a group, TransferBatch, Balance
//     on two slot groups of three accounts; plus two accounts in different
//     groups trading through two-phase transfers.
//
// Clients record each operation's call and return times and its answer.
// A write whose answer does not come (ErrUnknownOutcome, a timeout, a
// replica acknowledgement shortfall) is sent again with the same operation
// ID until it gets one, as the modules tell callers to; the whole exchange
// is one operation, from the first call to the answer. An operation still
// without an answer after SettleBudget is recorded as unknown: its return
// time becomes the end of the history (or, for the lock, the time by which
// a late command must have run: the longest fault plus slack, plus the TTL
// where the lock could stay held), and the model accepts it both as applied
// and as not applied. Some clients also resubmit operations that already
// had an answer; the answer must not change and must say Replayed.
//
// # The models
//
// Histories are partitioned per key (a lock name, a slot group) and each
// partition is checked with porcupine.CheckOperationsVerbose with a
// one-minute timeout; Unknown (timed out) fails like Illegal, so histories
// are kept to about 8 clients × 1,000 operations.
//
//   - LockModel: a mutex with fencing tokens in front of a counter that
//     checks them. An acquire succeeds only while the lock is free, with a
//     token above every token seen; it fails only while someone holds it; a
//     release reports "released" only from the holder; a lease may end
//     without a release only where the history allows it (an expire
//     operation, recorded for every lease not released by its holder, which
//     may happen anywhere from the acquire until its TTL has passed since
//     the last command that could renew it); the counter accepts a read or
//     write whose token is at least the highest it has seen, and a read
//     returns the last value written.
//   - StockModel: counters with a floor of zero per slot group. A deduction
//     or write-off succeeds exactly when every SKU it touches has the units,
//     takes them all at once and reports the levels right after; restocks
//     and refunds add units; Level returns the available units.
//   - BankModel: accounts that may not go below zero per slot group, with
//     idempotent postings reporting the balances right after them.
//
// A SKU split into buckets and transfers across slot groups are not
// linearizable by design (a bucketed SKU refuses only after asking its
// buckets one after the other; a two-phase transfer is visible in steps),
// so they are checked by their invariants only.
//
// # Invariants
//
// After the run (and after every fault has healed), O(n) checks that are
// bugs whatever the fault: stock.Audit of every SKU and wallet.Verify of
// every account (the journal proves the state), trial balances (transfers
// net to zero after wallet.Recover), resubmissions answered like the first
// call, no refused operation in a journal, a per-buyer limit never passed.
// And the counts of the report:
//
//   - lost acknowledged writes: writes the client was told succeeded that
//     are missing after recovery (not in the journal, not in the protected
//     counter's log). A write reported with ErrReplicaAck is not counted as
//     acknowledged: the modules say it may be lost.
//   - mutual-exclusion violations: in the protected counter's log of
//     accepted writes, a write that did not follow the one before it (two
//     holders read the same value: a lost update), a token accepted after a
//     higher one, or one token used by two leases.
//   - oversell: units acknowledged as sold beyond a SKU's supply, or
//     available units below zero.
//   - double charges: an order or transaction ID whose effect appears more
//     than once in a journal (for idgen, an ID handed out twice).
//   - recovery time: from the end of a fault (the restart begun, the
//     process resumed, the replies released, the failover done) to the first
//     operation issued after it that succeeded.
//
// # Faults, and what is gated
//
// kill -9 and restart on AOF with appendfsync always; SIGSTOP/SIGCONT of
// Redis past the client read timeout; replies held back past the read
// timeout (the command ran, the reply is late); replies dropped; connection
// resets; the server closing client connections; a network partition; a
// lock holder that stops, renewals included, past its lease before its
// write (Lock "stall": the holder's lease has its watchdog off, as in a
// frozen process); a failover of a primary and replica, with the primary
// still running or killed; a Redis Cluster shard failover.
//
// Mutual-exclusion violations, oversell and double charges fail the run
// under every fault. Lost acknowledged writes fail it where the modules
// promise durability, which is every fault here: AOF with appendfsync
// always survives kill -9; on a Pair the workloads use the replica options
// that close the failover gap (stock and wallet WithReplicaAck, lock
// WithRequiredReplicaAck, and WAIT after every write of the protected
// counter); a Cluster shard failover is coordinated. What the modules do
// not promise is allowed for: lock releases and renewals are not waited for,
// so on a Pair a release around a failover may be lost (the lock stays held
// until its TTL) and reads around a failover may come from the node being
// demoted; neither is checked as a violation.
//
// A split brain (the replica promoted while the old primary keeps serving
// half of the clients, then demoted) is measured and reported, never gated:
// no module promises to survive it. With replica acknowledgement nothing
// acknowledged is lost (writes on either side cannot be acknowledged);
// without it, acknowledged writes are lost, fence tokens are handed out
// twice and resubmissions change their answers.
//
// # Tiers
//
// The short tier runs in `make test`: each fault on a single server in one
// history per workload, failovers on a Pair, a Cluster shard failover, the
// split brain measurement, IDs from Segments, Snowflakes and Sequences
// sharing a name through restarts, pauses and failovers, and the replica
// acknowledgement checks.
//
// The long tier is TestChaos, run by `make chaos` (RUN_CHAOS=1; skipped
// otherwise): every fault on its own with thousands of operations per
// workload, the split brain measurements, 10 million IDs from eight
// Segments and from eight Snowflakes sharing a name while Redis is killed,
// paused and reset, a million wallet transfers and a million stock orders in
// batches under faults (invariants only). It prints the report table (and
// writes it to the file CHAOS_OUT names, when set). CHAOS_SCALE multiplies
// the work (default 1, about 20 minutes on two cores; a fraction shrinks it).
//
// # Replaying a run
//
// Every test logs its seed, which drives every random choice: operations,
// keys, amounts, and the order and spacing of faults. A failure prints it
// with the command that replays it, for example
//
//	RELIABILITY_SEED=8932654864149139034 go test -race -count=1 -run '^TestFaults_singleServer$' ./reliability/
//
// Timing is not replayed, so a replay makes the same choices but may not
// meet the same interleaving. A history porcupine rejects is written as
// porcupine's HTML visualisation to
// os.TempDir()/redkit-reliability-<test>-<workload>-<key>-<seed>.html (the
// failure message names it, with the longest linearization found and the
// operations that could not follow it).
//
// # Regression tests
//
// Bugs this suite found, each fixed and kept as a test that reproduces the
// exact sequence of the failure (every reply delayed by a proxy so the test
// acts between the steps):
//
//   - TestWallet_refusalWithoutReplicaAck_failover: a refusal the replica
//     did not acknowledge was reported without ErrReplicaAck, and a failover
//     then let the declined transaction through when it was sent again.
//   - TestWallet_crossGroupCreditWithoutReplicaAck_failover: a transfer
//     across slot groups posted the source after an unacknowledged
//     destination credit, and a failover destroyed the money.
//   - TestStock_bucketTransferWithoutReplicaAck_failover: a refill between
//     the buckets of a hot SKU ignored the acknowledgement of its steps and
//     deleted the out-record without one; a failover lost the units in
//     flight (or created units).
package reliability
