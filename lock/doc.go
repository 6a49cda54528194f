// Package lock provides distributed mutexes on Redis whose leases carry
// fencing tokens, renew themselves, tell you when they are lost, and wake
// waiters by notification instead of polling.
//
//	locks, err := lock.New(rdb)            // one per process; locks.Close() on shutdown
//	if err != nil {
//		return err                         // an invalid option: ErrInvalid, at start
//	}
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
//     greater than every earlier token of the same name. The tokens come
//     from one counter per Redis Cluster hash slot, shared by every name
//     whose keys live in that slot (on a single server as on a Cluster), so
//     no state is kept per name forever: a name's tokens strictly increase
//     but are not consecutive, and compare only with tokens of the same
//     Fence.Name. A Mutex (fair or not) and an RWMutex's write leases of one
//     name draw from the same counter, so a resource fenced by both compares
//     tokens of one sequence. Tokens stay at or below 2^53-1, the largest
//     integer the scripts hold exactly: an acquire that would draw a larger
//     one fails with an error and writes nothing (at a million acquisitions
//     a second a counter needs 285 years to get there). A resource that
//     remembers the highest token it has seen — with FenceLua inside a Redis
//     script, or CheckFence — refuses writes from a holder whose lease has
//     since passed to someone else (ErrStaleFence). This is what makes the
//     lock safe against a holder that pauses (GC, VM freeze, swap) past its
//     TTL: without the fence such a holder's late write silently overwrites
//     the new holder's work.
//   - Lease.Context is cancelled as soon as the lease may be lost: on a
//     renewal that finds the lock expired or taken, and at Lease.Until, a
//     deadline on this process's monotonic clock that is never after the
//     lock's expiry in Redis. The acquire, each renewal and each Extend set
//     the TTL from when Redis runs them, which is no earlier than when they
//     left this process; the last of them to run ran after the latest one
//     known to have run had left. Until is the earliest expiry that last
//     one can have set, over every send that may be it (in flight, failed
//     without an answer, or answered but not known to have run before
//     another), minus a drift allowance of 1% of its TTL plus 2ms. So a
//     renewal that sets a shorter TTL than the lock has (WithMaxHold's last
//     renewals, after an Extend) lowers Until as soon as it leaves, and a
//     reply raises it only when no send with a shorter TTL may still run.
//     The deadline is enforced by a local timer, so the context ends even
//     when Redis cannot be reached. Err gives the reason.
//   - The watchdog renews every lease at TTL/3 (WithWatchdog(false) turns it
//     off; WithMaxHold bounds the total hold). Release stops the renewals
//     first, without waiting for one in flight (an extend that arrives after
//     the release finds nothing to extend), and is bounded by
//     WithReleaseTimeout as closely as go-redis honours context deadlines:
//     with ContextTimeoutEnabled false (go-redis's default) a command
//     already sent waits for its reply up to the client's ReadTimeout
//     whatever the deadline, so against a Redis that does not answer a
//     Release can take up to about one ReadTimeout (3s by default) longer
//     than the release timeout; with it on, the release timeout bounds it.
//   - Retries are safe. The scripts are idempotent by owner ID: an acquire
//     re-sent after a lost reply recognises its own owner ID and succeeds
//     with the same token. A release writes nothing to remember itself. Its
//     answer is decided by what the send that answered found in Redis and
//     by whether the lease was certainly held when that send ran: the send
//     ran before its reply came, so a reply that came before Until (to a
//     Release called before the lease ended) ran while the lock was this
//     lease's, unless an earlier send of the same release had deleted it.
//     Release returns nil when a send found the lock this lease's and
//     deleted it, and when the send that answered found it gone or taken
//     before Until while an earlier send of it may have run (a reply lost
//     to the lock's own retry, or a client that re-sends by itself, as
//     go-redis does with MaxRetries above 0): that earlier send ran while
//     the lease held, found the lock, and deleted it, whether the lock is
//     now free or already a waiter's. Otherwise it returns ErrLeaseExpired
//     (nobody holds the lock) or ErrLeaseTaken (another owner does): when
//     the reply came at or after Until (the send may have waited for a
//     pooled connection or on a paused server, and the lease ended before
//     it ran: when Release was called does not matter), when no earlier
//     send can have run, and whenever the script sees that no earlier send
//     can have deleted the lock: another holder's token is not above the
//     lease's, or nobody holds it and the fence counter is below the token
//     (Redis lost the acquisition: a restart without persistence, a
//     failover), or a permit or read lease is still there, expired. So nil
//     means this release ended the hold, on go-redis's defaults and on a
//     client that sends once (barring a loss by Redis that leaves no trace:
//     see below); the other way round, a release whose deleting send's
//     reply was lost and whose answer came after Until reports
//     ErrLeaseExpired or ErrLeaseTaken although it did. The scripts compare only state that
//     exists anyway (the lock's value, the fence counter, a permit's
//     expiry); nothing is written per release. When an acquire's
//     outcome stays unknown (the caller's context ended mid-call, the reply
//     was lost), the lock it may have created is deleted before the call
//     returns; when Redis does not answer that either, the Client keeps
//     trying in the background (backing off to 1s) until Redis answers,
//     the Client closes or the lock has expired anyway, so no lock is left
//     held by nobody until its TTL once Redis answers again. A Release that
//     returns an error is retried the same way.
//   - A waiter that gives up, at any step (its context ends during an
//     attempt, while it subscribes, while it waits; the Client closes; an
//     attempt fails), withdraws what its attempts announced (an RWMutex
//     writer's waiting mark, a fair-mode queue entry) before Acquire
//     returns, in one round trip, or in the background as above when Redis
//     does not answer.
//   - Waiting costs no polling, and no wake-up is sent when nobody waits. A
//     refused attempt of a caller that will wait marks the lock as waited
//     for (one byte of the lock's own value, so the mark lives exactly as
//     long as the lock; a Semaphore's mark expires with the permits held
//     when it was set; an RWMutex writer's waiting mark serves its readers'
//     releases); a release publishes on the name's channel only when it
//     finds the mark, and a lock taken by a caller that had waited, or by
//     an Acquire while other goroutines of its process wait for it, starts
//     marked, since others wait behind it. Each Client has one
//     subscriber connection (one per primary on a Cluster, with
//     SSUBSCRIBE/SPUBLISH, moved when a slot moves), a waiter is subscribed
//     before its next attempt so a release cannot slip in between, and each
//     release wakes at most one waiter of the process (local FIFO). Every
//     wait is capped by the holder's remaining TTL, so a crashed holder
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
//     FairHeartbeat) is evicted after FairEviction. The queue expires
//     FairEviction after the last heartbeat of any waiter, so waiters that
//     crashed leave nothing behind even when nobody locks the name again.
//   - RWMutex: many readers or one writer, writer-preferring: a waiting
//     writer stops new readers, however many writers wait and whatever TTLs
//     its readers and writers use (each waiting writer's mark lives until
//     two of its TTLs after the holders it waits for end, each attempt sets
//     it again, and a writer that takes the lock or gives up removes only
//     its own). Write leases are
//     fenced, from the Mutex's counter of the same name; read leases are
//     not.
//   - Semaphore: N permits, each a Lease that expires if its holder dies.
//     Permits are not fenced.
//   - Redlock (NewRedlock): a mutex over N independent masters that holds
//     when a majority granted it in time. An acquire, a renewal and a
//     release are decided by the answers in hand: they return as soon as
//     the answers of a majority decide them, and a master that has not
//     answered within 5% of the TTL counts as failed (what it grants late
//     is given back when the acquire failed). So a silent minority costs
//     nothing when the others agree and at most 5% of the TTL otherwise,
//     and a lease keeps at least 95% of its TTL, less the drift allowance,
//     as validity. Each acquire attempt has an owner ID of its own, so
//     what a failed attempt gives back, late, never touches the lock of a
//     later attempt of the same Acquire. A release needs a majority's
//     answers (else Release returns the error) and returns nil when a
//     majority released the lock, or when those answers came before Until
//     and one master released it (or a master's client may have sent it
//     twice); on every master that failed or has not answered it is sent
//     again in the background until that master answers. Its leases are
//     fenced across the masters (see "Redlock's fencing token" below, with
//     what that costs); it waits by polling only.
//
// All hand out the same *Lease, with the same lifecycle.
//
// # Redlock's fencing token
//
// Each Redlock master keeps the fence counter a Mutex keeps (its slot's
// tokens key on that master, permanent). A master's grant draws its counter
// once (acquire.lua's INCR; a re-sent grant that finds the lock already the
// attempt's returns the value stored with it, however often go-redis sends
// it). The lease's token T is the largest value the granting masters drew.
// When a majority drew exactly T, the lease is returned at once. Otherwise
// a second round, redlock_raise.lua, sets the counter of each other master
// to max(counter, T) and answers whether the lock there is still the
// attempt's; the lease is returned only when the masters that drew T and
// those that answered that they hold it make a majority, within the
// lease's validity. If not, the attempt fails and gives back what it got,
// like any attempt without a majority (ErrUnknownOutcome when a raise ran
// but its answer was lost). A granting master that answers after the lease
// was returned is raised to T in the background, so that the next acquire
// finds the counters equal.
//
// Why tokens strictly increase from one holder to the next: a lease L is
// returned with token T only when a majority of masters each had, at a
// moment when the lock there was L's, a counter at T or above. A lease L'
// that follows L (Redlock's exclusion orders leases: L' is granted after
// L's validity) was granted by a majority too, and two majorities of the
// same masters share a master m. A master holds the lock for one owner at a
// time, and L' holds its grant on m through its own validity, which ends
// after L's, so m granted L' after L's lock there had ended, when its
// counter was already at T or above: L' drew more than T there, and its
// token T' is at least that. Counters only grow (INCR and max), so this
// holds however many leases come between. Tokens of a name are not
// consecutive (attempts that fail draw too, and a master's counter is
// shared by every name of its slot) and compare only with tokens of the
// same name and the same masters: do not fence one resource with a Redlock
// and a Mutex of the same name.
//
// What it rests on: the assumptions of Redlock's exclusion (bounded pauses
// and delays, clocks running at about the same rate) and masters that keep
// their counters. A master restarted without persistence (or with
// appendfsync other than always, losing its last writes), or whose data was
// evicted or deleted, comes back with its counter at 0. Keeping it out for
// one TTL, as Redlock's exclusion asks, restores the exclusion but not the
// counter: m above may be that master, and when the others of the next
// majority missed the acquisitions that had raised it, the next token is
// at or below tokens already handed out. A resource that saw those refuses
// the new holder (ErrStaleFence) until tokens pass them, and would take a
// late write from an earlier holder carrying a higher token
// (TestRedlock_Fence_withoutPersistence). Run every master with AOF and
// appendfsync always; Redlock.Check reports a master whose settings can
// lose the counter.
//
// Cost: the first round is the acquire it always was (the same script, one
// round trip on each master). When the masters' counters differ (a master
// missed acquisitions: it was down, partitioned, slow, or its grant came
// late), the masters whose grant drew less than T get a second round trip,
// while the answers of a majority are awaited as in the first. On three
// masters on loopback, with the defaults and send-once clients, an acquire
// took p50 0.50–0.65 ms (p90 0.81–1.26 ms) with the counters equal and
// p50 0.68–1.12 ms (p90 0.98–1.69 ms) with one master ahead before every
// acquire (3 and 5.1–5.2 script calls on the masters; 5 runs of
// go test -count=1 -run 'TestRedlock_Fence_cost$' -v ./lock/ on a shared
// 2-core machine). On Redis, redlock_raise.lua took 13.3–19.7 µs per
// EVALSHA where a master's part of the acquire (acquire.lua, unchanged, the
// Mutex's script, which took 29.2–36.0 µs in its own phase) took
// 39.7–47.8 µs and the bare GET, INCR, SET PX script 20.3–26.2 µs, in the
// same runs (3 runs of go run ./bench/cmd/redkit-bench -scripts -only
// '^lock/(baseline|Mutex acquire$|Redlock)').
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
//     can acquire at once, and the slot's fence counter starts again at 1, so a
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
//   - A loss by Redis that leaves no trace is not told from a release's
//     own earlier send: after a restart without persistence, when the lock
//     is free again and the slot's counter is back at or above the lease's
//     token (others acquired and released names of the slot since), or a
//     permit is gone, a Release answered before Until on a client that
//     re-sends returns nil. A holder that takes its lock again, or whose
//     token others have drawn again, is told (ErrLeaseTaken).
//
// # What survives which fault
//
// Each line names the tests that show it.
//
//   - A reply lost or held back past the read timeout (the command ran): a
//     re-sent acquire gets the same token, also a 15-digit one; a re-sent
//     release reports what happened, with go-redis's re-sends or the lock's
//     own: released when its first send released the lock, expired when
//     the lock had expired with nobody after, taken (the new owner's lock
//     untouched) when another owner had taken it, and it leaves no key
//     behind (TestMutex_TryAcquire_replyHeldBack,
//     TestMutex_TryAcquire_replyHeldBack_largeToken,
//     TestLease_Release_resent, TestLease_Release_resentAfterLostReply).
//   - An acquire whose outcome stays unknown: the lock it may have taken is
//     deleted before the call returns (TestMutex_TryAcquire_unknownOutcomeCleansUp);
//     when the replies of that deletion are lost too, as soon as replies
//     come again (TestMutex_TryAcquire_lostRepliesCleanedUpOnceBack).
//   - A reply lost, then the port cut, a restart answering LOADING, the
//     pool exhausted, BUSY or (CheckFence on a Cluster,
//     TestContract_CheckFence_lostReplyThenSlotMoved) the slot moved, on
//     go-redis's defaults or MaxRetries -1: an
//     acquire returns a lease or ErrUnknownOutcome (the lock it may have
//     taken is given back once Redis answers); CheckFence returns nil or
//     ErrUnknownOutcome, and the same Fence again is accepted. A bare error
//     from CheckFence, without ErrUnknownOutcome, means nothing was sent (a
//     client that sends each command once) (TestContract_TryAcquire_lostReplyThenFault,
//     TestContract_CheckFence_lostReplyThenFault, TestContract_CheckFence_nothingSent).
//   - A Release that got no answer at all (it may not have run): Release
//     returns the error and the release is retried until Redis answers, so
//     the lock is free as soon as replies come again
//     (TestLease_Release_lostRepliesRetriedOnceBack).
//   - A waiter whose context ends while it waits or while it subscribes
//     (its replies slowed): a reader, or the next fair-mode caller, gets in
//     as soon as Acquire has returned (TestRWMutex_writerWithdraws,
//     TestMutex_Fair_withdraw, TestRWMutex_Acquire_giveUpWhileSubscribing,
//     TestMutex_Fair_giveUpWhileSubscribing).
//   - Readers on a longer TTL than a waiting writer, renewed by their
//     watchdog: no new reader is admitted while the writer waits
//     (TestRWMutex_writerPreference_longerReaderTTL). A second waiting
//     writer still waiting, slowly, after the first took the lock and
//     released it: no new reader either
//     (TestRWMutex_secondWaitingWriter_readerStaysOut).
//   - Redis paused (SIGSTOP): the lease's Context ends at Until with
//     ErrRenewFailed, by the local timer (TestLease_Context_redisPaused).
//     Paused when Release is called and resumed after the TTL ran out: the
//     release runs on an expired lock and returns ErrLeaseExpired, in every
//     kind, on go-redis's defaults and on send-once
//     (TestLease_Release_redisPausedPastTTL). A release that waited for the
//     pool's only connection until the lock had expired and another owner
//     had taken it returns ErrLeaseTaken (permits and read leases
//     ErrLeaseExpired), not nil (TestLease_Release_sendWaitedInPool).
//   - An Extend, then the watchdog's last renewals within WithMaxHold: the
//     key's expiry falls and Until with it, so another owner gets the lock
//     only once the lease has ended (TestLease_Until_shorterRenewalLowersIt).
//   - A holder paused past its lease (a goroutine, a process under
//     SIGSTOP): the fence refuses its late write; an unfenced write
//     overwrites the newer holder's (TestFence_Kleppmann,
//     TestFence_Kleppmann_SIGSTOP).
//   - The subscriber connection killed, a holder that dies without
//     releasing: a waiter is woken after the reconnect, or at the holder's
//     TTL (TestMutex_Acquire_afterSubscriberKilled,
//     TestMutex_Acquire_lostNotification).
//   - kill -9 and restart: with AOF and appendfsync always, the lock and
//     its counter survive (TestMutex_restartWithAOF); without persistence
//     both are forgotten, the holder's lease ends at its next renewal and
//     tokens start again at 1 (TestMutex_restartWithoutPersistence); a
//     lease still valid locally then releases with ErrLeaseExpired, not nil
//     (TestLease_Release_afterRedisLostIt), and with ErrLeaseTaken once
//     another process took the name, with the same token again, on
//     go-redis's defaults as on send-once
//     (TestLease_Release_afterRedisLostIt_takenAgain).
//   - Failover: an acquire a replica acknowledged survives it
//     (TestMutex_replicaAck_failover); a required acknowledgement not
//     reached fails the acquire and gives the lock back
//     (TestMutex_requiredReplicaAck_notReached); a lease whose renewals
//     reach the demoted primary ends (TestLease_failover_endsLease).
//   - Resharding (a name's slot migrated while locks are taken): MOVED,
//     ASK, TRYAGAIN and CLUSTERDOWN are re-sent with the same owner ID
//     after the client's slot map is reloaded, for up to WithClusterBudget
//     (5s by default, never past ctx): no such reply reaches the caller,
//     one holder at a time, tokens increasing
//     (TestMutex_Cluster_underResharding; RWMutex, Semaphore and fair mode
//     in TestKinds_Cluster_underResharding). A waiter's channel
//     dropped by the server with its slot is subscribed again on the new
//     owner.
//   - Cluster failover, a dropped subscriber connection: on a Cluster each
//     slot has its own subscriber connection, so the reconnect re-sends
//     channels of one slot only (one SSUBSCRIBE of two slots is refused);
//     after CLIENT KILL TYPE pubsub, a slot migration or CLUSTER FAILOVER,
//     PUBSUB SHARDNUMSUB counts every waiter's channel again and a release
//     wakes its waiter (TestMutex_Cluster_notifyAfterFaults); WithReplicaAck
//     acquires follow the redirection to the new master at once.
//   - A master killed for good (left down, or back on another port) while
//     the client's slot map still names its address: a refused dial, EOF,
//     reset or i/o timeout there is sent again, with the same owner ID, on
//     a map reloaded at once (at most once per 100 ms per client), within
//     WithClusterBudget; the first acquire, extend and release after every
//     live node agreed on the new master succeed, on go-redis defaults and
//     send-once, with and without WithRequiredReplicaAck
//     (TestMutex_Cluster_masterKilledForGood; a call whose deadline ends
//     within go-redis's dial retries to the dead address, 5 dials 100 ms
//     apart, fails, and the next call reloads the map first), an Extend of a lease taken
//     before the kill too (sent again within the lease's Until, asking for
//     what is left of the TTL; TestLease_Cluster_extendAfterMasterKilledForGood).
//     The subscriber connection
//     that died with it reconnects on a reloaded map, so the promoted
//     master counts the waiters' channels and a release wakes them
//     (TestMutex_Cluster_notifyAfterMasterKilledForGood).
//     TestChaos_Cluster_recovery measures each Cluster fault (README).
//   - Redlock with one master of three silent (its replies dropped): with
//     the defaults an acquire and a renewal return at once, decided by the
//     two that answer, and the lease keeps 99% of its TTL; the lock stays
//     exclusive and the release works (TestRedlock_silentMinority). When
//     the two that answer do not make a majority, the acquire fails and
//     gives back what it got (TestRedlock_silentMinority_noQuorum). Two
//     masters down: an error, nothing held (TestRedlock_quorum); a majority
//     that lost the lock ends the lease (TestRedlock_leaseLostWithMajority).
//     One master paused at the release: Release returns as soon as the two
//     others released it, not when the paused master's call ends
//     (TestRedlock_Release_silentMinority_decidedByMajority).
//   - Redlock, the replies of two masters of three lost: the acquire, which
//     ran there, returns ErrUnknownOutcome (a bare error only when no
//     master's part may have run) and what it got is given back once they
//     answer (TestRedlock_TryAcquire_lostReplies_unknownOutcome). A waiting
//     Acquire whose earlier attempts' give-backs are still being retried on
//     a master keeps the lock a later attempt took there
//     (TestRedlock_Acquire_staleGiveBackSparesLaterAttempt). A release that
//     reaches one master of three is no majority: Release returns the error
//     and the other two get the release as soon as they are reachable again
//     (TestRedlock_Release_majorityUnreachable).
//   - Redlock's fencing token strictly increases: two Redlocks (send-once
//     and go-redis's re-sends) taking turns (TestRedlock_Fence_twoClients);
//     a master cut off for some acquisitions, so its counter is behind,
//     raised before the lease is returned, and in the background when its
//     grant comes late (TestRedlock_Fence_masterFallsBehind); masters
//     killed with SIGKILL and restarted from AOF (appendfsync always),
//     between leases and while one is held, which stays exclusive
//     (TestRedlock_Fence_restartsWithAOF); a master stopped (SIGSTOP) for
//     some acquisitions (TestRedlock_Fence_pausedMaster); the reply of each
//     master's grant lost, its counter drawn once however often the grant
//     was sent (TestRedlock_Fence_lostGrantReply); the replies of the
//     raises lost: the lease when the others make a majority at the token,
//     ErrUnknownOutcome and everything given back when not
//     (TestRedlock_Fence_lostRaiseReply); a raise that finds another
//     owner's lock: the counter is raised, that lock left alone, and no
//     lease unless the others make a majority at the token
//     (TestRedlock_Fence_raiseMeetsAnotherOwner); a master killed and
//     restarted from AOF while its grant's or its raise's reply is held
//     (TestRedlock_Fence_restartDuringGrant,
//     TestRedlock_Fence_restartDuringRaise); a lease extended and released,
//     then the next ones above it (TestRedlock_Fence_extendThenRelease);
//     five masters, two of the three at the token killed for good
//     (TestRedlock_Fence_fiveMasters_twoKilledForGood); four clients while
//     each master in turn loses its replies or is stopped, checked with
//     porcupine (TestRedlock_Fence_Linearizable_ConcurrentSafe), and on
//     five masters, two at a time, with two TTLs
//     (TestRedlock_Fence_fiveMasters_Linearizable_ConcurrentSafe); random
//     sequences of acquisitions over masters up, cut, stopped, restarted
//     from AOF and losing replies, checking after each lease that a
//     majority's counters are at its token (TestRedlock_Fence_model; large in
//     TestChaos_Redlock_Fence_model). A Redlock holder paused past its lease
//     while the next one is granted by a majority without the master that
//     had its token: its late write is refused by FenceLua and CheckFence
//     (TestRedlock_Fence_pausedHolderRefused). Without persistence the
//     token can go back (TestRedlock_Fence_withoutPersistence).
//   - Redis paused while the watchdog's renewal is in flight: Release does
//     not wait for the renewal; it gives up after WithReleaseTimeout with
//     ErrUnknownOutcome and the release is retried once Redis answers
//     (TestLease_Release_renewalInFlight_boundedByReleaseTimeout).
//   - Releases nobody waited for publish nothing; a waiter is woken by the
//     release it marked, and a second waiter refused before that release,
//     in this process or another, is woken in turn, long before the
//     holder's TTL (TestMutex_Release_publishesOnlyWhenWaited,
//     TestMutex_Acquire_waiterJoinsBeforeRelease).
//   - A fair-mode waiter killed with SIGKILL while queued: its queue and
//     heartbeat entries expire by themselves (TestMutex_Fair_killedWaiter).
//   - Random sequences of acquire (waiting or not), extend, release and
//     give-ups at any step, with lost replies and a silent Redlock master,
//     over Mutex, fair mode, RWMutex, Semaphore and Redlock: no two
//     conflicting leases are believed held at once, fenced tokens strictly
//     increase, and once every lease is released the lock is free at once
//     (or as soon as lost replies come again) (TestModel_lock; large in
//     TestChaos_Model_lock under RUN_CHAOS=1).
//   - Random lives of one lease of every kind (TTL, watchdog, WithMaxHold,
//     go-redis's defaults or send-once, one pooled connection or several)
//     through Extend, time passing, a slow link, Redis paused, the pool's
//     only connection held and a rival trying the lock, ending in a Release
//     during one of those faults: Until is never after the lock's expiry as
//     Redis has it, no rival acquires while the lease is believed held, and
//     Release returns nil exactly when Redis's keyspace events say it
//     deleted the lock, not when it expired (TestModel_leaseLifecycle;
//     large in TestChaos_Model_leaseLifecycle).
//
// # Keys and retention
//
// All keys of one name share the hash tag of its slot group (the part of the
// name before '/', or the whole name), so every script runs on one Cluster
// slot and related names can be renewed together. The fence counter of a
// name is the one of that slot: its tag is the smallest decimal number that
// Redis hashes to the same slot.
//
//	<prefix>:lock:v2:{<group>}:mutex:<name>          Mutex: owner ID, mark byte, token; always has the TTL
//	<prefix>:lock:v2:{<slot tag>}:tokens             fence counter of every Mutex and RWMutex writer of the slot; permanent
//	<prefix>:lock:v2:{<group>}:queue:<name>          fair mode: waiters by arrival; expires FairEviction after the last heartbeat
//	<prefix>:lock:v2:{<group>}:beats:<name>          fair mode: waiters by eviction deadline; expires with the queue
//	<prefix>:lock:v2:{<group>}:sem:<name>            Semaphore: permits by expiry; expires with the last permit
//	<prefix>:lock:v2:{<group>}:semw:<name>           Semaphore waited-for mark; expires with the permits held when it was set
//	<prefix>:lock:v2:{<group>}:rw:<name>             RWMutex writer (as mutex)
//	<prefix>:lock:v2:{<group>}:rwr:<name>            RWMutex readers by expiry
//	<prefix>:lock:v2:{<group>}:rww:<name>            RWMutex waiting writers by expiry, one entry each; an entry expires 2 writer TTLs after the holders it waits for
//	<prefix>:lock:v2:{<group>}:redlock:<name>        Redlock, on each master (as mutex; the slot's tokens counter there gives the lease's fence)
//	<prefix>:lock:v2:{<group>}:ack                   written before WAIT (replica acknowledgement); expires after 1 minute
//	<prefix>:lock:v2:{<group>}:wake:<kind>:<name>    pub/sub channel (not a key); kind mutex, sem or rw
//	                                                 (a fair-mode message names the owner ID to wake)
//	<prefix>:fence:v1:{<protected tag>}:<name>       highest token seen by a protected resource (FenceKey); permanent
//
// The prefix is "redkit" unless WithKeyPrefix says otherwise. Nothing is
// written per release. Once no lease is held and no waiter is left, the
// only keys that stay are the fence counters, at most MaxFenceCounters
// (16384) per prefix, about 80 bytes each, however many names were ever
// locked (TestMutex_namesUsedOnce_boundedKeys,
// TestMutex_manyPairs_onlyCountersRemain); fair-mode waiters killed while
// queued leave nothing once FairEviction has passed
// (TestMutex_Fair_killedWaiter). A counter must outlive the locks of its
// slot, or tokens would start again at 1: delete counters only together
// with the protected resources' fence keys.
//
// # Upgrading from layout v1
//
// Layout v1 kept a fence counter per name (token:<name>, permanent) and a
// release tombstone per release (rel:<name>:<owner>, one minute). The v2
// scripts never read v1 keys, and a v1 and a v2 process do not see each
// other's locks, so during the upgrade:
//
//  1. Stop every process that locks with the v1 layout before the first v2
//     process takes a lock (a rolling deploy would let a v1 and a v2
//     process hold the same name at once).
//  2. v2 tokens start again at 1 per slot. A resource fenced with FenceLua
//     or CheckFence keeps the highest v1 token it saw and would refuse v2
//     holders (ErrStaleFence) until their tokens pass it: before starting
//     v2, delete those fence keys (<prefix>:fence:v1:*), or raise each v2
//     slot counter (<prefix>:lock:v2:{<slot tag>}:tokens) to at least the
//     highest v1 token of its slot's names.
//  3. Delete the v1 keys (<prefix>:lock:v1:*) once no v1 process runs; the
//     redis.acl next to this file grants v2 keys only.
//
// # Telemetry
//
// Spans lock.acquire (one per Acquire or TryAcquire, however long it
// waits), lock.release and lock.renew (one per watchdog round, for all the
// leases it renews: background work, a root span linked to each lease's
// lock.acquire; a Redlock lease, renewed on its own, gets a root of its own
// linked the same way; an Extend is a child of the caller's span, or such a
// linked root when ctx holds none). What a call leaves to the background
// (a Release retried until Redis answers, what an acquire that gave up may
// have taken, a Redlock master's late grant given back) is a lock.release
// root per attempt, linked to the span of the call that left it (outcome ok
// when Redis answered, error otherwise; no duration is recorded for it), so
// nothing hangs off a span that has ended. A Redlock master whose grant drew
// less than the lease's token, raised to it after the acquire returned, is
// a lock.raise root linked to the acquire's span the same way
// (TestSpanTree_redlockRaiseInBackgroundIsALinkedRoot). Metrics:
//
//	redkit.lock.operation.duration  s          histogram  redkit.operation (acquire, release, renew), redkit.outcome
//	redkit.lock.wait.duration       s          histogram  redkit.outcome: ok, not_acquired, unknown_outcome, error
//	redkit.lock.hold.duration       s          histogram  from acquire to release or loss
//	redkit.lock.lost                {lease}    counter    redkit.outcome: expired, taken, renew_failed
//	redkit.lock.contention          {attempt}  counter    attempts that found the lock held
//
// Outcomes of release: ok, expired, taken, unknown_outcome, error; of
// renew: ok, expired, taken (the word of the error an Extend returns, or
// of the loss a watchdog round found: taken when some lease of the round
// was held by another owner, else expired when some had expired),
// unknown_outcome (an Extend or renewal whose error wraps
// ErrUnknownOutcome: a Redlock renewal whose masters' answers were lost),
// error (words of the vocabulary every redkit module shares,
// otelx.Outcomes).
// error.type is a sentinel's text (ErrNotAcquired's "lock: not acquired")
// or a Go type, never an error's text that could hold a lock name.
// Every attribute set may also hold redkit.label (WithLabel); names, owner
// IDs and tokens never appear. The global providers are used unless
// WithTracerProvider/WithMeterProvider say otherwise.
// Every duration histogram is in seconds (unit "s") with
// otelx.DurationBuckets as bucket advice: 50µs, 75µs, 100µs, 150µs, 200µs,
// 300µs, 400µs, 500µs, 750µs, 1ms, 1.5ms, 2ms, 3ms, 4ms, 5ms, 7.5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s (a View of the
// program's still overrides them). Tracers and meters carry this module's
// Version as the scope version and otelx.SchemaURL.
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
