package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// nameOnShard returns a lock name whose key's slot is served by the same
// master as key's, through rdb's map.
func nameOnShard(t *testing.T, ctx context.Context, rdb *redis.ClusterClient, c *lock.Client, prefix, key string) string {
	t.Helper()
	want, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		m, err := rdb.MasterForKey(ctx, c.Mutex(name).LockKey())
		require.NoError(t, err)
		if m.Options().Addr == want.Options().Addr {
			return name
		}
	}
	t.Fatal("no name on the shard")
	return ""
}

// TestMutex_Cluster_masterKilledForGood: the master serving a lock's slot
// is killed with SIGKILL and left down (its replica promoted; two replicas
// per master, so the new master has one to acknowledge), and the
// application's ClusterClient, which nothing refreshes, still names the
// dead address. On go-redis defaults and on send-once, without and with
// required replica acknowledgement, the first TryAcquire after every live
// node agreed on the new master succeeds, and so do Extend and Release.
// Before, each failed ("connection refused") until go-redis's periodic map
// reload a minute later.
func TestMutex_Cluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			shardKey := []string{"{k0}", "{k1}"}[i] // shards of their own
			// A client per variant, each warmed up on the shard.
			type variant struct {
				name string
				m    *lock.Mutex
			}
			var vs []variant
			for _, v := range []struct {
				name string
				opts []lock.Option
			}{{"no ack", nil}, {"required ack", []lock.Option{lock.WithRequiredReplicaAck(1, time.Second)}}} {
				rdb := c.AppClient(shape.Adjust)
				locks := mustNew(t, rdb, v.opts...)
				defer locks.Close()
				m := locks.Mutex(nameOnShard(t, ctx, rdb, locks, "kf-"+shape.Name+fmt.Sprint(len(v.opts)), shardKey), lock.WithTTL(time.Minute))
				l, err := m.TryAcquire(ctx)
				require.NoError(t, err, v.name)
				require.NoError(t, l.Release(ctx), v.name)
				vs = append(vs, variant{v.name, m})
			}
			_, err := c.KillMaster(ctx, shardKey)
			require.NoError(t, err)
			for _, v := range vs {
				agreed := time.Now()
				l, err := v.m.TryAcquire(ctx)
				require.NoError(t, err, "%s: the first TryAcquire after the cluster agreed on the new master", v.name)
				t.Logf("%s %s: first TryAcquire answered %v after the cluster agreed", shape.Name, v.name, time.Since(agreed))
				require.NoError(t, l.Extend(ctx), v.name)
				require.NoError(t, l.Release(ctx), v.name)
			}
		})
	}
}

// TestLease_Cluster_extendAfterMasterKilledForGood: a lease taken with the
// watchdog off, then the master serving its slot is killed with SIGKILL and
// left down (its replica promoted), and nothing else runs on the
// application's ClusterClient, so its slot map still names the dead
// address when the holder calls Extend. On go-redis defaults and on
// send-once the first Extend after every live node agreed on the new
// master succeeds (it is sent again on a reloaded map), and so does
// Release. Before, every Extend failed with "connection refused" until
// go-redis's periodic map reload a minute later.
func TestLease_Cluster_extendAfterMasterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			shardKey := []string{"{k0}", "{k1}"}[i] // shards of their own
			rdb := c.AppClient(shape.Adjust)
			locks := mustNew(t, rdb, lock.WithWatchdog(false))
			defer locks.Close()
			m := locks.Mutex(nameOnShard(t, ctx, rdb, locks, "ex-"+shape.Name, shardKey), lock.WithTTL(time.Minute))
			l, err := m.TryAcquire(ctx)
			require.NoError(t, err)
			_, err = c.KillMaster(ctx, shardKey)
			require.NoError(t, err)
			agreed := time.Now()
			require.NoError(t, l.Extend(ctx), "the first Extend after the cluster agreed on the new master")
			t.Logf("%s: first Extend answered %v after the cluster agreed", shape.Name, time.Since(agreed))
			require.NoError(t, l.Release(ctx))
		})
	}
}

