// Package pgjournal keeps a book of record of the stock and wallet journals
// in PostgreSQL: every journal entry exactly once in effect, a projection of
// levels, balances and holds updated in the same transaction, and a
// reconciler that compares Redis with the book and explains every
// difference. Redis stays the hot path and makes every decision; the book is
// where stock and money are accounted, and what survives a Redis that lost
// writes.
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	book, err := pgjournal.Open(ctx, pool)        // applies the migrations
//	go book.SinkStock(ctx, inv, stock.Consumer{Group: "book", Name: host, SKUs: skus})
//	go book.SinkWallet(ctx, led, pgjournal.WalletSource{Accounts: accounts})
//	drift, err := book.ReconcileWallet(ctx, led, accounts...)
//
// # Schema
//
// The tables live in one schema (WithSchema, default "pgjournal"):
// stock_entries and wallet_entries (one row per journal entry: its stream
// ID, kind, operation ID, deltas and the levels or balances after it, and
// for the wallet the peer, the memo, the currency a credit or debit named
// and a transfer's source group), stock_levels (per SKU bucket; the view
// stock_sku_levels sums the buckets) and wallet_balances (posted and held
// per account), anomalies, and schema_migrations. Text is stored as it is,
// except a wallet memo holding a NUL byte (valid UTF-8, but not PostgreSQL
// text): its NULs show as U+FFFD in memo and its exact bytes are kept in
// memo_raw. Migrations are plain SQL files embedded in the module
// (migrations/*.sql), applied by Open in one transaction under a
// transaction-scoped advisory lock, so processes starting at once take
// turns and the later ones find the work done; a database migrated by a
// newer build is refused (ErrSchemaTooNew) rather than written to. The
// module's README lists the database, roles and grants to set up.
//
// # Guarantees
//
//   - Exactly once in effect. An entry is the journal's own: the journal it
//     was read from (SKU and bucket, or account), its stream ID, and what it
//     says. The first two are the primary key. An entry seen again with the
//     same content (delivered again after a crash, a lost commit, a consumer
//     taking over) is skipped; one under a booked stream ID with other
//     content is recorded as a reused_id anomaly, never taken for a
//     redelivery (Redis gives IDs out again after a restart without
//     persistence on a clock that went back). Stock entries are booked into
//     the journal stock's Consume read them from (stock.Entry.Journal),
//     whatever SKU a damaged entry names.
//   - One operation, once. The operation ID is a second identity, named as
//     stock and wallet name it: per journal, one entry per kind and
//     operation ID, and for a transfer into a wallet account per kind,
//     source slot group and ID (wallet names a transfer into a group by its
//     source's group and ID, so the same ID from two groups is two
//     transfers, and both are booked). An operation booked under another
//     stream ID (Redis lost the first entry and a retry or a repair applied
//     it again) is recorded as a duplicate_op anomaly, not booked again.
//   - Acknowledged only after commit. SinkStock books each batch that
//     stock's Consume hands over in one transaction and returns, so Consume
//     acknowledges it, only after the commit succeeded. The wallet has no
//     consumer group: SinkWallet reads wallet.Ledger.Entries and keeps each
//     account's position (the last entry it read) in the book, moved in the
//     same transaction as the entries. Each read starts at the entry at the
//     position, which must be there as booked; a journal that holds other
//     content there or no longer holds it, with no checkpoint to explain
//     that, is read again from its start, so entries written below the
//     position are booked too.
//   - Projection = sum of entries. The projection row of a journal is
//     locked, read, advanced by the deltas of the entries booked and written
//     back in the transaction that inserts them; sinks on the same journal
//     take turns on that lock. Each entry's levels before it (its levels
//     after minus its deltas) are checked against the projection; a
//     difference is booked with a gap anomaly, never hidden by resetting the
//     projection.
//   - Nothing skipped silently. An entry the sink cannot read (unknown
//     kind, malformed ID, another SKU's, fields PostgreSQL text cannot
//     hold: invalid UTF-8, or a NUL outside a wallet memo) is recorded as a
//     poison anomaly and left out of the projection; the entries around it,
//     in its batch too, are booked, so a damaged entry takes no other
//     entry with it and never stops the book. A stock entry deleted from its
//     journal after it was handed to the sink (pending, not acknowledged)
//     is acknowledged by stock's Consume without being handed over again;
//     like entries trimmed before they were ever read, it shows up as a gap
//     at the next entry. A wallet entry the sink has not read and that is
//     gone likewise shows as a gap.
//   - The reconciler reports drift, not lag. ReconcileStock and
//     ReconcileWallet compare one consistent view: the book's projection,
//     position and booked entries read in one snapshot (a read-only
//     repeatable-read transaction), Redis's journal from the entry at that
//     position on, and Redis's values read before and after the journal
//     and compared only when both reads agree and the journal holds
//     nothing after the entries read (a change and its undoing around the
//     read, a hold and its void, leave the values equal and the read
//     holding one of them; ErrBusy after five changing attempts). The
//     entries the snapshot lacks are added as the sink will book them
//     (none twice, no duplicate operation, no unreadable entry).
//     When the entry at the position is gone from the journal (a checkpoint
//     trimmed it after the snapshot, or Redis lost it), a difference is
//     compared again from a new snapshot before it is reported. A drift
//     carries the sink's anomalies for the key, the booked entries Redis's
//     journal should hold and does not or holds with other content
//     (BookOnly: writes Redis lost) and the journal entries up to the
//     book's position that the book lacks (JournalOnly).
//
// # What survives which fault
//
//   - Sink killed (kill -9) mid-batch: the transaction rolls back, the batch
//     stays pending in its consumer group and is booked by the next run
//     with the same consumer name (or, after MinIdle, by another consumer).
//     Killed between commit and acknowledgement: the batch comes again and
//     is found booked.
//   - PostgreSQL restarted, killed, or the connection dropped mid-commit:
//     the sink sees an error, reports it to WithErrorHandler, waits (50 ms
//     doubling to WithMaxBackoff) and reads the batch again; a commit whose
//     reply was lost is found booked.
//   - Redis unreachable: the sink retries the same way; nothing is
//     acknowledged that was not committed.
//   - Redis restarted without persistence, or a restore from an old
//     snapshot: the book keeps what it booked and never resets its
//     projection; the journals written again are booked with a gap at
//     their first entry, entries under stream IDs the book holds with
//     other content are reused_id anomalies, and the reconciler reports
//     each key that differs.
//   - A stock journal trimmed past unbooked entries: stock's Trim never
//     does this (it keeps what a consumer group has not acknowledged), but
//     XTRIM by hand, a failover to a replica that lacked entries or a
//     restore can. Detected as gap anomalies and reported by the
//     reconciler.
//   - wallet.Ledger.Checkpoint trims every entry before the checkpoint,
//     read or not: entries it trimmed before the sink read them are lost to
//     the book (the sink books the checkpoint with a gap when the balances
//     moved meanwhile). Checkpoint through Book.CheckpointWallet instead:
//     it books the account's journal to its end first, refuses an account
//     that differs from the book (ErrDrift: the entries behind the
//     difference would be trimmed with the rest), and only then trims, so
//     the trim takes only booked entries. One window stays open, since
//     wallet's Checkpoint takes no bound to trim up to: an entry posted
//     between that booking and Checkpoint's own verification is trimmed
//     too. CheckpointWallet counts the trim against what it knew to be
//     booked and returns ErrTrimmedUnbooked with the count when it took
//     more; the gap and the reconciler report it as before.
//   - Redis lost acknowledged writes (a failover without replica
//     acknowledgement, a restore from an old snapshot): the book still holds
//     them; the reconciler reports the key with the lost entries in
//     BookOnly, and the repairs below give back what can be given back
//     exactly.
//
// Each line is a test: TestSinkStock_killedMidBatch (kill -9 mid-transaction
// and between commit and XACK), TestSink_postgresRestart,
// TestSink_droppedConnectionMidCommit, TestSinkStock_trimmedPastUnconsumed,
// TestSinkWallet_checkpointTrimmedUnbooked, TestCheckpointWallet_booksBeforeTrim,
// TestCheckpointWallet_refusesDrift, TestSink_poisonEntry,
// TestSinkStock_damagedEntryNamingAnotherSKU, TestSinkStock_entryWithoutFields,
// TestSinkStock_reusedStreamID,
// TestSinkWallet_reusedStreamID, TestSinkWallet_positionRewrittenWithEntriesBelow,
// TestSinkWallet_sameIDFromTwoSourceGroups,
// TestReconcile_reportsInjectedDrift, TestReconcile_busySinkNoFalseDrift,
// TestReconcileWallet_changedAndBackDuringComparison,
// TestReconcileStock_changedAndBackDuringComparison,
// TestFailover_lostWritesReconciledAndRepaired (a failover to a replica that
// missed an acknowledged write and one whose replica acknowledgement timed
// out), TestRepairWallet_lostWrites, TestRepairWallet_replaysEveryField,
// TestRepairWallet_crossGroupStepReported, TestRepairWallet_crossGroupAfterWindow,
// TestRepairWallet_afterWindowNotReplayed, TestRepairStock_lostOrders; each
// checks that every entry is booked once, that the projection is the sum of
// the entries and that the reconciler reports exactly the injected drift.
// TestModel_book (and TestChaos_Model_book, its long run) runs random stock
// and wallet operations, retries, sinks, reconciles, repairs and
// checkpoints with these faults drawn at random (sinks killed, PostgreSQL
// killed, Redis restarted without persistence, entries lost in a failover,
// damaged entries), and checks that a key no fault touched is never
// reported, that no repair changes a balance or level that was not lost,
// and that once the sinks caught up every key agrees with the book or is
// reported with the entries behind it.
//
// What cannot be detected: entries trimmed or lost whose deltas sum to zero
// on every level (a reservation and its cancellation, a hold and its void)
// leave no gap and no drift; the book misses them and says nothing. For a
// SKU split into buckets, the reconciler reads only bucket 0's journal for
// the entries not yet booked (stock reads the others only through Consume),
// so the lag of the other buckets shows as drift: reconcile such SKUs when
// the sink has caught up.
//
// # Repair
//
// A repair sends an operation again with the same ID; that is exact only
// while the operation's marker lives (its idempotency window, from
// wallet.Ledger.IdempotencyWindow or stock.Inventory.IdempotencyWindow):
// where the marker survived, it answers and nothing is applied twice; where
// Redis lost it with the write, the replay applies the write once and
// leaves the marker, so the client's own retry within the window is
// answered from it as a replay. A replay after the window would be a new
// operation, applied a second time wherever the first one's effect
// survived, so an entry older than its window less a tenth (a margin for
// this process's clock against Redis's) is never sent. What cannot be given
// back exactly is reported (Repair.Outcome "skipped", ErrUnrepairable),
// never guessed, and its drift stays.
//
// RepairWallet gives back the credits, debits and transfers within a slot
// group of an account that the book holds and Redis lost, with every field
// the client sent (transaction ID, amount, peer, the memo's exact bytes,
// the currency a credit or debit named). It cannot repair openings,
// closings, holds (their TTL is not in the journal) and their captures and
// voids, the steps of transfers across slot groups (the transfer's state
// lives in the source's group, which may have kept its record while the
// destination lost the credit), an operation Redis now refuses (funds
// spent meanwhile), writes lost before the sink booked them, or writes
// Redis lost while keeping their entries.
//
// RepairStock gives back a SKU's deducts that the book holds and Redis
// lost, by calling Deduct again with the same order ID: applied once, its
// marker restored, answered from the marker where it survived. A stock
// journal entry carries one SKU's part of an order, not the order (its
// other items may be on SKUs this book does not keep), and a Deduct with
// the same ID and other items would store a decision the client's own
// retry then conflicts with; so the whole order comes from the caller's
// order records, and an order the caller does not know, or whose buyer or
// quantity differs from the book, is skipped. On a SKU split into buckets
// only bucket 0's lost deducts are found (the reconciler reads that
// journal alone). An order Redis now refuses (the units went to other
// buyers after it lost the sale: ErrSoldOut) is skipped: the buyer was told
// the units were theirs, and restocking or cancelling the order is the
// operator's decision. Reservations and what follows them (confirm,
// cancel, expire, refund: a hold's deadline is not in the journal and each
// step needs the hold), restocks, write-offs, creations, closings and
// transfers between buckets are not repaired; nor is an absolute "set the
// level", which would oversell against orders in flight. Each is reported,
// never guessed.
//
// # Scope of IDs
//
// The book identifies a journal by SKU and bucket or by account, not by the
// key prefix: one schema books one stock.Inventory and one wallet.Ledger
// key prefix. Use a schema per prefix (WithSchema). An operation is
// identified per journal by its kind and ID, and a transfer into a wallet
// account also by its source's slot group. An ID used again after its
// idempotency window names a new operation in stock and wallet, but the
// book, which does not know the window, takes it for an operation applied
// twice: it records a duplicate_op anomaly and the reconciler reports the
// key. Use IDs that are never used again.
//
// # Running it
//
// Run one sink per journal: several consumers of one group split a journal
// between them and may book its entries out of order, which the gap check
// reports as gaps. The database role the sink uses needs only the
// privileges listed in SECURITY.md ("PostgreSQL role of the book") and in
// the module's README.
package pgjournal
