// Package wallet is a ledger on Redis that never applies a transaction
// twice, never takes an account below its limit, and can prove its
// balances from an append-only journal.
//
//	led, err := wallet.New(rdb) // an invalid option is an error here
//	err = led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY"))
//	err = led.Open(ctx, "shop-7/till", wallet.WithCurrency("CNY"))
//	res, err := led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
//	res, err = led.Debit(ctx, wallet.Tx{ID: "order-9", Account: "shop-7/alice", Amount: 1999})
//	if errors.Is(err, wallet.ErrInsufficientFunds) { ... }
//	res, err = led.Transfer(ctx, wallet.Transfer{ID: "pay-3", From: "shop-7/alice", To: "shop-7/till", Amount: 500})
//	bal, err := led.Balance(ctx, "shop-7/alice") // Posted, Held, Available: 2501, 0, 2501
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
// The order of the checks: a script first looks up the ID, so a replay or
// a conflict is answered before anything else is judged (bounds, the
// fence, funds); then it checks the bounds (ErrInvalid: nothing written,
// nothing remembered, so the same ID may succeed later); then the fence
// (ErrStaleFence, nothing written); and only then decides and stores an
// outcome. Every error a script returns is decided before its first
// write. A refusal for lack of funds, a transfer refused for the bound of
// its running total (which counts what the source holds), and the
// balances a Credit, Debit or Transfer within a group replies with, are
// only decided once every expired hold of the accounts has been released:
// when more have expired than one script releases, the Ledger releases the
// rest and sends the call again, so no refusal is stored, and no balance
// reported, on a view that still counts an expired hold. Balance sweeps
// until no hold is due.
//
// A call whose reply is lost (a read timeout, a dropped connection) is sent
// again by go-redis and by the Ledger itself (WithRetry, default 3 attempts)
// with the same ID, so it is applied at most once. When no attempt got an
// answer the call returns ErrUnknownOutcome joined with the cause; calling
// again with the same transaction gives the definite outcome. Replayed is
// false when only the Ledger's own retry found the first attempt's work.
//
// Every balance change appends an immutable entry (transaction ID, kind,
// deltas, balances after, peer account, memo, and the currency a Credit or
// Debit named) to the account's journal in the same script, so a posting
// can be sent again from its entry alone and be answered from its marker. Verify replays the journal from the last checkpoint (or
// the opening entry) and compares: each entry's recorded balances with the
// sum of the deltas before it; the result with the stored Posted and Held;
// the sums of credits, of debits and captures, of transfers in and of
// transfers out with the stored running totals (a checkpoint carries them);
// the running totals with Posted; the account's record of its newest
// entry with the journal's newest entry; the number of entries replayed
// with the number appended since the start (the stream's entries-added
// counter, which removing entries does not lower; a checkpoint records
// it); and Held with the open hold records and the transfers across groups
// in flight from the account; all read in one step with the balances. So
// a balance or total changed, an entry added or removed (also one whose
// deltas are zero or cancel out with another's), a hold record changed
// behind the scripts' back, or an account hash rolled back to an older
// copy is a *MismatchError. (A server that does not report the stream's
// counter, before Redis 7.0 or the embedded miniredis, or a checkpoint
// written before checkpoints recorded it, leaves the count out: the stored
// layout only gained a field, so its version stays v2.)
// Checkpoint verifies the account first and writes nothing over a journal
// that does not match. TrialBalance sums the running totals of a set of
// accounts, over which transfers net to zero.
//
// # Holds
//
// Hold reserves an amount, checked against Available when placed (as in
// TigerBeetle's pending transfers): Held grows and Available shrinks until
// Capture posts all or part of it as a debit and releases the rest, Void
// releases it, or its TTL (1s..7d, on the server's clock) passes. A hold
// refused (insufficient funds, closed or unknown account) stays refused
// under its ID, also after the account is opened and funded. Each hold
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
// the refusal; so do Open, CloseAccount, Checkpoint, each step of a
// transfer across groups, and the release of expired holds by the hold
// reclaimer and by Recover (WAIT after the sweep, when it released or
// forgot a hold). Two writes do not wait. Balance releases expired holds
// before it reads, but it is a read: a failover that loses that release
// leaves the holds expired on the new primary, where the next call on the
// account releases them first, so no answer changes. And the bookkeeping
// of finished transfers across groups (the source account's mark, the
// in-flight index, the expiry of finished records): a failover that loses
// it makes the next call on the account, or Recover, do it again
// (TestLedger_WithReplicaAck_everyWrite).
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
// group, and Credit, Debit and Transfer share that space (a Debit and a
// Transfer from the same group under one ID conflict). The same ID used in
// two different groups names two different transactions, also when both
// are transfers into one destination group: the destination's record of a
// transfer is named by its source group and ID. Hold IDs are a space of
// their own, per account. Use globally unique IDs (UUIDs, snowflakes) to
// be safe.
//
// # Transfers across slot groups
//
// A Transfer between groups cannot be one script, so it runs in steps, each
// an idempotent script in one group, recorded durably under the
// transaction ID in the source's group:
//
//  1. source: record the transfer and hold the amount (journal
//     "transfer_hold"); refusals (insufficient funds, closed) end here. A
//     destination whose balance or transfers-in total the amount would
//     take out of bounds is ErrInvalid here, before anything is written
//     and not remembered, as inside one group (the Ledger reads the
//     destination just before; should it fill up between that read and
//     step 2, step 2 refuses and the transfer is voided: ErrDestinationFull,
//     a refusal remembered under the ID);
//  2. destination: credit it ("transfer_in"), or refuse for good (unknown
//     or closed account, other currency, no room; ErrTransferExpired when
//     this step comes a whole window or more after step 1, see below);
//  3. source: post the held amount ("transfer_out"), or release it if the
//     destination refused ("transfer_void");
//  4. and 5. forget the bookkeeping after the idempotency window.
//
// The source hold never expires, and once the destination is credited the
// transfer only rolls forward: it ends posted or voided, never both, and
// no money is created or destroyed. A call interrupted midway (crash,
// timeout) leaves the transfer in flight; calling Transfer again with the
// same ID, or Recover, finishes it. Neither is needed for the money to come
// back: every Ledger runs Recover in the background (WithRecovery, once a
// minute by default, one Ledger per prefix per interval), and
// step 1 marks the source account: once a transfer has been in flight
// for 10 seconds (a live call takes a few round trips), the next Credit,
// Debit, same-group Transfer from the source or Balance of it, through any
// Ledger, finishes the transfers of the source's slot group left that
// long, before it returns (the call itself was decided first: a Debit
// refused for funds the transfer held stays refused). Transfers in flight
// when this version was deployed carry no mark: Recover finishes them.
// While a transfer is in flight its amount is held on the source and may
// already be credited at the destination, so a TrialBalance taken
// meanwhile shows it in NetTransfers.
//
// Once step 1 was sent, a call that fails for any reason other than a
// script's answer (a lost connection, a refused dial, its context ending)
// returns ErrUnknownOutcome joined with the cause: a step may have been
// applied, and calling again with the same ID or Recover finishes the
// transfer. The destination keeps its record of a finished transfer for
// two windows; a step 2 that finds no record for a transfer begun a window
// or more earlier refuses it (ErrTransferExpired) instead of crediting:
// it comes from a call stalled that long, or a Recover run that late, and
// the record it does not find may have been one of a transfer finished and
// forgotten meanwhile. Such a transfer is voided, never credited twice.
// Run Recover well within the window.
//
// Each step after the first carries the transfer's identity (its begin
// time and the nonce of the call that recorded it), and the records at
// both ends keep it: a transfer begun under an ID reused after the window
// is credited afresh, never answered from the destination's record of the
// earlier transfer (still kept for its second window), and a call of the
// earlier transfer stalled until then finishes nothing of the new one (it
// ends in ErrUnknownOutcome; its own transfer was finished meanwhile).
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
// ErrHoldNotFound): by the sweep of a later call on the account, and, for
// an account with no hold open, by the expiry of its holds keys (one window
// after its newest decision), so an account nobody calls again forgets
// them on time whichever process decided them and whether it still runs.
// An account with a hold still open keeps its records until a call on it,
// the reclaimer of the Ledger that placed the hold, or the background
// recovery of any Ledger on the prefix (WithRecovery, on by default: it
// sweeps every account whose hold records keep no expiry) releases that
// hold at its expiry; the account field ho counts its open holds (an account
// from before that field is counted once from its records). A transfer across slot groups keeps its records, without
// expiry, while it is in flight, and for one window after it finished (the
// destination's record of it for two).
// Account hashes (a few hundred bytes) are kept for good,
// closed ones too. Nothing else is stored.
//
// # What survives which fault
//
//   - Lost replies, timeouts, client crashes: a posting is applied once or
//     not at all; the caller learns which by calling again with the same ID
//     within the window. A transfer across groups whose caller crashed
//     midway is finished by the next call on its source account once it
//     is 10 seconds old (or by Recover), so its amount does not stay held
//     (TestRegress_Transfer_acrossGroups_cutCallerFinishedWithoutRecover);
//     on a source nobody calls again, by the background recovery of any
//     Ledger on the same Redis and prefix within an interval
//     (TestRegress_Recovery_onByDefault_finishesCutTransferNobodyTouches,
//     the caller killed with SIGKILL). Hold records of an account nobody
//     calls again expire a window after their last decision whatever became
//     of the Ledger that decided them
//     (TestRegress_HoldRecords_quietAccountsForgottenAfterWindow); a hold
//     left open by a killed process is released at its expiry by the next
//     call on its account or, failing one, by the background recovery,
//     and its records then expire too
//     (TestRegress_Recovery_onByDefault_releasesHoldsOfQuietAccount).
//     With recovery off (WithRecovery(0)) and no call on the account, they
//     stay.
//   - A lost reply followed by a refused dial (the port cut), LOADING (a
//     restart with a large AOF), a pool timeout, BUSY (a slow script) or,
//     on a Cluster, MOVED (the slot moved): the posting may have run, so the
//     caller gets nil or ErrUnknownOutcome joined with that last error,
//     never the bare error, also with go-redis's own re-sends on; the same
//     ID then returns the first result (TestContract/lostReplyThenFault,
//     TestContract/lostReplyThenSlotMoved). A refusal
//     (ErrInsufficientFunds, ErrStaleFence, ErrConflict...) is a decision:
//     final. A bare transport error, without ErrUnknownOutcome, means
//     nothing was sent: the client sends each command once (MaxRetries -1;
//     MaxRedirects -1 on a Cluster) and none reached Redis, or the failing
//     command was a read before the first write, such as a cross-group
//     transfer's look at its destination (TestContract/nothingSent).
//   - Redis crash or kill -9: postings acknowledged before it survive only
//     as far as the server's persistence allows. With appendonly yes,
//     appendfsync always and no-appendfsync-on-rewrite no none is lost;
//     with everysec up to about a second of acknowledged postings may be
//     lost (and with no-appendfsync-on-rewrite yes, up to ~30 s while an
//     AOF rewrite or RDB save runs); without AOF everything since the last
//     snapshot. Check reports these settings. A posting is never half applied either way (AOF holds
//     a script's writes as one MULTI/EXEC block).
//   - Failover to a replica: replication is asynchronous, so the last
//     postings the old primary acknowledged may be missing on the new one.
//   - Resharding (a group's slot migrated while postings run): MOVED, ASK,
//     TRYAGAIN and CLUSTERDOWN mean the command did not run where it was
//     sent; redkit re-sends it, with the same ID, after the client's slot
//     map is reloaded, for up to WithClusterBudget (default 5s,
//     never past ctx), and in TransferBatch only the transfers that got
//     such a reply. No such reply reaches the caller, within or across
//     groups (TestLedger_Cluster_underResharding; holds, TransferBatch and
//     fenced postings in TestWritePaths_Cluster_underResharding); past the
//     budget the error follows the contract above.
//   - Cluster failover on an ordinary ClusterClient: WithReplicaAck writes
//     follow the redirection to the new master at once (internal/script's
//     TestRunAck_cluster_followsNewOwner); without acknowledgement, as
//     "Failover to a replica" above.
//   - A master killed for good (left down, or back on another port) while
//     the client's slot map still names its address: a refused dial, EOF,
//     reset or i/o timeout there is sent again, with the same ID, on a map
//     reloaded at once (at most once per 100 ms per client), within
//     WithClusterBudget. A call made while the cluster fails over waits for
//     it within the budget; the first posting after every live node agreed
//     on the new master succeeds, on go-redis defaults and send-once, with
//     and without WithReplicaAck (TestLedger_Cluster_masterKilledForGood;
//     a call whose deadline ends within go-redis's dial retries to the dead
//     address, 5 dials 100 ms apart, fails, and the next call reloads the
//     map before its first attempt).
//     TestChaos_Cluster_recovery measures each Cluster fault (README).
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
//	redkit:wallet:v2:{shop-7}:acct:shop-7/alice     hash: currency, overdraft, posted, held, closed, totals, checkpoint, last entry, open holds (ho), last transfer across groups begun (xt)
//	redkit:wallet:v2:{shop-7}:journal:shop-7/alice  stream: the account's journal
//	redkit:wallet:v2:{shop-7}:tx:<tx id>            string: marker of a posting or same-group transfer (its canonical description, outcome, nonce), expires after the window; hash: a transfer across groups (and markers written before the string form)
//	redkit:wallet:v2:{shop-7}:holds:shop-7/alice    hash: hold ID -> hold record (JSON); expires a window after the newest decision while no hold is open
//	redkit:wallet:v2:{shop-7}:hidx:shop-7/alice     sorted set: hold IDs by expiry, decided ones by when they are forgotten; expires with the holds hash
//	redkit:wallet:v2:{shop-7}:xpend                 sorted set: transfers from this group to others still in flight
//	redkit:wallet:v2:{shop-8}:xin:shop-7/<tx id>    hash: a cross-group transfer's credit at the destination, by source group and ID, with the transfer's begin time and nonce
//	redkit:wallet:v2:{shop-7}:ack                   written before WAIT (WithReplicaAck); expires after a minute
//	redkit:wallet:v2:{recovery}:turn                string: the background recovery's turn (WithRecovery); expires after half the interval
//
// Upgrading a running deployment keeps v2: the stored formats of
// accounts, journals and holds are unchanged (ho and xt are added fields),
// so no key is renamed and nothing is migrated. A marker is a string from
// this version on; the new scripts still read the hash markers older
// versions wrote (their replays and conflicts are answered as before)
// until those expire with their window. During a rolling upgrade, a Ledger
// of an older version that meets a string marker gets a WRONGTYPE error
// for that transaction (nothing is written; calling again through an
// upgraded Ledger answers it), never a second application. Holds placed
// by older versions are counted once (ho) by the first script that needs
// the count, and transfers across groups begun by them carry no xt mark
// (Recover finishes those).
//
// The Lua scripts in scripts/*.lua document their KEYS, ARGV and replies;
// Scripts returns each script as Redis runs it, for use outside Go.
//
// # Telemetry
//
// One span per public call, "wallet.<operation>" (wallet.open,
// wallet.credit, wallet.debit, wallet.transfer, wallet.transfer_batch,
// wallet.hold, wallet.capture, wallet.void, wallet.close_account,
// wallet.checkpoint, wallet.verify, wallet.balance, wallet.entries,
// wallet.trial_balance; wallet.recover, also one per round of the
// background recovery), a child of the caller's span, with redkit.outcome
// and redkit.replayed; refusals are outcomes, not span errors. Background
// work is a root span of its own, linked to what caused it: a Recover
// without a caller's span (each round of WithRecovery's worker) to the
// transfers across groups this Ledger left in flight since the last one
// (ErrUnknownOutcome), and each sweep of the hold reclaimer
// (wallet.reclaim) to the Hold whose expiry it waits for. Metrics:
//
//	redkit.wallet.operation.duration  s           histogram  redkit.operation, redkit.outcome
//	redkit.wallet.operations          {operation} counter    redkit.operation, redkit.outcome
//	redkit.wallet.unknown_outcomes    {operation} counter    writes whose outcome stayed unknown
//
// redkit.outcome is ok (applied), replayed (answered from the idempotency
// record), a refusal (insufficient_funds, account_not_found,
// currency_mismatch, closed, conflict, hold_not_found, hold_expired,
// stale_fence, transfer_expired, destination_full), unknown_outcome,
// invalid, cross_group, replica_ack_missing, mismatch or error: the words
// every redkit module uses (otelx.Outcomes). A failed span's error.type is
// a sentinel's text ("wallet: insufficient funds") or a Go type, never an
// error text that could hold an account or transaction ID. A TransferBatch counts each
// transfer as a transfer. They go to the global OpenTelemetry providers unless
// WithTracerProvider or WithMeterProvider say otherwise. Account IDs,
// transaction IDs and amounts are never recorded; WithLabel adds
// redkit.label.
// Every duration histogram is in seconds (unit "s") with
// otelx.DurationBuckets as bucket advice: 50µs, 75µs, 100µs, 150µs, 200µs,
// 300µs, 400µs, 500µs, 750µs, 1ms, 1.5ms, 2ms, 3ms, 4ms, 5ms, 7.5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s (a View of the
// program's still overrides them). Tracers and meters carry this module's
// Version as the scope version and otelx.SchemaURL.
//
// # Redis ACL
//
// redis.acl, next to this file, is a least-privilege Redis ACL user for this
// package (the commands and key patterns it uses, for the default key
// prefix); SECURITY.md at the repository root explains it.
package wallet
