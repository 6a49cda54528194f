// Package redistest starts real redis-server processes for tests, benchmarks
// and programs, and injects real faults into them.
//
// It never mocks Redis: every server is a child process of the caller,
// listening on a free loopback port with its data in a temporary directory.
// A missing redis-server is an error that carries the install command
// (ErrNotInstalled), never a silent skip: Start returns it and New fails the
// test with it. Set REDISTEST_SERVER to use a redis-server binary other than
// the one on $PATH.
//
// # Entry points
//
// Each topology has a testing.TB entry point that stops everything in
// tb.Cleanup, and a Start function plus Close for TestMain, benchmarks and
// programs:
//
//   - New(tb, opts) / Start(ctx, opts): one server. Options choose AOF,
//     appendfsync, maxmemory-policy and extra config lines;
//     enable-debug-command is "local". s.Client() returns a go-redis client
//     that s.Close closes; s.Version(ctx) returns the server version so a
//     test can require a minimum (v.AtLeast(7, 2)).
//   - NewPair(tb, opts) / StartPair(ctx, opts): a primary and a replica,
//     returned once the replica is synced. p.Sync(ctx) waits until the
//     replica has every write so far.
//   - NewCluster(tb, ClusterOptions{Masters: 3, Replicas: 1}) /
//     StartCluster(ctx, ...): a Redis Cluster whose slots are split evenly
//     between the masters, returned once every node reports cluster_state:ok
//     and all nodes agree. c.Client() returns a *redis.ClusterClient that
//     c.Close closes; c.Masters() and c.Nodes() give the servers.
//   - NewProxy(tb, addr) / StartProxy(addr): a TCP fault proxy in front of
//     any address; clients dial px.Addr() instead.
//
// # Faults and what they simulate
//
// A client that opens a connection first sends its handshake (go-redis:
// HELLO, carrying AUTH and SETNAME, then as its options ask SELECT,
// READONLY, CLIENT SETNAME, CLIENT MAINT_NOTIFICATIONS and CLIENT SETINFO)
// and only then its command: when a fault leaves the handshake unanswered,
// the command is never sent. Each fault below says what it does to a new
// connection's handshake and to a command on a connection already open
// (TestFaults_handshake checks each, for a client that sends once).
//
// On a Server:
//
//   - Kill: SIGKILL, a crash. Writes not yet in the AOF are lost; without
//     AOF everything is lost. Open connections are closed and new ones
//     refused: no command runs.
//   - Restart: start again on the same port and data directory, as after a
//     crash and reboot. With AOF and appendfsync always, every acknowledged
//     write is back.
//   - Pause / Resume: SIGSTOP / SIGCONT, a frozen process (long GC pause,
//     stalled VM). Connections stay open and nothing is answered, so
//     clients time out. A command sent on an open connection waits in its
//     socket and runs at Resume, after its client gave up; a new connection
//     times out in its handshake, so its command is never sent.
//   - KillClients / KillPubSubClients: the server closes every normal
//     (or subscribed) client connection, as a server-side timeout or a
//     restarted middlebox would. Commands in flight fail; replication links
//     are kept. A client that notices the closed connection opens a new one,
//     whose handshake is answered; one that writes on the closed connection
//     gets an error, and its command did not run.
//   - Busy(ctx, d): a Lua script of another client runs for d; once it is
//     past busy-reply-threshold (set it low in Options.Config) every other
//     command gets BUSY. A new connection's HELLO and AUTH are answered,
//     SELECT and CLIENT SETNAME get BUSY (go-redis then gives up the
//     connection before its command); the command itself gets BUSY and
//     does not run.
//   - SlowLoading(ctx, d): every later Restart answers LOADING for about d
//     (filler keys in the AOF's RDB base, key-load-delay), as a primary
//     restarting with a large AOF. A new connection's handshake is
//     answered; its command gets LOADING and does not run.
//
// On a Pair:
//
//   - Failover: the replica is promoted and the old primary becomes its
//     replica (or is killed if paused, or stays down if killed). Afterwards
//     p.Primary is the new primary. It does not wait for the replica to
//     catch up, so writes that were not replicated are lost, as in an
//     unplanned failover; writes acknowledged by WAIT survive.
//
// On a Pair or a Cluster, a node that is killed or paused does to
// handshakes what Kill and Pause do; the other nodes answer them.
//
// On a Cluster:
//
//   - FailoverShard(ctx, key): CLUSTER FAILOVER on the replica of the shard
//     that owns key (needs Replicas ≥ 1), a coordinated failover that loses
//     no acknowledged write. It returns once all nodes agree and every
//     client made by c.Client routes key to the new master.
//   - Failover(ctx, key, mode): CLUSTER FAILOVER, FailoverPlain, FailoverForce
//     or FailoverTakeover, on the first replica of the shard serving key
//     now. KillMaster(ctx, key): kill -9 of that shard's master, returning
//     once the cluster promoted its replica (after cluster-node-timeout:
//     set it low in Options.Config); the node stays down, a failed member,
//     and its address refuses connections. Then Rejoin restarts it on its
//     address (where it answers MOVED), RejoinElsewhere on another port
//     from its data (a host back under a new address: the old one keeps
//     refusing), and Replace puts a new empty replica in its place once
//     every node forgot it (a dead host replaced). KillShard(ctx, key)
//     kills a shard's master and replicas: every node answers CLUSTERDOWN
//     until they rejoin. Clients made elsewhere than c.Client are not
//     told.
//   - MoveSlot(ctx, key): the slot of key moves, with its keys, to another
//     master (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE); clients are not
//     told, so their next command for it meets MOVED.
//   - MoveSlotWith(ctx, key, MoveOptions{Batch, Pause}): the same, Batch
//     keys per MIGRATE (default 10, as redis-cli --cluster reshard; 1 for
//     key by key) with Pause between them: meanwhile the slot's keys are
//     split, and a script over both halves gets TRYAGAIN, a key already
//     moved ASK.
//   - Reshard(ctx, keys, o): MoveSlotWith of each key's slot in turn, again
//     and again, in the background until the returned stop is called (a
//     move in progress is finished); stop reports moves and keys migrated.
//   - FaultRound(ctx, key, pause) and FaultRounds: every failover kind
//     (CLUSTER FAILOVER plain, FORCE, TAKEOVER), a master killed with
//     SIGKILL and its replica promoted three ways (rejoining on its
//     address, rejoining on another port, staying down for good), and a
//     slot move while that node is down, in turn, on the shard of key;
//     NewFailoverCluster starts a Cluster fit for them (a replica per
//     master, a 1 s cluster-node-timeout) with a client.
//   - WhileResharding(tb, ctx, keys, o, workers, work) and
//     WhileFailingOver(tb, ctx, rounds, pause, keys, workers, work): a
//     module's workers run while slots move (Reshard) or shards fail over
//     (FaultRounds); the first fails the test on any error that reaches a
//     worker, on a failed move, or when no slot moved. Fill(tb, ctx, tags,
//     n) puts keys in a slot first so that each move lasts.
//
// MeasureRecovery(tb, ctx, key, fault, run) measures what callers see
// when one of RecoveryFaults (a clean failover, a master killed and left
// down, a master killed and back on another port, a slot migrated, a whole
// shard down and back) hits the shard of key: how long the fault lasted
// until the cluster agreed, how long after that every caller's next call
// was answered, the slowest call and the errors. AppClient makes the
// ClusterClient an application would (the cluster never refreshes it), in
// one of ClientShapes (go-redis defaults, send-once).
//
// Chaos(tb) skips a test unless RUN_CHAOS is set (make chaos) and returns
// CHAOS_SCALE. Contract is the error-contract fault matrix a module runs
// over its writes (Run, and RunChaos for every write under every fault).
//
// Answers calls an operation again until it is answered, as a caller that
// gets an error should, and tallies the calls and the first errors by kind:
// the failover runs use it to show that every error returned is one that
// calling again resolves.
//
// On a Proxy (requests always pass through, so commands run; the faults act
// on replies and connections). The proxy matches each reply to the command
// it answers, and HoldReplies and DropReplies act only on the replies of
// commands that ran: the replies to a new connection's handshake, to MULTI
// and the commands it queues, and errors that say a command did not run
// (NOSCRIPT, MOVED, BUSY, LOADING...; Proxy lists them) pass. So a client
// that connects under these faults still sends its command, and each reply
// lost is that of a command that ran.
//
//   - SetLatency(d): every reply arrives d late, a slow network. The
//     handshake's replies too: with d above the read timeout a new
//     connection times out in its handshake and its command is never sent.
//   - HoldReplies(d): replies are held back d after the command ran; with d
//     above the client's read timeout the client times out although the
//     command took effect, the ambiguous outcome that retries must handle.
//   - DropReplies(true): replies are discarded; the command ran, the client
//     waits until its timeout. Dropped() counts the replies discarded, so a
//     test knows a command ran before it injects the next fault.
//     DropRepliesAfter(n) lets the replies of n commands through first.
//     LostReply(tb, px, call, then) runs call, waits for the lost reply of
//     a command that ran, then injects the next fault (Cut, Kill, Busy,
//     MoveSlot...); it fails the test when call returns first. A reply
//     dropped on a connection the proxy cannot follow (pub/sub, MONITOR,
//     CLIENT REPLY) is not counted, so LostReply never reports it.
//     Beware an EVALSHA whose script the server lacks: its NOSCRIPT reply
//     means nothing ran; it passes, and the EVAL go-redis sends next is the
//     command whose reply is lost.
//   - ResetConnections(): every open connection is aborted with a TCP RST;
//     new connections and their handshakes work.
//   - Cut(true): open connections are closed and new ones refused, a
//     network partition; Cut(false) heals it. No command runs meanwhile.
//
// # Process hygiene
//
// Every child is started with Pdeathsig so it dies with its parent, and is
// recorded in a pidfile (under $TMPDIR/redistest-pids) with its owner's PID
// and start time; leftovers are reaped at the next Start only when their
// owner is dead, so several test binaries can run at once without killing
// each other's servers. A temporary data directory names its owner too
// ($TMPDIR/redistest-<pid>-<start>-<n>), so one whose server has no pidfile
// left (killed for good with Kill) is removed as well once a test binary
// died without Close (a panic, -timeout, SIGINT, SIGKILL).
//
// # Example
//
//	func TestSomething(t *testing.T) {
//		s := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
//		rdb := s.Client()
//		// ... write with rdb ...
//		_ = s.Kill()
//		_ = s.Restart(t.Context())
//		// ... acknowledged writes are still there ...
//	}
package redistest