// TestMutex_Cluster_notifyAfterMasterKilledForGood: a waiter waits, by
// notification, for a lock held with a long TTL; the master serving the
// lock's slot (and its subscriber connection) is killed with SIGKILL and
// left down. The hub's connection breaks and reconnects on a reloaded slot
// map: the promoted master counts the waiter's channel (PUBSUB
// SHARDNUMSUB), and a release after that hands the lock over through its
// notification, on both client shapes (the waiter's context is far
// shorter than the holder's TTL, so a waiter that is not notified fails).
func TestMutex_Cluster_notifyAfterMasterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	probe := c.Client()
	subscribers := func(channel string) int64 {
		probe.ReloadState(ctx)
		n, err := probe.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			return -1
		}
		return n[channel]
	}
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			rdb := c.AppClient(shape.Adjust)
			holders, waiters := mustNew(t, rdb), mustNew(t, rdb)
			defer holders.Close()
			defer waiters.Close()
			const ttl = time.Minute
			shardKey := []string{"{n0}", "{n1}"}[i]
			name := nameOnShard(t, ctx, rdb, holders, "nk-"+shape.Name, shardKey)
			m := holders.Mutex(name, lock.WithTTL(ttl))
			held, err := m.TryAcquire(ctx)
			require.NoError(t, err)
			got := make(chan time.Time, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				l, err := waiters.Mutex(name, lock.WithTTL(ttl)).Acquire(wctx)
				at := time.Now()
				if !assertNoError(t, err) {
					close(got)
					return
				}
				assertNoError(t, l.Release(ctx))
				got <- at
			}()
			eventually(t, func() bool { return subscribers(m.Channel()) == 1 }, "waiter subscribed")
			_, err = c.KillMaster(ctx, shardKey)
			require.NoError(t, err)
			agreed := time.Now()
			eventually(t, func() bool { return subscribers(m.Channel()) == 1 }, "subscribed on the promoted master")
			t.Logf("%s: subscribed again %v after the cluster agreed", shape.Name, time.Since(agreed))
			released := time.Now()
			require.NoError(t, held.Release(ctx))
			at, ok := <-got
			require.True(t, ok, "the waiter was not handed the lock")
			t.Logf("%s: hand-off %v after the release", shape.Name, at.Sub(released))
		})
	}
}

// TestChaos_Cluster_recovery measures, per Cluster fault and client shape,
// what callers of TryAcquire and Release see (half with required replica
// acknowledgement): how long the fault lasted until the cluster agreed, how
// long after that every caller's next call was answered, the slowest call
// and the errors. It prints a "recovery table" line per fault; the README's
// Cluster table quotes them.
func TestChaos_Cluster_recovery(t *testing.T) {
	redistest.Chaos(t)
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{AOF: true, AppendFsync: "always", Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for _, shape := range redistest.ClientShapes {
		plain := mustNew(t, c.AppClient(shape.Adjust))
		acked := mustNew(t, c.AppClient(shape.Adjust), lock.WithRequiredReplicaAck(1, time.Second))
		defer plain.Close()
		defer acked.Close()
		for _, f := range redistest.RecoveryFaults() {
			rec := c.MeasureRecovery(t, ctx, "{rc}", f, redistest.RecoveryRun{Callers: 4,
				Kinds: map[string]error{"outcome unknown": lock.ErrUnknownOutcome, "replica ack not reached": lock.ErrReplicaAck},
				Call: func(ctx context.Context, w, _ int) error {
					locks := plain
					if w%2 == 1 {
						locks = acked
					}
					l, err := locks.Mutex(fmt.Sprintf("rc/%s-%d", shape.Name, w), lock.WithTTL(10*time.Second)).TryAcquire(ctx)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}})
			t.Logf("recovery table | lock TryAcquire+Release | %s | %v", shape.Name, rec)
		}
	}
}
