// Package stock is flash-sale inventory on Redis that never oversells, never
// deducts an order twice and keeps an audit trail of every change.
//
//	inv, err := stock.New(rdb) // any redis.UniversalClient; an invalid option is an error here
//	defer inv.Close()
//	err = inv.Create(ctx, "shop-7/sku-1", 100, stock.WithBuyerLimit(2))
//	res, err := inv.Deduct(ctx, stock.Order{ID: orderID, Buyer: userID,
//		Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: 1}}})
//	switch {
//	case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrBuyerLimit):
//		// a business refusal: tell the buyer
//	case errors.Is(err, stock.ErrUnknownOutcome):
//		// the reply was lost: call Deduct again with the same order
//	}
//
// # Guarantees
//
// Every change is one Lua script that checks its input, reads all the state it
// needs and only then writes, so a change is applied whole or not at all:
//
//   - No oversell: a deduction succeeds only if every item has enough
//     available units; the levels never go below zero.
//   - All or nothing: the items of an order are sold together or not at all.
//   - Per-buyer limit (WithBuyerLimit): a buyer never holds more than the
//     limit of a SKU, counting units reserved for and sold to them; cancel,
//     expiry and refund give the allowance back.
//   - At most once per operation ID: Deduct, Reserve, Restock and WriteOff
//     (and Confirm, Cancel and Refund of an order) store their decision,
//     success or refusal, under the caller's operation ID. Calling again
//     with the same ID and fields returns the stored decision with
//     Result.Replayed set and changes nothing; the same ID with other fields
//     (another kind, buyer, SKU or quantity) fails with a *ConflictError; a
//     refused operation stays refused even if stock arrives later. Errors
//     that may not stay true are not stored and write nothing: bad input,
//     a level that would pass 2^53-1 (ErrInvalid), a stale fence, a
//     conflict. go-redis re-sends a command after a read timeout
//     by default, and this package retries a lost reply itself (WithRetry,
//     default 3 attempts), always with the same ID, so neither can apply an
//     operation twice. Result.Replayed is true only when an earlier call had
//     decided the operation, never because of this package's own retries.
//   - Scope of an ID: one slot group (see Slot groups and keys). Order IDs
//     and restock/write-off IDs share that scope, whatever SKU of the group
//     they name, with or without buckets: on a SKU split into buckets the
//     first call with an ID claims it in the group's own tag {g} (kind,
//     buyer, items) before it runs in its bucket, so the same ID from
//     another buyer, or for another kind or quantity, is a *ConflictError
//     there too. A claim is made by the first call that reaches Redis, even
//     if that call is then refused without a stored decision (a stale
//     fence, a bound), and lives at least as long as the operation's
//     marker (its life starts earlier: it is given a slack, and lengthened
//     again after an operation decided late). A
//     decision stored in {g} before the SKU existed (a refusal such as
//     ErrSKUNotFound, a Cancel's tombstone) is found by the claim, and the
//     operation then runs in {g}, where it is replayed.
//   - A definite answer or ErrUnknownOutcome: when the retries run out
//     without a reply, the error wraps ErrUnknownOutcome; calling again with
//     the same ID tells what happened.
//   - Nothing resets levels: a SKU is created once (Create again with the
//     same settings is a no-op) and changed only by relative, idempotent
//     operations. An absolute "set stock to N" re-sent after some sales would
//     oversell, so there is none.
//   - Audit trail: every change appends a journal entry (operation ID, kind,
//     deltas and the levels after it) in the same script, so the journal
//     never misses or duplicates a change. Audit checks the identity
//     initial + restocked - written_off = available + reserved + sold -
//     refunded, replays the journal from the last checkpoint (each entry's
//     deltas against the levels it records, and the last entry against the
//     SKU's levels, so a changed level, an entry that moves units added or
//     removed, and a hash rolled back to an older copy are reported; an
//     entry without deltas, such as a close, can be removed unseen, since
//     stock does not count its entries as wallet does), and compares
//     reserved with the units of the holds in the deadline index. A level
//     that is not a whole number, and a bucket whose hash is missing, are
//     reported too. A Checkpoint or Trim running meanwhile is never
//     reported: the audit reads each page with the SKU's last checkpoint
//     and starts over (at most 5 times) when it moved
//     (TestAudit_checkpointAndTrimBetweenPages,
//     TestAudit_besideCheckpointsConcurrentSafe).
//     Verify gives the same check as a verdict: an error
//     wrapping ErrMismatch, as wallet's Verify does. Checkpoint audits first
//     and refuses with ErrMismatch rather than write a checkpoint over
//     levels the journal does not explain. Entries reads a SKU's journal in
//     pages (a cursor, a limit up to MaxPage), as wallet's Entries reads an
//     account's; Consume hands it to consumer groups.
//
// # Reservations
//
// Reserve holds units until a deadline on the Redis server's clock (never
// the caller's); Confirm sells all or part of them (the rest goes back),
// Cancel returns them, Refund returns sold units once. Each is idempotent:
// Confirm and Cancel of the same order are stored transitions, not repeated
// effects. A Cancel that arrives before its Reserve leaves a tombstone, so
// the late Reserve is refused with ErrCancelled. Confirm after the deadline
// fails with ErrHoldExpired. Expired holds go back to available lazily, at
// the next Deduct or Reserve of the SKU, and through a background reclaimer
// (WithReclaimInterval, stopped by Close); correctness never depends on the
// reclaimer's timing. A refusal (sold out, buyer limit) is never decided on
// a partial sweep: when more expired holds wait than one call reclaims, the
// call reclaims a batch and goes on, and decides once none is left that
// could change the answer. Level reports expired holds as reserved until one of
// those has run.
//
// # Hot SKUs: buckets
//
// WithBuckets(b) at Create splits a SKU into b buckets on different hash
// tags ({g}, {g#1}, ..., {g#b-1}), so on a Cluster one SKU's sales spread over
// several nodes. A buyer's orders always go to their home bucket, a hash of
// the buyer ID, so the per-buyer limit is checked in one script and a retry
// never lands elsewhere (the operation's ID is claimed in {g} first, one more
// round trip). A bucket that runs short is refilled from the others
// by transfers (out of one bucket, into the other, then the out-record is
// deleted); transfers between two buckets are numbered and applied in order,
// so each is credited exactly once however often it is finished, and a
// transfer never moves more than the receiving bucket can take below
// 2^53-1. An order is refused as sold out only after transfers left in flight
// by a crashed caller were finished and every other bucket that may hold
// units was asked, its expired holds reclaimed first: a bucket is skipped
// only when one read found it with nothing available, nothing reserved and
// no transfer toward it just finished, and only once such a refill found
// nothing to move: while the units a refill brings are taken by other
// orders of the bucket first, the order tries again, asking twice as much
// each time, within ctx (never a stored sold out while another bucket
// holds units). Audit counts units in flight. Clients learn
// the bucket count once per SKU: a script refuses a call routed with the
// wrong count and names the right one. A SKU split into buckets must be the
// only item of its orders; restocks and write-offs go to the bucket of their
// operation ID (a write-off takes from that bucket only), and each bucket
// takes units (its initial share and restocks) up to its own share of
// 2^53-1, about 2^53/b, so the SKU's total never passes 2^53-1 (a restock
// beyond its bucket's share is refused with ErrInvalid); Level, Audit,
// Checkpoint, Trim, Reclaim, CloseSKU and Consume cover every bucket, and
// Entries reads bucket 0's journal.
//
// # Fences, replicas, batches, telemetry
//
// WithFence makes a write conditional on a lock.Lease's fence: the script
// refuses a token older than one already seen in the SKUs' slot group
// (ErrStaleFence), so a holder whose lock expired cannot write after its
// successor. The replay comes first: a call that repeats a decided
// operation gets the stored decision whatever token it carries (a holder
// that applied an order and lost the reply learns it was applied, even
// after its successor wrote); the fence is judged only for an operation not
// decided yet, before its first write. On a SKU split into buckets each
// bucket has its own fence key ({g#k}): a fenced call first records its
// token in the group's own key ({g}), then in every other bucket's (keeping
// a higher one); when any of them holds a higher token, that token is
// recorded in every bucket's key too, so the operation's script, after its
// replay, refuses the call (ErrStaleFence). Every token accepted in the
// group went through {g}, so a lower token is stale through every bucket
// of every SKU of the group.
// WithReplicaAck(n, timeout) pipelines WAIT with every write (CloseSKU,
// Checkpoint, the claim of an ID in {g} and the fence records of a SKU
// split into buckets included) on the connection to the primary that owns
// its key (the right node on a Cluster); fewer acknowledgements return
// ErrReplicaAck alongside a valid Result, because the write did happen.
// Reclaim and Trim learn from their script whether they changed anything:
// when they did (units returned, entries deleted), WAIT follows the script,
// with the same result (the background reclaimer runs Reclaim, so it
// waits too); the reclaim a refill makes in the bucket it takes units from
// is covered by the transfer step that follows in that bucket. Not waited
// for is Consume's consumer-group bookkeeping (creating a group, handing
// entries out, acknowledging them, removing idle consumers, Trim giving
// every bucket's journal the groups of bucket 0's): it changes no level,
// entry or decision, and a failover that loses some of it hands the
// entries concerned out again, as at-least-once delivery allows.
// (TestReplicaAck_reclaimCheckpointTrimWait.) DeductBatch sends many
// orders in one pipeline with the same guarantees per order.
//
// # Telemetry
//
// One span per public call, named stock.<operation> (stock.deduct,
// stock.reserve, stock.confirm, stock.cancel, stock.refund, stock.restock,
// stock.writeoff, stock.create, stock.close_sku, stock.level, stock.audit,
// stock.entries, stock.checkpoint, stock.trim, stock.reclaim,
// stock.deduct_batch), a child of the caller's span, with redkit.outcome
// and redkit.replayed; refusals are outcomes, not span errors. Background
// work has a root span per batch: stock.reclaim_batch per round of the
// reclaimer (its stock.reclaim calls under it; linked to the span of the
// caller of the Reserve that started the reclaimer) and stock.consume_batch
// per batch Consume hands to its handler (linked to the span of Consume's
// caller; the handler's spans and the acknowledgement under it). Metrics:
//
//	redkit.stock.operation.duration  s          histogram  redkit.operation, redkit.outcome
//	redkit.stock.operations          {operation} counter   redkit.operation, redkit.outcome
//	redkit.stock.units.sold          {unit}     counter    redkit.operation (deduct, confirm)
//	redkit.stock.reclaim.holds       {hold}     counter    expired holds the reclaimer returned
//	redkit.stock.reclaim.lag         s          histogram  how late the oldest hold of a batch was
//	redkit.stock.journal.overrun     {group}    counter    groups that lost unacknowledged entries to Trim
//
// redkit.operation is the operation's name as in the span; redkit.outcome
// is ok (applied), replayed (answered from the idempotency record), a
// refusal (sold_out, buyer_limit, closed, sku_not_found, order_not_found,
// conflict, cancelled, hold_expired, stale_fence, cross_group, invalid),
// unknown_outcome, replica_ack_missing, mismatch (an audit, verification
// or checkpoint that found books the journal does not explain) or error:
// the words every redkit module uses (otelx.Outcomes). A failed span's
// error.type is a sentinel's text ("stock: sold out") or a Go type, never
// an error text that could hold an ID. A DeductBatch counts each of its orders as
// a deduct. units.sold counts first applications only (a replay sells
// nothing new) and does not subtract refunds. Every attribute set may also
// hold redkit.label (WithLabel); SKUs, IDs, buyers and quantities never
// appear.
// Every duration histogram is in seconds (unit "s") with
// otelx.DurationBuckets as bucket advice: 50µs, 75µs, 100µs, 150µs, 200µs,
// 300µs, 400µs, 500µs, 750µs, 1ms, 1.5ms, 2ms, 3ms, 4ms, 5ms, 7.5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s (a View of the
// program's still overrides them). Tracers and meters carry this module's
// Version as the scope version and otelx.SchemaURL.
//
// Consume hands the journal to a service (to persist it in a database, say)
// through a Redis consumer group: at least once, and in order per SKU (per
// bucket) across every consumer of the group: no consumer is handed an
// entry while an older entry of that journal is pending for another, one
// script deciding and handing out in one step. Entries a crashed or stalled
// consumer left unacknowledged are taken over after MinIdle, oldest first;
// newer entries of that journal wait until then (or until their holder
// acknowledges them). A consumer acknowledges only the entries it still
// holds, so one that stalled past MinIdle and finishes late does not
// release the batch another took over (its own late work is a duplicate,
// which the handler must take: see Consume). TestConsume_orderAcrossConsumers,
// TestConsume_lateAckLeavesTakenOverBatchHeld and the model-based
// TestConsume_model (consumers that crash, stall, acknowledge late and
// take over) check it. A SKU
// that does not exist yet when Consume starts is looked up again at every
// idle round; once created, every bucket's journal is read from its first
// entry. Meanwhile the group waits on bucket 0's journal (created empty for
// it), and Trim gives every bucket's journal the groups of bucket 0's
// before it trims, so no entry is trimmed before the group could read it.
//
// Bad input (malformed names, quantities outside 1..2^53-1, more than
// MaxItems items, SKUs of different slot groups) is refused with ErrInvalid
// or ErrCrossGroup before anything is sent to Redis.
//
// # Retention: the idempotency window
//
// OPERATION MARKERS EXPIRE AFTER THE IDEMPOTENCY WINDOW (WithIdempotencyWindow,
// default 24h). A retry after the window is a NEW operation: an order ID
// re-sent after 24h is deducted again. Keep retries of one operation within
// the window, and use order IDs that are never reused.
//
// Reservation markers are kept for the hold's TTL plus the window; a marker
// touched by Confirm, Cancel or Refund is kept for a window from then. Refund
// needs the order's marker: it works within the window after the order was
// placed or confirmed.
//
// Journals grow until trimmed: Checkpoint appends an entry carrying the
// levels, and Trim deletes the entries before the last checkpoint (wallet's
// Checkpoint trims as it writes; here the two are apart because consumer
// groups may hold the trim back), except
// those a consumer group (Consume) has not yet acknowledged and that are
// younger than the holdback (WithJournalHoldback, default 7 days). So an
// abandoned group holds back the trim for the holdback at most; after
// that, each Trim that deletes entries a group had not read or acknowledged
// counts the group in redkit.stock.journal.overrun, and the group's
// consumers, back, skip those entries. A consumer name stays in its group
// until a running Consume of the group finds it idle for ForgetIdle
// (default 1h) with nothing pending and removes it; a consumer whose
// entries are pending stays until another takes them over (MinIdle). Per-buyer
// counters live as long as the buyer holds units of the SKU, and no
// longer than the sale: CloseSKU (ending the sale for good) deletes them all,
// since they only judge the limit of new orders, and what a closed SKU
// still does (confirm, cancel or expire a hold, refund, write off) needs
// none. A transfer between buckets keeps an out-record until it finishes.
// SKU hashes live until deleted by the operator. Nothing else is kept.
//
// # What survives which fault
//
//   - Lost replies, timeouts, connection resets, go-redis re-sends: nothing
//     is applied twice; the caller gets the first decision or
//     ErrUnknownOutcome (resolved by calling again with the same ID).
//   - A lost reply followed by a refused dial (the port cut), LOADING (a
//     restart with a large AOF), a pool timeout, BUSY (a slow script) or,
//     on a Cluster, MOVED (the slot moved): the write may have run, so the
//     caller gets nil or ErrUnknownOutcome joined with that last error,
//     never the bare error, also with go-redis's own re-sends on; the same
//     ID then returns the first decision (TestContract/lostReplyThenFault,
//     TestContract/lostReplyThenSlotMoved). A refusal (ErrSoldOut,
//     ErrBuyerLimit, ErrStaleFence, *ConflictError...) is a decision: final.
//     A bare transport error, without ErrUnknownOutcome, means nothing was
//     sent: the client sends each command once (MaxRetries -1; MaxRedirects
//     -1 on a Cluster) and none reached Redis, or the failing command was a
//     read before the write (TestContract/nothingSent). Retry it freely.
//   - A Redis crash with appendonly yes, appendfsync always and
//     no-appendfsync-on-rewrite no: every acknowledged operation survives
//     the restart. With appendfsync everysec about the last second of
//     acknowledged operations can be lost (with no-appendfsync-on-rewrite
//     yes, up to ~30 s while an AOF rewrite or RDB save runs, even with
//     always); with AOF off, everything since the last snapshot (or the
//     last one that worked, with stop-writes-on-bgsave-error no). Check
//     reports these settings.
//   - Failover to a replica: writes not yet replicated are lost, including
//     their markers, so a retry of such an operation is applied again on the
//     new primary (it is then applied once there). WithReplicaAck narrows
//     this to writes the call was told were not acknowledged.
//   - Resharding (a group's slot migrated while orders run, in batches or
//     key by key): MOVED, ASK, TRYAGAIN and CLUSTERDOWN mean the command
//     did not run where it was sent; redkit re-sends it, with the same
//     operation ID, after the client's slot map is reloaded, for up to
//     WithClusterBudget (default 5s, never past ctx), and in
//     DeductBatch only the orders that got such a reply. No such reply
//     reaches the caller (TestDeduct_Cluster_underResharding; Reserve,
//     Confirm, Cancel, Restock, a SKU split into buckets and DeductBatch in
//     TestWritePaths_Cluster_underResharding); past the budget the error
//     follows the contract above.
//   - Cluster failover (CLUSTER FAILOVER plain, FORCE or TAKEOVER, or a
//     master killed and its replica promoted) on an ordinary ClusterClient:
//     WithReplicaAck writes follow the redirection to the new master at
//     once; an error returned meanwhile (ErrReplicaAck, ErrUnknownOutcome)
//     is resolved by calling again with the same ID, and each order is
//     applied once (TestChaos_Cluster_failover, under make chaos).
//   - A master killed for good (left down, or back on another port) while
//     the client's slot map still names its address: a refused dial, EOF,
//     reset or i/o timeout there is sent again, on a map reloaded at once
//     (at most once per 100 ms per client), within WithClusterBudget. A
//     call made while the cluster fails over waits for it within the
//     budget; the first call after every live node agreed on the new
//     master succeeds, on go-redis defaults and send-once, with and
//     without WithReplicaAck, Level too (TestDeduct_Cluster_masterKilledForGood;
//     a call whose deadline ends within go-redis's dial retries to the dead
//     address, 5 dials 100 ms apart, fails, and the next call reloads the
//     map before its first attempt),
//     and a refill after a failover of another bucket's shard reads the
//     buckets on a reloaded map (TestDeduct_Cluster_bucketRefillAfterFailover).
//     TestChaos_Cluster_recovery measures each Cluster fault (README).
//   - maxmemory-policy other than noeviction: Redis may evict SKUs, markers
//     or journals. Check reports it as critical.
//
// # Slot groups and keys
//
// A SKU "group/name" belongs to slot group "group"; a SKU without '/' is its
// own group. All keys of a group share one hash tag, so one script can touch
// them on a Redis Cluster; the SKUs of one order must share a group
// (ErrCrossGroup otherwise). Keys, with <p> the key prefix (WithKeyPrefix,
// default "redkit") and {g} the group:
//
//	<p>:stock:v1:{g}:sku:<sku>      hash: levels, counters, settings
//	<p>:stock:v1:{g}:buyers:<sku>   hash: units per buyer (SKUs with a limit)
//	<p>:stock:v1:{g}:journal:<sku>  stream: one entry per change
//	<p>:stock:v1:{g}:holds:<sku>    sorted set: reservation deadlines
//	<p>:stock:v1:{g}:op:<op ID>     hash: an operation's decision (expires)
//	<p>:stock:v1:{g}:ack            written before WAIT (WithReplicaAck); expires after a minute
//
// A SKU split into buckets has those keys (markers included: an order's
// marker lives in its buyer's home bucket, a restock's or write-off's in the
// bucket of its ID; the claim of every ID lives in the op:<ID> hash of {g},
// fields ck, cb, ci) under each bucket's tag {g#k}, plus per bucket:
//
//	<p>:stock:v1:{g#k}:transfers:<sku>  hash: transfers out, not yet finished,
//	                                    and the last number given to each bucket
//
// The scripts are in the scripts directory of the module (also returned by
// Scripts); each file's header documents its KEYS, ARGV and reply.
//
// # Upgrades
//
// Key schema v1 (the "v1" in every key) is unchanged by this version: the
// scripts store markers, journal entries, holds and counters in the same
// formats as before, so instances of this version and of the previous one
// can run side by side during a rolling upgrade, each reading what the
// other wrote. Until every instance runs this version, a Trim run by an
// older instance lets consumer groups hold back the trim without the
// holdback bound, and an older CloseSKU leaves per-buyer counters (a
// CloseSKU of this version, even of a closed SKU, deletes them). Consumers
// of one group keep each journal's order only once all of them run this
// version: an older one reads new entries while older ones are pending,
// and takes over idle entries in any order. The
// scripts are loaded by their SHA, so both versions' scripts coexist in
// the server's script cache.
//
// # Redis ACL
//
// redis.acl, next to this file, is a least-privilege Redis ACL user for this
// package (the commands and key patterns it uses, for the default key
// prefix); SECURITY.md at the repository root explains it.
package stock
