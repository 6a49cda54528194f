// Package wallet is a ledger on Redis that never applies a transaction
// twice, never takes an account below its limit, and can prove its
// balances from an append-only journal.
//
//	led := wallet.New(rdb)
//	err := led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY"))
//	res, err := led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
//	res, err = led.Debit(ctx, wallet.Tx{ID: "order-9", Account: "shop-7/alice", Amount: 1999})
//	if errors.Is(err, wallet.ErrInsufficientFunds) { ... }
//	res, err = led.Transfer(ctx, wallet.Transfer{ID: "pay-3", From: "shop-7/alice", To: "shop-7/till", Amount: 500})
//	bal, err := led.Balance(ctx, "shop-7/alice") // Posted, Held, Available
//
// # Accounts and amounts
//
// An account has a currency (WithCurrency, required) and an overdraft limit
// (WithOverdraft, default 0: Available never goes below zero). Amounts and
// balances are int64 minor units (cents, fen) within ±(2^53−1), the range a
// Lua number holds exactly; an amount outside 1..2^53−1, or a posting that
// would take a balance outside ±(2^53−1), is refused with ErrInvalid before
// anything is written. CloseAccount closes an account to new postings for
// good; its balance and journal stay readable. Ledger.Close only stops
// background work.
//
// # Guarantees
//
// Every Credit, Debit, Hold, Capture, Void and Transfer within one slot
// group runs as one Lua script: it checks the input, reads the accounts and
// the transaction marker, and only then writes the new balances, one
// journal entry per account touched and the marker. Redis runs a script
// alone, so concurrent calls never interleave and a posting is all or
// nothing. One round trip per call. (Transfers across slot groups take
// several steps; see below.)
//
// Transactions are idempotent by their caller-chosen ID (as in TigerBeetle):
//
//   - the same ID with the same fields returns the first outcome, with
//     Result.Replayed set and the balances as they were right after it;
//   - the same ID with another kind, account, amount, currency or memo
//     returns a *ConflictError naming the field (errors.Is ErrConflict);
//   - a refused transaction (insufficient funds, closed or unknown account,
//     currency mismatch) stays refused under its ID, even after the account
//     is funded: send a new ID to try again.
//
// A call whose reply is lost (a read timeout, a dropped connection) is sent
// again by go-redis and by the Ledger itself (WithRetry, default 3 attempts)
// with the same ID, so it is applied at most once. When no attempt got an
// answer the call returns ErrUnknownOutcome joined with the cause; calling
// again with the same transaction gives the definite outcome. Replayed is
// false when only the Ledger's own retry found the first attempt's work.
//
// Every balance change appends an immutable entry (transaction ID, kind,
// deltas, balances after, peer account, memo) to the account's journal in
// the same script. Verify replays the journal from the last checkpoint and
// compares it with the stored balance and running totals; TrialBalance sums
// the running totals of a set of accounts, over which transfers net to zero.
//
// # Holds
//
// Hold reserves an amount, checked against Available when placed (as in
// TigerBeetle's pending transfers): Held grows and Available shrinks until
// Capture posts all or part of it as a debit and releases the rest, Void
// releases it, or its TTL (1s..7d, on the server's clock) passes. Each hold
// resolves at most once: a repeated Capture or Void returns the first
// result; the other resolution is a *ConflictError naming "resolution";
// after expiry both return ErrHoldExpired. Every call on an account first
// releases its expired holds (journal kind "hold_expire"), so balances and
// checks never count an expired hold; a background reclaimer (stopped by
// Close) also releases the holds this Ledger placed when they expire.
// Hold IDs are unique per account.
//
// # Fencing, replica acknowledgement, batches
//
// WithFence(lease.Fence()) makes a posting conditional on a lock.Lease
// still being current: the script refuses it with ErrStaleFence, writing
// nothing, once a call carrying a later lease of the same lock has reached
// the account's slot group (for a transfer across groups, the check is made
// at its first step). WithReplicaAck(n, timeout) waits (WAIT, pipelined with the
// script on the primary owning the account) until n replicas have each
// posting, and reports a shortfall with ErrReplicaAck next to the Result or
// the refusal.
// TransferBatch sends many single-group transfers in one pipeline; each
// stays its own atomic, idempotent transaction.
//
// # Slot groups and transaction IDs
//
// Account IDs are 1–128 bytes of A-Z a-z 0-9 . _ - : with at most one '/'.
// The part before the '/' is the account's slot group ("shop-7" for
// "shop-7/alice"; an ID without '/' is its own group): all keys of a group
// share a hash tag, so they live on one Cluster node and one script can
// change them together. A Transfer within a group is therefore one atomic
// script; put accounts that trade often in one group.
//
// A transaction ID has the same grammar and is remembered in the slot group
// of its account (of the source, for a transfer): IDs are unique per slot
// group. The same ID used in two different groups names two different
// transactions; use globally unique IDs (UUIDs, snowflakes) to be safe.
//
// # Transfers across slot groups
//
// A Transfer between groups cannot be one script, so it runs in steps, each
// an idempotent script in one group, recorded durably under the
// transaction ID in the source's group:
//
//  1. source: record the transfer and hold the amount (journal
//     "transfer_hold"); refusals (insufficient funds, closed) end here;
//  2. destination: credit it ("transfer_in"), or refuse for good (unknown
//     or closed account, other currency);
//  3. source: post the held amount ("transfer_out"), or release it if the
//     destination refused ("transfer_void");
//  4. and 5. forget the bookkeeping after the idempotency window.
//
// The source hold never expires, and once the destination is credited the
// transfer only rolls forward: it ends posted or voided, never both, and
// no money is created or destroyed. A call interrupted midway (crash,
// timeout) leaves the transfer in flight; calling Transfer again with the
// same ID, or Recover (run it at start-up, or WithRecovery in the
// background), finishes it. While a transfer is in flight its amount is
// held on the source and may already be credited at the destination, so a
// TrialBalance taken meanwhile shows it in NetTransfers.
//
// # Retention: the idempotency window
//
// A transaction marker expires after the idempotency window
// (WithIdempotencyWindow, default 24h, allowed 1m..30d). AFTER THE WINDOW
// THE SAME ID IS A NEW TRANSACTION: a retry that arrives later than the
// window is applied again. Size the window beyond the longest time a caller
// may retry (queues, batch re-runs), and never reuse IDs on purpose.
//
// Journals grow by one entry per posting until Checkpoint, which appends an
// entry carrying the balances and trims everything older; read what you
// must keep with Entries first. Hold records are forgotten one window after
// they were captured, voided, expired or refused (a Capture after that is
// ErrHoldNotFound). A transfer across slot groups keeps its records, without
// expiry, while it is in flight, and for one window after it finished.
// Account hashes (a few hundred bytes) are kept for good,
// closed ones too. Nothing else is stored.
//
// # What survives which fault
//
//   - Lost replies, timeouts, client crashes: a posting is applied once or
//     not at all; the caller learns which by calling again with the same ID
//     within the window.
//   - Redis crash or kill -9: postings acknowledged before it survive only
//     as far as the server's persistence allows. With appendonly yes and
//     appendfsync always none is lost; with everysec up to about a second
//     of acknowledged postings may be lost; without AOF everything since the
//     last snapshot. A posting is never half applied either way (AOF holds
//     a script's writes as one MULTI/EXEC block).
//   - Failover to a replica: replication is asynchronous, so the last
//     postings the old primary acknowledged may be missing on the new one.
//   - Eviction: with a maxmemory-policy other than noeviction Redis may
//     drop markers (a retry then applies twice) or accounts. Never run a
//     ledger on an evicting instance.
//
// Check reports these settings (see Ledger.Check for what each one costs).
//
// # Key schema
//
// Keys are <prefix>:wallet:v2:{<group>}:<kind>:<id>, with prefix from
// WithKeyPrefix (default "redkit"):
//
//	redkit:wallet:v2:{shop-7}:acct:shop-7/alice     hash: currency, overdraft, posted, held, closed, totals, checkpoint, last entry
//	redkit:wallet:v2:{shop-7}:journal:shop-7/alice  stream: the account's journal
//	redkit:wallet:v2:{shop-7}:tx:<tx id>            hash: transaction marker (outcome, fields, nonce), expires after the window
//	redkit:wallet:v2:{shop-7}:holds:shop-7/alice    hash: hold ID -> hold record (JSON)
//	redkit:wallet:v2:{shop-7}:hidx:shop-7/alice     sorted set: hold IDs by expiry, decided ones by when they are forgotten
//	redkit:wallet:v2:{shop-7}:xpend                 sorted set: transfers from this group to others still in flight
//	redkit:wallet:v2:{shop-8}:xin:<tx id>           hash: a cross-group transfer's credit at the destination
//	redkit:wallet:v2:{shop-7}:ack                   written before WAIT (WithReplicaAck); expires after a minute
//
// The Lua scripts in scripts/*.lua document their KEYS, ARGV and replies;
// PostingScriptSource returns the credit/debit script for use outside Go.
//
// # Telemetry
//
// Spans "wallet.<operation>" and the counters redkit.wallet.operations (by
// operation and redkit.outcome) and redkit.wallet.unknown_outcomes go to
// the global OpenTelemetry providers unless WithTracerProvider or
// WithMeterProvider say otherwise. Refusals are outcomes, not span errors.
// Account IDs, transaction IDs and amounts are never recorded; WithLabel
// adds a label of your choosing.
//
// # Redis ACL
//
// redis.acl, next to this file, is a least-privilege Redis ACL user for this
// package (the commands and key patterns it uses, for the default key
// prefix); SECURITY.md at the repository root explains it.
package wallet
