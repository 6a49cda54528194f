// Package idgen generates unique 64-bit IDs for a fleet of services: order
// numbers, lock tokens, business keys. No node numbers are assigned by hand,
// and no ID is handed out twice, across restarts, clock steps and Redis
// outages, within the limits stated below.
//
// All generators implement Generator (Next(ctx) (ID, error)). ID is an int64
// with a decimal String form, JSON as a string (JavaScript loses precision
// above 2^53; decoding accepts quoted and unquoted numbers), text and SQL
// support, a 13-character base32 form (Base32) whose lexical order is numeric
// order, and conversion to and from github.com/bwmarrin/snowflake's ID.
//
// # Choosing a generator
//
//   - Sequence: one Redis round trip per value (a script running INCRBY).
//     Values are strictly increasing across every process sharing the name.
//     For fencing tokens and anything that needs strict global order.
//   - Segment: reserves ranges of the same counter and hands them out from
//     memory: tens of nanoseconds per value and one round trip per range, sized to last about 10 s of traffic.
//     Unique across processes, increasing within one Segment, not ordered
//     across processes; values of a range left unused when a process stops
//     are skipped. Create one per name and keep it: creating is free (no
//     goroutine exists while no range fetch is in flight, but for a Redis
//     call given up at its deadline, see Deadlines); Close it when done.
//   - Snowflake: time-ordered IDs in bwmarrin/snowflake's default layout (41
//     bits of ms since 2010-11-04, 10 bits of node, 12 of sequence), 4,096 per
//     ms per node, no Redis round trip per ID. NewLeasedSnowflake leases the
//     node ID from Redis; NewSnowflake takes one you assign.
//
// Sequence and Segment values start at 1 and stay at or below 2^53-1 (Lua
// numbers are doubles; such IDs are also exact in JavaScript). Past that,
// Next returns ErrExhausted.
//
// # What survives what
//
// Segment. While Redis is unreachable a Segment keeps serving the values it
// holds: the rest of the current range plus the range fetched ahead (Runway,
// and the redkit.idgen.runway gauge). The next range is fetched in the
// background once 20% of the current one is used; a background fetch that
// fails is tried again after a backoff (20ms doubling to 1s), by a timer, for
// as long as the current range lasts, whether or not Next is called. When
// the runway is spent, Next returns ErrUnavailable (wrapping the cause)
// within the caller's deadline; the next successful fetch ends the outage. A
// process restart skips what the old process held.
//
// Deadlines. The caller's ctx, WithFetchTimeout and the lease's own bounds
// (TTL/3 per renewal) hold whatever the client's options: go-redis bounds a
// socket read by the client's ReadTimeout, not by ctx, unless the client has
// ContextTimeoutEnabled, so a frozen server (a stopped process, a lost reply)
// would otherwise hold a call for ReadTimeout, or for ever with ReadTimeout
// -1. Each Redis call runs in a goroutine of its own, and the caller gives it
// up when its ctx ends. The call goes on until Redis answers or go-redis
// gives up; what it reserves is then skipped (never handed out, so a lost
// call only skips values, never repeats one), and it costs nothing else: a
// Sequence keeps no record of it, so a reply lost for good (ReadTimeout -1)
// leaves one goroutine waiting however many calls follow
// (TestSequence_Next_replyLostForGood_memoryFlat). A node it leased is
// released at once, on every path that gives up (the lease answered late,
// the clock wait refused, the renewal after the clock wait unanswered), and
// the release is retried until Redis answers it, for up to two lease TTLs
// (TestNewLeasedSnowflake_clockWaitThenRenewalGivenUp_releasesNode). An
// acquire whose reply was lost (or answered late with an error) may have
// leased a node nobody knows: it is sent again in the background with the
// same owner ID, which names the node that owner holds, and that node is
// released the same way (TestNewLeasedSnowflake_acquireReplyLost_releasesNode).
// A send of the lost acquire that reaches Redis only after that release
// (held in a queue on the way) leases a node again, until its TTL. A
// renewal is simply tried again. Close (Segment's, Snowflake's) cancels
// what it waits for and does not wait for such a call.
//
// Counters going backwards. Every fetch (and every Sequence call) passes the
// highest value that generator has reserved; a counter found below it (the
// key was deleted, restored from an old backup, lost in a failover, or set
// below zero) is set to the end of the new range, above it, in the same
// script. Calls of one Sequence run concurrently, so a call may carry an
// older value than one another call returned while it was in flight; when
// the key was lost in between, the value it gets may be one this Sequence
// already returned: it is refused and the counter moved up again, above
// every value returned. A Segment waits for one fetch at a time (one it gave
// up on may still be running, but its range is never handed out). So one
// Segment or Sequence never repeats itself, whatever happens to the key.
//
// Redis restart. The counter survives a restart only as far as persistence
// goes: with AOF and appendfsync always, fully; otherwise the restarted
// server's counter is behind. Each Segment or Sequence still never repeats
// its own values (see above), but two processes may be handed overlapping
// ranges: values at or below what the counter held when it was lost (the
// same holds for a deleted key or a FLUSHALL).
// Sequence.Check and Segment.Check report such settings.
//
// Failover. When the primary has replicas (probed once a minute with INFO
// replication, and again after any failed write) every reservation is
// followed by WAIT 1 in the same round trip, and a range (or Sequence value)
// is used only once a replica has acknowledged it: a failover to that replica
// cannot hand the range out again. Without an acknowledgement within
// WithReplicaAckTimeout the fetch fails (ErrUnavailable once the runway is
// spent) and the reserved range is skipped. Without replicas, or with
// asynchronous replication only, a failover can lose the most recent
// reservations: the processes that made them never repeat their own values
// (see above), but another process may then be given a range that overlaps
// one already handed out. Run with a replica (or AOF with appendfsync always
// and no failover) when that matters.
//
// Acknowledgement needs the connection to the counter's primary, which
// only a *redis.Client (also from redis.NewFailoverClient) or a
// *redis.ClusterClient names. NewSequence and NewSegment refuse any other
// client (ErrInvalid): a *redis.Ring, which also moves a key to another
// shard when it marks one down, and a wrapper (a struct embedding
// *redis.Client) unless it implements ClientWrapper, whose Unwrap returns
// the client the counter then uses. Counting such a client as having no
// replicas would skip the acknowledgement
// (TestCounter_wrappedClient_failover_noDuplicates). Random processes on
// every accepted client type, with calls given up early, a replica cut off
// and healed, and failovers, never hand out a value twice
// (TestModel_failover; large in TestChaos_Model_failover).
//
// "Has replicas" means a replica was connected to the primary
// (connected_slaves of INFO replication) at some probe since the generator
// was made. From then on every reservation waits for a replica's
// acknowledgement, also while none is connected (one resyncing after a
// failover, or cut off by a partition): the fetch fails, a Segment serves
// its runway, and IDs come again once a replica acknowledges. Going on
// without one would let the next failover hand those ranges out again. A
// deployment that drops its replicas for good needs its processes restarted.
// A server whose INFO is refused (an ACL without it, some managed services)
// counts as having no replicas. An INFO answer from a node whose role is
// not master (a stale Cluster slot map after a failover names the old
// master) is refused: the map is reloaded and the master it then names is
// asked, so a failover never makes a generator count no replicas
// (TestCluster_failover_probeOnStaleMaster_noDuplicate).
//
// Resharding and Cluster failover. A reservation with replica
// acknowledgement goes to the slot's master directly and follows MOVED and
// ASK itself (to the node the reply names, the client's slot map reloaded),
// within the call's deadline: after a slot migration or a failover the next
// call succeeds (TestCluster_slotMigrated_withReplicas_recovers), and while
// the counter's slot moves again and again no error reaches the caller
// (TestCluster_underResharding), on a send-once client too (MaxRetries and
// MaxRedirects -1: a reservation that met MOVED, ASK or TRYAGAIN is sent
// again on a reloaded map for up to 5 s, within ctx;
// TestCluster_underResharding_sendOnce); leased Snowflakes keep their
// nodes and renew them while the node table's slot moves
// (TestLease_Cluster_underResharding). A master killed for good, which
// the client's map still names (its address refuses connections): the
// replica probe and the reservation reload the map and ask the master it
// names, so the first Sequence.Next after every live node agreed on the
// new master succeeds, and a Segment fetches its next range
// (TestCluster_masterKilledForGood); a leased Snowflake's renewal, release
// or lease that meets the dead node reloads the map, and is sent again on
// it when it certainly did not run, so the lease is renewed on the new
// master instead of being lost (TestLease_Cluster_masterKilledForGood).
// TestChaos_Cluster_recovery measures each Cluster fault (README).
//
// Snowflake. The wall clock is read once, when the generator starts; elapsed
// time comes from Go's monotonic clock, so wall-clock steps in a running
// process cause no duplicate and no stall. A clock that goes backwards inside
// the process (possible only with a custom WithClock) makes Next wait until it
// has caught up, never repeat an ID; ctx bounds that wait (the value given up
// is skipped). Static nodes (NewSnowflake) have no guard
// against a restart on a clock that went backwards; leased nodes do.
//
// Leased nodes. NewLeasedSnowflake takes a free node ID (0..1023) of the
// service atomically in one script, renews it every TTL/3 in one background
// goroutine and releases it on Close; 1,024 leases fill the table and the
// next start fails with ErrNoFreeNode. The lease stores a high-water time per
// node: renewals raise it to the holder's clock + TTL, release lowers it to
// the last timestamp actually issued. A new holder issues IDs only above it:
// when its clock is behind, it waits up to WithMaxClockWait (default 5s),
// else fails with ErrClockBehind, so a restart on a clock that went backwards
// never reissues IDs. Free nodes whose high-water is below the caller's clock
// are preferred, so waiting only happens when no such node is free; among
// them one is picked uniformly at random, not the lowest nor the first after
// a random start.
//
// Losing the node table. The table lives in Redis: FLUSHALL, a deleted key, a
// restart without persistence or a failover without its latest writes can
// lose the entries of nodes in use. A running generator keeps its node: its
// next renewal (within TTL/3 while Redis answers it) finds the entry missing
// and writes it back, if its lease cannot have expired by then (else it
// fails closed and leases a node anew, as after any loss); from then on no
// other process can take that node. It always stays above its own earlier
// IDs. What remains:
//
//   - A process that leases a node between the loss and that renewal (one
//     starting, or a generator leasing anew) may take a node still in use.
//     The node is picked uniformly at random among the free nodes, so with k
//     such nodes in use it takes one with a chance of k in the number of free
//     nodes, wherever they lie in the table. If it does, both issue
//     IDs on the node, and IDs drawn in the same millisecond with the same
//     sequence number are equal, until the running generator's renewal finds
//     the node taken: it then stops at once and leases another node (at most
//     TTL/3 while Redis answers it; TTL − TTL/10 after its last renewal when
//     it does not).
//   - The high-water marks are lost too: a process that takes a node another
//     process used before the loss is protected from that process's IDs only
//     by the two clocks agreeing.
//
// If renewal fails (Redis down or paused, network cut), Next keeps working
// until TTL − TTL/10 after the last successful renewal was sent, measured on
// the monotonic clock, and then returns ErrLeaseLost: before the lease can
// have expired in Redis, whose expiry counts from when it processed that
// renewal. The error window lasts until a renewal gets through (the node is
// kept when nobody took it in between) or, when another process took the
// node, until a new node is leased; both happen in the background, retried
// every 200ms at most, and Next recovers by itself.
//
// Snowflake.Lease reports the lease for a status page or a health check,
// without a Redis call: the node, until when Next will keep working
// (Until), the last successful renewal, the high-water mark it stored, and
// the error of the last renewal attempt when it failed.
//
// # Why not bwmarrin/snowflake's generator
//
// Its layout (epoch, bit widths) lives in package-level variables that any
// importer may change, and its Generate spins on the clock while holding the
// node's mutex when a millisecond is spent, so every other caller queues
// behind the spinner (worst-case waits of about 10 ms were measured with 8
// goroutines). This package owns the loop: one atomic state word (last ms and
// sequence), a compare-and-swap when a new millisecond starts and an atomic
// add otherwise, no mutex, no allocation. A caller that draws a value of the
// next millisecond waits for it alone: it sleeps when the wait is longer than
// 2ms and otherwise yields the processor (runtime.Gosched) until the
// millisecond starts, because Go's timers cannot wake an idle process sooner
// than about 1ms on Linux, and a sleep that overshoots the next millisecond
// loses that millisecond's 4,096 IDs. The IDs are bit-compatible.
// NewSnowflake with a fixed node is also there for those who assign nodes
// themselves; it has no restart clock guard.
//
// # Keys and retention
//
// With the default prefix "redkit", for a name or service "shop-7/orders"
// (the part before '/' is the cluster hash tag; a name without '/' is its own):
//
//	redkit:idgen:v1:{shop-7}:seq:shop-7/orders     counter of Sequence and Segment
//	redkit:idgen:v1:{shop-7}:nodes:shop-7/orders   node lease table (hash, ≤ 1,024 fields)
//	redkit:idgen:v1:{shop-7}:ack                   written before WAIT (range fetches with replicas); expires after a minute
//
// Counters never expire: a counter that disappeared would restart at 1 and
// only the processes that already used it would notice. The lease table
// expires 24 hours after its last write (any lease, renewal or release); its
// high-water marks only matter to clocks behind them by less than that.
//
// # Telemetry
//
// Spans only around range fetches and lease operations, never per ID. A
// range fetch runs in the background, ahead of need: idgen.fetch is a root
// span of its own, one per range, linked to the span of the Next that
// asked for it. Lease operations are idgen.lease.acquire, .renew and
// .release; the acquire of NewLeasedSnowflake is a child of the caller's
// span, and every lease operation without a caller's span (each renewal,
// a re-lease after a loss, the release at Close) is background work: a
// root span linked to the acquire that leased the node. Metrics, per fetch
// or lease event:
//
//	redkit.idgen.range.fetches              {fetch}     counter    redkit.outcome: ok, error
//	redkit.idgen.range.fetch.duration       s           histogram  redkit.outcome
//	redkit.idgen.range.size                 {id}        gauge      size of the last range
//	redkit.idgen.runway                     {id}        gauge      values a Segment hands out without Redis; redkit.idgen.segment
//	redkit.idgen.lease.operations           {operation} counter    redkit.operation, redkit.outcome: ok, error, lost
//	redkit.idgen.lease.operation.duration   s           histogram  redkit.operation (acquire, renew, release), redkit.outcome
//	redkit.idgen.lease.renew_failures       {failure}   counter
//	redkit.idgen.clock_behind               {event}     counter    redkit.outcome: waited, failed
//
// Every attribute set may also hold redkit.label (WithLabel); never names,
// keys or IDs. The runway gauge has one series per attribute set: a
// Segment given WithSegmentLabel has redkit.idgen.segment, a label the
// program chose (bounded by its number of Segments), and Segments that
// share their attributes (the same labels, or none) report the lowest
// runway among them, so a Segment running dry is never hidden behind
// another; a closed Segment leaves the gauge. The outcomes are words of
// the vocabulary every redkit module shares (otelx.Outcomes), and
// error.type is a sentinel's text ("idgen: unavailable") or a Go type.
// Sequence records nothing of its own: instrument the client with
// otelx.InstrumentRedis.
// Every duration histogram is in seconds (unit "s") with
// otelx.DurationBuckets as bucket advice: 50µs, 75µs, 100µs, 150µs, 200µs,
// 300µs, 400µs, 500µs, 750µs, 1ms, 1.5ms, 2ms, 3ms, 4ms, 5ms, 7.5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s (a View of the
// program's still overrides them). Tracers and meters carry this module's
// Version as the scope version and otelx.SchemaURL.
//
// # Example
//
//	seg, err := idgen.NewSegment(rdb, "order-no")
//	if err != nil { ... }
//	defer seg.Close()
//	id, err := seg.Next(ctx) // errors.Is(err, idgen.ErrUnavailable) while Redis is down and the runway is spent
//
//	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "checkout")
//	if err != nil { ... }
//	defer sf.Close()
//	id, err = sf.Next(ctx) // idgen.ErrLeaseLost while the node lease is not renewed
//
// # Redis ACL
//
// redis.acl, next to this file, is a least-privilege Redis ACL user for this
// package (the commands and key patterns it uses, for the default key
// prefix); SECURITY.md at the repository root explains it.
package idgen
