package redistest_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// Each operation ends with the slot served by another master and the data
// intact, seen through a client that reloads its map.
func TestCluster_operations(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	const key = "{ops}:k"
	for i := range 25 {
		require.NoError(t, rdb.Set(ctx, key+string(rune('a'+i)), i, 0).Err())
	}
	owner := func() string {
		for {
			rdb.ReloadState(ctx)
			time.Sleep(50 * time.Millisecond)
			m, err := rdb.MasterForKey(ctx, key)
			if err == nil && m.Ping(ctx).Err() == nil && m.Set(ctx, key+"probe", 1, 0).Err() == nil {
				return m.Options().Addr
			}
		}
	}
	before := owner()
	to, n, err := c.MoveSlotWith(ctx, key, redistest.MoveOptions{Batch: 3, Pause: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 26, n, "every key of the slot migrated")
	require.NotEqual(t, before, to.Addr())
	require.Equal(t, to.Addr(), owner())
	for _, mode := range []redistest.FailoverMode{redistest.FailoverPlain, redistest.FailoverForce, redistest.FailoverTakeover} {
		before := owner()
		require.NoError(t, c.Failover(ctx, key, mode), mode)
		require.NotEqual(t, before, owner(), mode)
	}
	before = owner()
	killed, err := c.KillMaster(ctx, key)
	require.NoError(t, err)
	require.Equal(t, before, killed.Addr())
	require.NotEqual(t, before, owner())
	require.NoError(t, c.Rejoin(ctx, killed))
	require.Equal(t, "24", rdb.Get(ctx, key+"y").Val())

	stop := c.Reshard(context.WithoutCancel(ctx), []string{key}, redistest.MoveOptions{Batch: 1})
	time.Sleep(300 * time.Millisecond)
	st := stop()
	require.NoError(t, st.Err)
	require.Positive(t, st.Moves)
	require.Equal(t, "24", rdb.Get(ctx, key+"y").Val())

	// Fill puts keys in the slot; WhileResharding reports the moves made
	// while its workers ran, and fails the test when a worker saw an error.
	c.Fill(t, ctx, []string{"{ops}"}, 5)
	require.Equal(t, "4", rdb.Get(ctx, "{ops}:fill:4").Val())
	o := redistest.MoveOptions{Batch: 10, Pause: 5 * time.Millisecond}
	work := func(failing bool) func(int, func(string, ...any)) {
		return func(w int, fail func(string, ...any)) {
			time.Sleep(300 * time.Millisecond)
			if failing && w == 1 {
				fail("worker %d: %w", w, errors.New("lost"))
			}
		}
	}
	st = c.WhileResharding(t, ctx, []string{"{ops}"}, o, 2, work(false))
	require.Positive(t, st.Moves)
	ftb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.WhileResharding(ftb, ctx, []string{"{ops}"}, o, 2, work(true))
	}()
	<-done
	require.Contains(t, ftb.msg, "worker 1: lost")
	require.Equal(t, "24", rdb.Get(ctx, key+"y").Val())
}

