package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FailoverMode is the option of CLUSTER FAILOVER.
type FailoverMode string

const (
	// FailoverPlain is a coordinated failover: the replica catches up with
	// its master, which stops taking writes meanwhile, so no acknowledged
	// write is lost.
	FailoverPlain FailoverMode = ""
	// FailoverForce skips the hand-shake with the master (a master that is
	// down or unreachable) but still needs the other masters' votes.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover skips the vote too: the replica bumps its epoch and
	// takes the slots on its own authority.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Failover fails over the shard that now serves key's slot with CLUSTER
// FAILOVER [mode] on its first running replica; the old master becomes its
// replica. It returns once every node agrees (and, like FailoverShard,
// every client made by c.Client routes key to the new master). A client
// made any other way is not told: its next command meets MOVED. The
// masters vote about one master's replicas at most once per twice
// cluster-node-timeout, so a plain or FORCE failover of a master that was
// failed away from sooner than that waits first.
func (c *Cluster) Failover(ctx context.Context, key string, mode FailoverMode) error {
	if err := c.waitStable(ctx); err != nil {
		return err
	}
	sh, err := c.shardOf(ctx, key)
	if err != nil {
		return err
	}
	c.mu.Lock()
	promoted, old := c.liveReplica(sh), sh.master
	c.mu.Unlock()
	if promoted == nil {
		return errors.New("redistest: Failover needs a running replica (ClusterOptions.Replicas ≥ 1)")
	}
	if mode != FailoverTakeover {
		// The masters vote about one master's replicas at most once per
		// twice cluster-node-timeout: a failover sooner would be won by
		// the replica and then undone by the cluster.
		if err := c.settle(ctx, key); err != nil {
			return err
		}
	}
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != FailoverPlain {
		args = append(args, string(mode))
	}
	c.mu.Lock()
	c.votedAbout[old] = time.Now()
	c.mu.Unlock()
	if _, err := promoted.do(ctx, args...); err != nil {
		return fmt.Errorf("redistest: CLUSTER FAILOVER %s on %s: %w", mode, promoted.Addr(), err)
	}
	c.mu.Lock()
	sh.swap(promoted, old)
	c.mu.Unlock()
	if err := c.waitStable(ctx); err != nil {
		return err
	}
	return c.refreshClients(ctx, key, promoted)
}

// nodeTimeout is the cluster-node-timeout the nodes run with.
func (c *Cluster) nodeTimeout() time.Duration {
	ms := 5000 // configLines' default
	for _, line := range c.opts.Config {
		if v, ok := strings.CutPrefix(line, "cluster-node-timeout "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				ms = n
			}
		}
	}
	return time.Duration(ms) * time.Millisecond
}

// swap makes replica r the master of sh and the old master m a replica in
// its place. Called with c.mu.
func (sh *shard) swap(r, m *Server) {
	i := slices.Index(sh.replicas, r)
	sh.master, sh.replicas[i] = r, m
}

