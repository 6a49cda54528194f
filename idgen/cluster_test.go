package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// counters returns a Sequence seqName and a Segment segName of fixed step
// on rdb; the Segment is closed at the end of t.
func counters(t *testing.T, rdb redis.UniversalClient, seqName, segName string, step int64) (*idgen.Sequence, *idgen.Segment) {
	seq, err := idgen.NewSequence(rdb, seqName)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := idgen.NewSegment(rdb, segName, idgen.WithMinStep(step), idgen.WithMaxStep(step))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seg.Close() })
	return seq, seg
}

// replicatedCluster starts three masters with a replica each and returns
// the Cluster and an ordinary ClusterClient on it (go-redis defaults) that
// nothing refreshes, closed at the end of t.
func replicatedCluster(t *testing.T) (*redistest.Cluster, *redis.ClusterClient) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	return c, rdb
}

// README: "Redis: 7.0 or newer, single node, replicated or Cluster". doc.go,
// Failover: with replicas "every reservation is followed by WAIT 1 ...
// IDs come again once a replica acknowledges"; errors.go: ErrUnavailable
// means "a new range could not be fetched (Redis down, replica
// acknowledgement missing, or ctx ended while waiting)"; "The next
// successful fetch ends it."
//
// Real fault: an ordinary ClusterClient (go-redis defaults), 3 masters with
// a replica each, and the counter's slot migrated to another master (as
// redis-cli --cluster reshard does). Every node is healthy and every replica
// acknowledges. With replicas, reserve goes through script.RunAck, which
// pipelines on the *redis.Client of MasterForKey: the MOVED reply never
// reaches the ClusterClient, whose slot map is never refreshed, so every
// later reservation goes to the old master and meets MOVED again.
func TestCluster_slotMigrated_withReplicas_recovers(t *testing.T) {
	c, rdb := replicatedCluster(t)
	ctx := t.Context()
	seq, seg := counters(t, rdb, "mv/seq", "mv/seq", 5)
	for i := 0; i < 3; i++ {
		if _, err := seq.Next(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := seg.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.MoveSlot(ctx, "redkit:idgen:v1:{mv}:seq:mv/seq"); err != nil {
		t.Fatal(err)
	}
	runway := seg.Runway() // served from memory without Redis
	moved := time.Now()
	segServed := int64(0)
	const budget = 10 * time.Second
	var seqOK, segOK time.Duration
	var seqErr, segErr error
	seqFails, segFails := 0, 0
	for time.Since(moved) < budget && (seqOK == 0 || segOK == 0) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		if seqOK == 0 {
			if _, err := seq.Next(c); err == nil {
				seqOK = time.Since(moved)
			} else {
				seqErr = err
				seqFails++
			}
		}
		if segOK == 0 {
			if _, err := seg.Next(c); err == nil {
				// the runway is served first; a value past it needs a fetch
				// that got through after the move
				if segServed++; segServed > runway {
					segOK = time.Since(moved)
				}
			} else {
				segErr = err
				segFails++
			}
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after the slot moved: Sequence ok after %v (%d failures, last %v); Segment ok after %v (runway %d, %d failures, last %v, ErrUnavailable=%v)",
		seqOK, seqFails, seqErr, segOK, runway, segFails, segErr, errors.Is(segErr, idgen.ErrUnavailable))
	if seqOK == 0 || segOK == 0 {
		t.Fatalf("README \"single node, replicated or Cluster\" / doc.go \"IDs come again once a replica acknowledges\", "+
			"\"the next successful fetch ends the outage\": on a ClusterClient with replicas, after the counter's slot migrated "+
			"(all nodes healthy), Sequence.Next failed %d times in %v (last: %v) and Segment.Next, its runway of %d spent, failed %d times (last: %v); "+
			"reservations keep going to the old master (MOVED) because RunAck's MOVED never refreshes the ClusterClient",
			seqFails, budget, seqErr, runway, segFails, segErr)
	}
}

// doc.go, Failover: "When the primary has replicas (probed once a minute
// with INFO replication ...) every reservation is followed by WAIT 1 ...
// and a range (or Sequence value) is used only once a replica has
// acknowledged it: a failover to that replica cannot hand the range out
// again."
//
// Real faults, in order: a coordinated CLUSTER FAILOVER of the counter's
// shard (an ordinary ClusterClient, go-redis defaults, that no test helper
// refreshes); a Sequence made afterwards probes INFO replication on the
// stale MasterForKey (the old master, now a replica: connected_slaves 0),
// counts no replicas and reserves without WAIT (the script itself goes
// through the ClusterClient, which follows MOVED to the new master). Its
// replica is then frozen (SIGSTOP) and cut off (CLIENT KILL TYPE replica), a value is handed out without any
// acknowledgement, the new master is killed (SIGKILL), the replica resumes and
// is promoted by the cluster: another process is handed the same value.
func TestCluster_failover_probeOnStaleMaster_noDuplicate(t *testing.T) {
	c, rdb := replicatedCluster(t)
	ctx := t.Context()
	const key = "redkit:idgen:v1:{fo}:seq:fo/seq"
	node := func(addr string) *redistest.Server {
		for _, n := range c.Nodes() {
			if n.Addr() == addr {
				return n
			}
		}
		t.Fatalf("no node %s", addr)
		return nil
	}
	m, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	oldMaster := node(m.Options().Addr)
	warm, err := idgen.NewSequence(rdb, "fo/seq")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := warm.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.FailoverShard(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The new master is whoever the old master now replicates.
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer probe.Close()
	nm, err := probe.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	newMaster := node(nm.Options().Addr)
	if newMaster == oldMaster {
		t.Fatal("no failover")
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		n, _ := nm.Info(ctx, "replication").Result()
		if strings.Contains(n, "connected_slaves:1") {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the new master has no replica: %s", n)
		}
	}

	seq, err := idgen.NewSequence(rdb, "fo/seq") // made after the failover
	if err != nil {
		t.Fatal(err)
	}
	v1, err := seq.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Let the replica have v1, then freeze it.
	if err := nm.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := oldMaster.Pause(); err != nil {
		t.Fatal(err)
	}
	// Frozen, and its replication link cut by the master (as a partition
	// would): nothing written from now on reaches it.
	if err := nm.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = oldMaster.Resume()
		}
	})
	c2, cancel := context.WithTimeout(ctx, 3*time.Second)
	v2, err := seq.Next(c2)
	cancel()
	t.Logf("made after the failover: v1=%d, then with the only replica frozen v2=%d err=%v", v1, v2, err)
	if err != nil {
		return // no value without an acknowledgement: as documented
	}
	// The unacknowledged value is lost with the new master.
	if err := newMaster.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := oldMaster.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{oldMaster.Addr()}})
	defer other.Close()
	var v3 idgen.ID
	deadline := time.Now().Add(60 * time.Second)
	for {
		oseq, err := idgen.NewSequence(other, "fo/seq") // another process
		if err != nil {
			t.Fatal(err)
		}
		c3, cancel := context.WithTimeout(ctx, 2*time.Second)
		v3, err = oseq.Next(c3)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica was never promoted: %v (v2=%d was handed out without a replica ack)", err, v2)
		}
		other.ReloadState(ctx)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("after the new master died, another process got v3=%d", v3)
	t.Fatalf("doc.go Failover \"every reservation is followed by WAIT 1 ... a range (or Sequence value) is used only once a "+
		"replica has acknowledged it: a failover to that replica cannot hand the range out again\": a Sequence made after a "+
		"CLUSTER FAILOVER probed INFO on the stale master (now a replica), counted no replicas, and returned %d while the new "+
		"master's only replica was frozen; after the new master was killed and that replica promoted, another process got %d "+
		"(duplicate=%v)", v2, v3, v2 == v3)
}

