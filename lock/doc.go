// Package lock provides distributed mutexes on Redis whose leases carry
// fencing tokens, renew themselves, tell you when they are lost, and wake
// waiters by notification instead of polling.
//
//	locks := lock.New(rdb)                 // one per process; locks.Close() on shutdown
//	m := locks.Mutex("payout:merchant-42", lock.WithTTL(10*time.Second))
//	lease, err := m.Acquire(ctx)           // waits; TryAcquire does not
//	if err != nil {
//		return err                         // errors.Is(err, lock.ErrNotAcquired) when ctx ended first
//	}
//	defer lease.Release(ctx)               // works even after ctx is cancelled
//	return callBank(lease.Context(), lease.Fence())
//
// # What a lease guarantees
//
//   - Mutual exclusion while Redis keeps its data: at most one owner holds a
//     name at a time. The owner is a random 128-bit owner ID; release and
//     extend act only when it matches and report released (nil), expired
//     (ErrLeaseExpired) or held by another owner (ErrLeaseTaken). An extend
//     never re-creates a lock that has lapsed.
//   - Every acquisition gets a fencing token (Lease.Fence) that is strictly
//     greater than every earlier token of the same name. A resource that
//     remembers the highest token it has seen — with FenceLua inside a Redis
//     script, or CheckFence — refuses writes from a holder whose lease has
//     since passed to someone else (ErrStaleFence). This is what makes the
//     lock safe against a holder that pauses (GC, VM freeze, swap) past its
//     TTL: without the fence such a holder's late write silently overwrites
//     the new holder's work.
//   - Lease.Context is cancelled as soon as the lease may be lost: on a
//     renewal that finds the lock expired or taken, and at Lease.Until, a
//     deadline on this process's monotonic clock measured from before the
//     acquire (or last renewal) was sent, minus a drift allowance of 1% of
//     the TTL plus 2ms. The deadline is enforced by a local timer, so the
//     context ends even when Redis cannot be reached. Err gives the reason.
//   - The watchdog renews every lease at TTL/3 (WithWatchdog(false) turns it
//     off; WithMaxHold bounds the total hold). Release stops the renewals
//     first.
//   - Retries are safe. The scripts are idempotent by owner ID: an acquire
//     re-sent after a lost reply recognises its own owner ID and succeeds
//     with the same token; a release re-sent after it took effect finds a
//     release tombstone and still reports "released". When an acquire's
//     outcome stays unknown (the caller's context ended mid-call), the lock
//     it may have created is deleted at once, so no lock is left held by
//     nobody until its TTL.
//   - Waiting costs no polling. A release publishes on the name's channel;
//     each Client has one subscriber connection (one per primary on a
//     Cluster, with SSUBSCRIBE/SPUBLISH, moved when a slot moves), a waiter
//     is subscribed before its next attempt so a release cannot slip in
//     between, and each release wakes at most one waiter of the process
//     (local FIFO).
//     Every wait is capped by the holder's remaining TTL, so a crashed holder
//     or a lost message delays a waiter by at most one TTL. WithPolling
//     switches to jittered polling instead.
//   - Cost: an uncontended acquire and a release are one round trip each,
//     fence included. Leases of one slot group due for renewal together are
//     renewed in one script call, and all groups in one pipeline.
//
// # The lock family
//
//   - Mutex, optionally fair (WithFair): waiters queue in Redis in arrival
//     order (server time), only the head is woken, a releaser asking again
//     goes to the back, and a waiter that stops sending heartbeats (every
//     FairHeartbeat) is evicted after FairEviction.
//   - RWMutex: many readers or one writer, writer-preferring (a waiting
//     writer stops new readers). Write leases are fenced; read leases are not.
//   - Semaphore: N permits, each a Lease that expires if its holder dies.
//     Permits are not fenced.
//   - Redlock (NewRedlock): a mutex over N independent masters that holds
//     when a majority granted it in time. No fence, polling only; read its
//     caveats before choosing it over a fenced Mutex on one primary.
//
// All hand out the same *Lease, with the same lifecycle.
//
// # What it does not guarantee
//
//   - Redis replication is asynchronous. If the primary fails before the
//     lock (or the fence counter) reached a replica, the promoted replica
//     does not know it: a second owner can acquire the same name while the
//     first still believes it holds it, and the fence counter can go back,
//     handing out a token that was already used. AOF with appendfsync always
//     protects against a restart of the same server, not against failover.
//     Fencing on the protected side still refuses the older holder when the
//     newer one has written first with a higher token, but a counter that went
//     back defeats it. Use a single primary with AOF for locks you fence, or
//     accept this window.
//   - A Redis restart (kill -9 included) keeps locks and fence counters only
//     as far as persistence goes: with AOF and appendfsync always, all of
//     them; without persistence, none. Then a holder's next renewal finds
//     its lock gone and its Context ends (ErrLeaseExpired), another process
//     can acquire at once, and the fence counter starts again at 1, so a
//     protected resource that recorded higher tokens refuses every new
//     holder (ErrStaleFence) until its fence key is reset.
//   - A lease cannot stop a process that is already past its check: a
//     holder paused (GC, VM freeze) after it looked at Lease.Context but
//     before its write still writes late. Only the fence, checked by the
//     resource itself, refuses that write.
//   - WithReplicaAck (best effort) or WithRequiredReplicaAck waits for
//     replicas to acknowledge each acquire, in the same round trip. It
//     narrows the failover window for acquisitions and fence counters; it
//     does not cover renewals, so after a failover a lease can end up to one
//     renewal interval (TTL/3) earlier on the new primary than its Until.
//   - Fair mode orders waiters that reach the queue; it does not order
//     TryAcquire calls, and a crashed head delays the queue by up to
//     FairEviction.
//   - Mutual exclusion does not cover Redis eviction: run with
//     maxmemory-policy noeviction.
//
// # Keys and retention
//
// All keys of one name share the hash tag of its slot group (the part of the
// name before '/', or the whole name), so every script runs on one Cluster
// slot and related names can be renewed together:
//
//	<prefix>:lock:v1:{<group>}:mutex:<name>          Mutex: owner ID and token; always has the TTL
//	<prefix>:lock:v1:{<group>}:token:<name>          Mutex fence counter; permanent (about 100 bytes per name)
//	<prefix>:lock:v1:{<group>}:queue:<name>          fair mode: waiters by arrival; empty when nobody waits
//	<prefix>:lock:v1:{<group>}:beats:<name>          fair mode: waiters by eviction deadline
//	<prefix>:lock:v1:{<group>}:sem:<name>            Semaphore: permits by expiry; expires with the last permit
//	<prefix>:lock:v1:{<group>}:rw:<name>             RWMutex writer (as mutex)
//	<prefix>:lock:v1:{<group>}:rwr:<name>            RWMutex readers by expiry
//	<prefix>:lock:v1:{<group>}:rww:<name>            RWMutex waiting-writer mark; expires after 2 TTLs
//	<prefix>:lock:v1:{<group>}:rwtoken:<name>        RWMutex fence counter; permanent
//	<prefix>:lock:v1:{<group>}:redlock:<name>        Redlock, on each master (as mutex)
//	<prefix>:lock:v1:{<group>}:redlock-seq:<name>    Redlock counter on each master; permanent, unused for fencing
//	<prefix>:lock:v1:{<group>}:rel:<name>:<owner>    release tombstone; expires after 1 minute
//	<prefix>:lock:v1:{<group>}:ack                   written before WAIT (replica acknowledgement); expires after 1 minute
//	<prefix>:lock:v1:{<group>}:wake:<kind>:<name>    pub/sub channel (not a key); kind mutex, sem or rw
//	                                                 (a fair-mode message names the owner ID to wake)
//	<prefix>:fence:v1:{<protected tag>}:<name>       highest token seen by a protected resource (FenceKey); permanent
//
// The prefix is "redkit" unless WithKeyPrefix says otherwise. A fence
// counter must outlive the lock key, or tokens would start again at 1; the
// counters are the only things the package keeps per name forever. Delete
// one only for a name that will never be locked again.
//
// # Telemetry
//
// Spans lock.acquire, lock.release and lock.renew; histograms
// redkit.lock.wait.duration and redkit.lock.hold.duration (seconds);
// counters redkit.lock.lost (by reason: expired, taken, renew_failed) and
// redkit.lock.contention. Attributes are redkit.outcome and the optional
// WithLabel label; names, owner IDs and tokens never appear. The global
// providers are used unless WithTracerProvider/WithMeterProvider say
// otherwise.
//
// # Errors
//
// TryAcquire returns ErrNotAcquired when the lock is held; Acquire returns
// errors.Join(ErrNotAcquired, ctx.Err()) when ctx ends first. Invalid names
// (1–128 bytes of A-Z a-z 0-9 . _ - : with at most one '/'), TTLs outside
// 10ms..24h, permits outside 1..MaxPermits and bad options are ErrInvalid,
// and nothing is written. A lease's Err is ErrLeaseExpired, ErrLeaseTaken,
// ErrRenewFailed (wrapping the Redis error), ErrReleased or ErrClosed.
//
// # Redis ACL
//
// redis.acl, next to this file, is a least-privilege Redis ACL user for this
// package (the commands and key patterns it uses, for the default key
// prefix); SECURITY.md at the repository root explains it.
package lock