// KillMaster kills (SIGKILL, as kill -9) the master that serves key's slot
// and returns once one of its running replicas has been promoted by the
// cluster (after cluster-node-timeout: lower it in Options.Config for short
// tests) and every live node reports cluster_state:ok with the new master
// serving the slot (other replicas may still be switching to it: the next
// Failover or KillMaster waits for them). It returns the killed node, which stays down: Rejoin
// brings it back on its address, RejoinElsewhere on another port, Replace
// puts a new node in its place. Until then the cluster counts it as a
// failed member, and clients are not told: a client whose slot map still
// names it meets "connection refused" there.
func (c *Cluster) KillMaster(ctx context.Context, key string) (killed *Server, err error) {
	// The replica's election needs the masters' votes about this master.
	if err := c.settle(ctx, key); err != nil {
		return nil, err
	}
	sh, err := c.shardOf(ctx, key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := sh.master
	var candidates []*Server // the cluster promotes any of them
	for _, r := range sh.replicas {
		if !c.dead[r] {
			candidates = append(candidates, r)
		}
	}
	c.mu.Unlock()
	if len(candidates) == 0 {
		return nil, errors.New("redistest: KillMaster needs a running replica (ClusterOptions.Replicas ≥ 1)")
	}
	if err := old.Kill(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.dead[old] = true
	c.mu.Unlock()
	slot := KeySlot(key)
	var promoted *Server
	err = poll(ctx, 60*time.Second, func() (bool, error) {
		_, live := c.members()
		var seen *Server
		for _, s := range live {
			info, err := s.do(ctx, "CLUSTER", "INFO")
			if str, _ := info.(string); err != nil || infoField(str, "cluster_state") != "ok" {
				return false, nil
			}
			nodes, err := s.clusterNodes(ctx)
			if err != nil {
				return false, nil
			}
			var master *Server
			for _, n := range nodes {
				for _, r := range candidates {
					if n.addr == r.Addr() && strings.Contains(n.flags, "master") && servesSlot(n.slots, slot) {
						master = r
					}
				}
			}
			if master == nil || seen != nil && master != seen {
				return false, nil
			}
			seen = master
		}
		promoted = seen
		return true, nil
	}, "a replica to be promoted")
	if err != nil {
		return old, err
	}
	c.mu.Lock()
	sh.swap(promoted, old)
	c.mu.Unlock()
	return old, nil
}

// Rejoin restarts a node killed by KillMaster on its address and data; it
// comes back as a replica of the master that replaced it. It returns once
// every node agrees.
func (c *Cluster) Rejoin(ctx context.Context, s *Server) error {
	if err := c.mustBeDead(s); err != nil {
		return err
	}
	if err := s.Restart(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.dead, s)
	c.mu.Unlock()
	return c.waitStable(ctx)
}

// RejoinElsewhere restarts a node killed by KillMaster from its data
// directory (its node ID and cluster configuration) on another port, as a
// host that comes back under a new address: it tells the other nodes its new
// address itself and comes back as a replica of the master that replaced it,
// while nothing answers on the old address any more. It returns the node as
// it runs now (s stays stopped; Close stops both), once every node agrees.
func (c *Cluster) RejoinElsewhere(ctx context.Context, s *Server) (*Server, error) {
	if err := c.mustBeDead(s); err != nil {
		return nil, err
	}
	opts := s.Options()
	opts.Port, opts.Dir = 0, s.Dir()
	moved, err := startServer(ctx, opts, func(n *Server) { n.cluster = true })
	if err != nil {
		return nil, err
	}
	c.succeed(s, moved)
	return moved, c.waitStable(ctx)
}

// Replace stands in for a node killed by KillMaster that never comes back,
// as an operator replacing a dead host: every live node forgets it
// (CLUSTER FORGET) and a new, empty node joins as a replica of the master
// that replaced it, so its shard has as many replicas as before. Nothing
// answers on the dead node's address any more. It returns the new node
// once every node agrees.
func (c *Cluster) Replace(ctx context.Context, s *Server) (*Server, error) {
	if err := c.mustBeDead(s); err != nil {
		return nil, err
	}
	_, live := c.members()
	var deadID string
	nodes, err := live[0].clusterNodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.addr == s.Addr() {
			deadID = n.id
		}
	}
	if deadID == "" {
		return nil, fmt.Errorf("redistest: Replace: %s is not a member", s.Addr())
	}
	// Each node bans a forgotten ID for a minute, so gossip from a node
	// not yet told cannot bring it back meanwhile.
	for _, n := range live {
		if _, err := n.do(ctx, "CLUSTER", "FORGET", deadID); err != nil {
			return nil, fmt.Errorf("redistest: CLUSTER FORGET on %s: %w", n.Addr(), err)
		}
	}
	fresh, err := startServer(ctx, c.opts, func(n *Server) { n.cluster = true })
	if err != nil {
		return nil, err
	}
	c.succeed(s, fresh)
	if _, err := live[0].do(ctx, "CLUSTER", "MEET", "127.0.0.1", fresh.port, fresh.port+10000); err != nil {
		return fresh, fmt.Errorf("redistest: CLUSTER MEET %s: %w", fresh.Addr(), err)
	}
	if err := c.waitAllKnown(ctx); err != nil {
		return fresh, err
	}
	c.mu.Lock()
	var master *Server
	for _, sh := range c.shards {
		if slices.Contains(sh.replicas, fresh) {
			master = sh.master
		}
	}
	c.mu.Unlock()
	id, err := master.do(ctx, "CLUSTER", "MYID")
	if err != nil {
		return fresh, fmt.Errorf("redistest: CLUSTER MYID: %w", err)
	}
	if _, err := fresh.do(ctx, "CLUSTER", "REPLICATE", id); err != nil {
		return fresh, fmt.Errorf("redistest: CLUSTER REPLICATE: %w", err)
	}
	return fresh, c.waitStable(ctx)
}

// mustBeDead reports an error unless s is a member KillMaster killed.
func (c *Cluster) mustBeDead(s *Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead[s] {
		return fmt.Errorf("redistest: %s is not a killed member of the cluster", s.Addr())
	}
	return nil
}

// succeed puts next in the place of the dead member s, which is retired.
func (c *Cluster) succeed(s, next *Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dead, s)
	c.nodes[slices.Index(c.nodes, s)] = next
	for _, sh := range c.shards {
		if i := slices.Index(sh.replicas, s); i >= 0 {
			sh.replicas[i] = next
		}
	}
	c.retired = append(c.retired, s)
}