// A master killed for good: after KillMaster its old address refuses
// connections; RejoinElsewhere brings the node back under a new address as
// a replica, Replace puts a new empty node in place of one that never comes
// back, and KillShard takes a whole shard down until its nodes rejoin. After
// each, the cluster has its shape again (every node agrees, the shard has a
// replica) and keeps its data, and the cluster forgets a replaced node.
func TestCluster_mastersThatDie(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{AOF: true, AppendFsync: "always", Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := c.Client()
	const key = "{die}:k"
	require.NoError(t, rdb.Set(ctx, key, "v", 0).Err())
	refuses := func(addr string) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing answers on %s", addr)
	}
	members := func() int {
		t.Helper()
		n := 0
		for _, s := range c.Nodes() {
			if s.PID() != 0 {
				n++
			}
		}
		return n
	}
	// The map reloaded, a command on the key succeeds.
	eventuallyServed := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			rdb.ReloadState(ctx)
			return rdb.Get(ctx, key).Val() == "v"
		}, 20*time.Second, 50*time.Millisecond, what)
	}

	killed, err := c.KillMaster(ctx, key)
	require.NoError(t, err)
	refuses(killed.Addr())
	require.Equal(t, 5, members(), "the killed node stays down")
	eventuallyServed("served by the promoted replica while the old master is down")
	back, err := c.RejoinElsewhere(ctx, killed)
	require.NoError(t, err)
	require.NotEqual(t, killed.Addr(), back.Addr())
	refuses(killed.Addr())
	r, err := c.Replica(ctx, key)
	require.NoError(t, err)
	require.Equal(t, back.Addr(), r.Addr(), "the node came back as the shard's replica")
	require.Contains(t, c.Addrs(), back.Addr())
	require.NotContains(t, c.Addrs(), killed.Addr())
	require.Equal(t, 6, members())

	killed, err = c.KillMaster(ctx, key)
	require.NoError(t, err)
	var masters []string
	for _, m := range c.Masters() {
		masters = append(masters, m.Addr())
	}
	require.Contains(t, masters, back.Addr(), "the node that came back was promoted")
	eventuallyServed("served while the master is down for good")
	fresh, err := c.Replace(ctx, killed)
	require.NoError(t, err)
	refuses(killed.Addr())
	r, err = c.Replica(ctx, key)
	require.NoError(t, err)
	require.Equal(t, fresh.Addr(), r.Addr())
	require.Equal(t, 6, members())
	for _, s := range c.Nodes() {
		nodes, err := s.Client().ClusterNodes(ctx).Result()
		require.NoError(t, err)
		require.NotContains(t, nodes, killed.Addr(), "%s forgot the dead node", s.Addr())
	}
	require.NoError(t, c.Failover(ctx, key, redistest.FailoverPlain), "the new replica can take over")
	eventuallyServed("served by the replacement")

	down, err := c.KillShard(ctx, key)
	require.NoError(t, err)
	require.Len(t, down, 2)
	require.True(t, redis.IsClusterDownError(rdb.Get(ctx, "{other}:k").Err()), "no slot is served without full coverage")
	for _, s := range down {
		require.NoError(t, c.Rejoin(ctx, s))
	}
	eventuallyServed("served after the shard came back, with its data (AOF)")
}

// MeasureRecovery warms the callers, injects the fault, and reports the
// calls made and how long after the cluster's agreement every caller had
// an answer again; a fault that cannot be injected fails the test.
func TestCluster_MeasureRecovery(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	ctx := t.Context()
	rdb := c.AppClient()
	const key = "{rec}:k"
	var moved redistest.RecoveryFault
	for _, f := range redistest.RecoveryFaults() {
		if f.Name == "slot migrated" {
			moved = f
		}
	}
	require.NotNil(t, moved.Inject)
	rec := c.MeasureRecovery(t, ctx, key, moved, redistest.RecoveryRun{Callers: 2,
		Call: func(ctx context.Context, w, i int) error { return rdb.Incr(ctx, key).Err() }})
	t.Log(rec)
	require.Equal(t, "slot migrated", rec.Fault)
	require.Positive(t, rec.Outage)
	require.Positive(t, rec.Next)
	require.Zero(t, rec.ErrorsAfter, "go-redis follows MOVED: %v", rec)
	n, err := rdb.Get(ctx, key).Int()
	require.NoError(t, err)
	failed := 0
	for _, k := range rec.Errors {
		failed += k
	}
	require.GreaterOrEqual(t, n, rec.Calls-failed, "every answered INCR counted")

	ftb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.MeasureRecovery(ftb, ctx, key, redistest.RecoveryFault{Name: "broken",
			Inject: func(context.Context, *redistest.Cluster, string) (func(context.Context) error, error) {
				return nil, errors.New("cannot")
			}}, redistest.RecoveryRun{Callers: 1, Call: func(ctx context.Context, _, _ int) error { return rdb.Ping(ctx).Err() }})
	}()
	<-done
	require.Contains(t, ftb.msg, "broken: cannot")
}