// TestCluster_underResharding: Sequence.Next and Segment.Next on an
// ordinary ClusterClient, with replicas (so every reservation waits for
// one), while the counter's slot is moved again and again: no error reaches
// the caller and no value is handed out twice.
func TestCluster_underResharding(t *testing.T) {
	c, rdb := replicatedCluster(t)
	ctx := t.Context()
	seq, seg := counters(t, rdb, "rs/seq", "rs/seg", 5)
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	c.WhileResharding(t, ctx, []string{"{rs}"}, redistest.MoveOptions{Batch: 1, Pause: 20 * time.Millisecond}, 4,
		func(w int, fail func(string, ...any)) {
			for i := range 60 {
				kind, next := "seq", seq.Next
				if (w+i)%2 == 1 {
					kind, next = "seg", seg.Next
				}
				v, err := next(ctx)
				mu.Lock()
				if err != nil {
					fail("%s: %w", kind, err)
				} else if k := fmt.Sprint(kind, v); seen[k] {
					fail("%s: %d twice", kind, v)
				} else {
					seen[k] = true
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	t.Logf("%d values", len(seen))
}

// TestLease_Cluster_underResharding: leased Snowflakes on an ordinary
// ClusterClient while the slot of their service's node table is moved
// again and again, key by key with a pause: generators start (leasing a
// node), renew every TTL/3 and close (releasing it) throughout. No error
// reaches the caller (no lease refused, none lost), no two live generators
// hold one node, and no ID is handed out twice.
func TestLease_Cluster_underResharding(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	ctx := t.Context()
	c.Fill(t, ctx, []string{"{rsvc}"}, 10)
	var (
		mu   sync.Mutex
		seen = map[idgen.ID]bool{}
		live = map[int64]bool{}
	)
	c.WhileResharding(t, ctx, []string{"{rsvc}"}, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond}, 4,
		func(w int, fail func(string, ...any)) {
			for round := range 3 {
				s, err := idgen.NewLeasedSnowflake(ctx, rdb, "rsvc", idgen.WithLeaseTTL(time.Second))
				if err != nil {
					fail("lease %d/%d: %w", w, round, err)
					continue
				}
				mu.Lock()
				if live[s.Node()] {
					fail("node %d leased twice", s.Node())
				}
				live[s.Node()] = true
				mu.Unlock()
				// Long enough for a few renewals while slots move.
				for range 40 {
					id, err := s.Next(ctx)
					mu.Lock()
					if err != nil {
						fail("next: %w", err)
					} else if seen[id] {
						fail("%d twice", id)
					}
					seen[id] = true
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
				if st := s.Lease(); st.Err != nil {
					fail("lease status: %w", st.Err)
				}
				mu.Lock()
				delete(live, s.Node())
				mu.Unlock()
				if err := s.Close(); err != nil {
					fail("close: %w", err)
				}
			}
		})
	t.Logf("%d IDs", len(seen))
}

// TestChaos_Cluster_failover: Sequence.Next, Segment.Next and a leased
// Snowflake on an ordinary ClusterClient with a replica per master (every
// reservation waits for one) while the counters' shard is failed over
// again and again (CLUSTER FAILOVER plain, FORCE and TAKEOVER, a master
// killed with SIGKILL and its replica promoted, the slot migrated). A caller
// that gets an error calls again: no value is handed out twice.
func TestChaos_Cluster_failover(t *testing.T) {
	scale := redistest.Chaos(t)
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	seq, seg := counters(t, rdb, "fi/seq", "fi/seg", 20)
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "fi", idgen.WithLeaseTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	answers := &redistest.Answers{Tries: 100, Timeout: 5 * time.Second, Kinds: map[string]error{
		"unavailable": idgen.ErrUnavailable, "lease lost": idgen.ErrLeaseLost}}
	kinds := []string{"seq", "seg", "snowflake"}
	nexts := []func(context.Context) (idgen.ID, error){seq.Next, seg.Next, sf.Next}
	var (
		mu      sync.Mutex
		repeats int
		seen    = map[string]bool{}
	)
	faults := c.WhileFailingOver(t, ctx, scale, 300*time.Millisecond, []string{"{fi}"}, len(kinds), func(w, _ int) bool {
		kind, next := kinds[w], nexts[w]
		var v idgen.ID
		if ok, err := answers.Call(ctx, func(ctx context.Context) (err error) {
			v, err = next(ctx)
			return err
		}); !ok {
			t.Errorf("%s never answered: %v", kind, err)
			return false
		}
		mu.Lock()
		if k := fmt.Sprint(kind, v); seen[k] {
			repeats++
		} else {
			seen[k] = true
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return true
	})
	t.Logf("%d faults: %d IDs, %d calls failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | idgen Sequence/Segment/Snowflake | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), repeats)
	if repeats > 0 {
		t.Fatalf("%d values handed out twice", repeats)
	}
}

// TestCluster_underResharding_sendOnce: Sequence and Segment on a Cluster
// without replicas (no replica acknowledgement: the reservation goes
// through the ClusterClient), on go-redis defaults and on a send-once
// client (MaxRetries and MaxRedirects -1), while the counter's slot moves
// again and again key by key: no error reaches the caller and no value is
// handed out twice. Before, on send-once, most calls returned a bare ASK or
// MOVED.
func TestCluster_underResharding_sendOnce(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	for _, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			rdb := c.AppClient(shape.Adjust)
			tag := "rso-" + shape.Name
			seq, seg := counters(t, rdb, tag+"/seq", tag+"/seg", 5)
			c.Fill(t, ctx, []string{"{" + tag + "}"}, 20)
			var (
				mu   sync.Mutex
				seen = map[string]bool{}
			)
			c.WhileResharding(t, ctx, []string{"{" + tag + "}"}, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond}, 4,
				func(w int, fail func(string, ...any)) {
					for i := range 60 {
						kind, next := "seq", seq.Next
						if (w+i)%2 == 1 {
							kind, next = "seg", seg.Next
						}
						v, err := next(ctx)
						mu.Lock()
						if err != nil {
							fail("%s: %w", kind, err)
						} else if k := fmt.Sprint(kind, v); seen[k] {
							fail("%s: %d twice", kind, v)
						} else {
							seen[k] = true
						}
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
					}
				})
			t.Logf("%d values", len(seen))
		})
	}
}

// TestCluster_masterKilledForGood: the master serving the counters is
// killed with SIGKILL and left down, its replica promoted (two replicas per
// master, so the new master has one to acknowledge), and the application's
// ClusterClient, which nothing refreshes, still names the dead address. On
// both client shapes the first Sequence.Next after every live node agreed
// on the new master succeeds, and a Segment whose runway runs out fetches
// its next range without an error reaching the caller. Before, the replica
// probe and the reservation failed with "connection refused" until
// go-redis's periodic map reload a minute later.
func TestCluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			tag := []string{"kg0", "kg1"}[i] // on shards of their own
			rdb := c.AppClient(shape.Adjust)
			seq, seg := counters(t, rdb, tag+"/seq", tag+"/seg", 5)
			for range 3 {
				if _, err := seq.Next(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := seg.Next(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.KillMaster(ctx, "{"+tag+"}"); err != nil {
				t.Fatal(err)
			}
			agreed := time.Now()
			if _, err := seq.Next(ctx); err != nil {
				t.Fatalf("the first Sequence.Next after the cluster agreed on the new master: %v", err)
			}
			t.Logf("%s: first Sequence.Next answered %v after the cluster agreed", shape.Name, time.Since(agreed))
			// Past the runway (at most two ranges of 5) every value needs a
			// fetch made after the kill.
			for n := range 15 {
				if _, err := seg.Next(ctx); err != nil {
					t.Fatalf("Segment.Next %d after the kill: %v", n, err)
				}
			}
		})
	}
}

// TestLease_Cluster_masterKilledForGood: a leased Snowflake (3 s lease,
// renewed every second) whose node table's master is killed with SIGKILL
// and left down, its replica promoted, on the application's ClusterClient,
// which nothing else uses, so its slot map still names the dead address.
// The renewals that met the dead master reload the map, so a renewal sent
// after every live node agreed on the new master succeeds (the test allows
// 15 s) and Next issues IDs, on both client shapes, and no ID repeats. Before, every
// renewal met "connection refused" and Next returned ErrLeaseLost until
// go-redis's periodic map reload a minute later.
func TestLease_Cluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			svc := []string{"kg0", "kg1"}[i] // on shards of their own
			s, err := idgen.NewLeasedSnowflake(ctx, c.AppClient(shape.Adjust), svc, idgen.WithLeaseTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			seen := map[idgen.ID]bool{}
			next := func() error {
				id, err := s.Next(ctx)
				if err == nil && seen[id] {
					t.Fatalf("%d twice", id)
				}
				seen[id] = true
				return err
			}
			if err := next(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.KillMaster(ctx, "{"+svc+"}"); err != nil {
				t.Fatal(err)
			}
			agreed := time.Now()
			for !s.Lease().Renewed.After(agreed) {
				if time.Since(agreed) > 15*time.Second {
					t.Fatalf("no renewal sent after the cluster agreed on the new master succeeded within 15 s: %+v", s.Lease())
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("%s: the lease renewed %v after the cluster agreed", shape.Name, time.Since(agreed))
			for range 100 {
				if err := next(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestChaos_Cluster_recovery measures, per Cluster fault and client shape,
// what callers of Sequence.Next see (replica acknowledgement, as by
// default with replicas): how long the fault lasted until the cluster
// agreed, how long after that every caller's next call was answered, the
// slowest call and the errors. It prints a "recovery table" line per
// fault; the README's Cluster table quotes them.
func TestChaos_Cluster_recovery(t *testing.T) {
	redistest.Chaos(t)
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{AOF: true, AppendFsync: "always", Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for _, shape := range redistest.ClientShapes {
		seq, err := idgen.NewSequence(c.AppClient(shape.Adjust), "rc/"+shape.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range redistest.RecoveryFaults() {
			rec := c.MeasureRecovery(t, ctx, "{rc}", f, redistest.RecoveryRun{Callers: 4,
				Call: func(ctx context.Context, _, _ int) error {
					_, err := seq.Next(ctx)
					return err
				}})
			t.Logf("recovery table | idgen Sequence.Next | %s | %v", shape.Name, rec)
		}
	}
}