// MoveOptions shape a slot migration.
type MoveOptions struct {
	// Batch is the number of keys per MIGRATE (default 10, as
	// redis-cli --cluster reshard); 1 moves them one by one.
	Batch int
	// Pause is slept between two MIGRATEs (a throttled or large slot):
	// meanwhile the slot's keys are split between the two masters.
	Pause time.Duration
}

// MoveSlotWith is MoveSlot with the migration shaped by o. It returns the
// new owner and the number of keys migrated.
func (c *Cluster) MoveSlotWith(ctx context.Context, key string, o MoveOptions) (to *Server, keys int, err error) {
	if o.Batch <= 0 {
		o.Batch = 10
	}
	return c.moveSlot(ctx, key, o)
}

// ReshardStats counts what a Reshard did.
type ReshardStats struct {
	Moves int   // slots moved
	Keys  int   // keys migrated
	Err   error // the error that stopped it early, if any
}

// Reshard moves the slots of keys, one after the other and again and again,
// in the background until stop is called; stop waits for the move in
// progress to finish and returns what was done. A move that fails stops the
// resharding; its error is in ReshardStats.Err.
func (c *Cluster) Reshard(ctx context.Context, keys []string, o MoveOptions) (stop func() ReshardStats) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		st    ReshardStats
		moves atomic.Int64
	)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			// A move runs to its end once begun: a slot left half
			// migrated would break the test's later steps.
			_, n, err := c.MoveSlotWith(context.WithoutCancel(ctx), keys[i%len(keys)], o)
			if err != nil {
				if ctx.Err() == nil {
					st.Err = err
				}
				return
			}
			st.Keys += n
			st.Moves = int(moves.Add(1))
		}
	})
	return func() ReshardStats {
		cancel()
		wg.Wait()
		return st
	}
}

// Fill writes n keys of an application, <tag>:fill:0 to <tag>:fill:<n-1>,
// into the slot of each hash tag in tags ("{g}"), so that moving the slot
// takes longer and its keys stay split between two masters for a while.
func (c *Cluster) Fill(tb testing.TB, ctx context.Context, tags []string, n int) {
	tb.Helper()
	rdb := c.Client()
	for _, tag := range tags {
		for i := range n {
			if err := rdb.Set(ctx, fmt.Sprintf("%s:fill:%d", tag, i), i, 0).Err(); err != nil {
				tb.Fatalf("fill %s: %v", tag, err)
			}
		}
	}
}

// WhileResharding runs work on workers goroutines while the slots of keys
// move again and again (Reshard with o), then stops the moves and returns
// what they did. After every worker is done, t fails when a move failed,
// when no slot moved (the run proved nothing), or when a worker called fail:
// while slots move, no error may reach a caller.
func (c *Cluster) WhileResharding(t testing.TB, ctx context.Context, keys []string, o MoveOptions, workers int,
	work func(w int, fail func(format string, a ...any))) ReshardStats {
	t.Helper()
	stop := c.Reshard(ctx, keys, o)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		errs = append(errs, fmt.Errorf(format, a...))
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() { work(w, fail) })
	}
	wg.Wait()
	st := stop()
	t.Logf("%d workers while %d slot moves migrated %d keys; %d errors", workers, st.Moves, st.Keys, len(errs))
	switch {
	case st.Err != nil:
		t.Fatalf("resharding stopped: %v", st.Err)
	case st.Moves == 0:
		t.Fatal("no slot moved while the work ran")
	case len(errs) > 0:
		t.Fatalf("errors returned to the caller: %v", errors.Join(errs...))
	}
	return st
}

// shardOf returns the shard whose master serves key's slot now.
func (c *Cluster) shardOf(ctx context.Context, key string) (*shard, error) {
	slot := KeySlot(key)
	c.mu.Lock()
	shards := append([]*shard(nil), c.shards...)
	c.mu.Unlock()
	for _, sh := range shards {
		nodes, err := sh.master.clusterNodes(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if strings.Contains(n.flags, "myself") && servesSlot(n.slots, slot) {
				return sh, nil
			}
		}
	}
	return nil, fmt.Errorf("redistest: no master serves slot %d", slot)
}

func (c *Cluster) refreshClients(ctx context.Context, key string, master *Server) error {
	c.mu.Lock()
	clients := append(c.clients[:0:0], c.clients...)
	c.mu.Unlock()
	for _, cc := range clients {
		err := poll(ctx, 30*time.Second, func() (bool, error) {
			cc.ReloadState(ctx)
			m, err := cc.MasterForKey(ctx, key)
			return err == nil && m.Options().Addr == master.Addr(), nil
		}, "cluster client to see the new master")
		if err != nil {
			return err
		}
	}
	return nil
}

// FaultRound runs each kind of Cluster fault once, in turn, on the shard
// that serves key's slot, waiting pause before each: CLUSTER FAILOVER
// plain, FORCE and TAKEOVER; the master killed with SIGKILL and its replica
// promoted, three times: the node then rejoins on its address (where it
// answers MOVED), rejoins on another port (its old address refuses
// connections from then on), or stays down for good; and the slot moved to
// another master while that node is still down. The node killed for good
// is replaced by a new replica (Replace) at the end of the round, so the
// shard has a replica for the next one. It needs a replica per master and,
// for the kills, a short cluster-node-timeout in Options.Config. It returns
// how many faults ran.
func (c *Cluster) FaultRound(ctx context.Context, key string, pause time.Duration) (int, error) {
	var down *Server // killed for good, replaced at the end
	kill := func(then func(*Server) error) func() error {
		return func() error {
			killed, err := c.KillMaster(ctx, key)
			if err != nil {
				return err
			}
			return then(killed)
		}
	}
	faults := []func() error{
		func() error { return c.Failover(ctx, key, FailoverPlain) },
		func() error { return c.Failover(ctx, key, FailoverForce) },
		func() error { return c.Failover(ctx, key, FailoverTakeover) },
		kill(func(s *Server) error { return c.Rejoin(ctx, s) }),
		kill(func(s *Server) error { _, err := c.RejoinElsewhere(ctx, s); return err }),
		kill(func(s *Server) error { down = s; return nil }),
		func() error { _, err := c.MoveSlot(ctx, key); return err },
	}
	for i, f := range faults {
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return i, ctx.Err()
		}
		if err := f(); err != nil {
			return i, err
		}
	}
	if down != nil {
		if _, err := c.Replace(ctx, down); err != nil {
			return len(faults), err
		}
	}
	return len(faults), nil
}

// KillShard kills (SIGKILL) the master of the shard that serves key's slot
// and every replica of it, so that no node serves the slot: with the
// default cluster-require-full-coverage every node answers CLUSTERDOWN
// once it has flagged them failed. It returns the killed nodes, master
// first, once every live node reports cluster_state:fail; Rejoin each to
// bring the shard back (with AOF on, with its data).
func (c *Cluster) KillShard(ctx context.Context, key string) ([]*Server, error) {
	sh, err := c.shardOf(ctx, key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	killed := append([]*Server{sh.master}, sh.replicas...)
	c.mu.Unlock()
	for _, s := range killed {
		c.mu.Lock()
		dead := c.dead[s]
		c.mu.Unlock()
		if dead {
			continue
		}
		if err := s.Kill(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.dead[s] = true
		c.mu.Unlock()
	}
	err = poll(ctx, 60*time.Second, func() (bool, error) {
		_, live := c.members()
		for _, s := range live {
			info, err := s.do(ctx, "CLUSTER", "INFO")
			if str, _ := info.(string); err != nil || infoField(str, "cluster_state") != "fail" {
				return false, nil
			}
		}
		return true, nil
	}, "the cluster to see the shard down")
	return killed, err
}
