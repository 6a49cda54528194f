package script_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/redistest"
)

// A write with replica acknowledgement goes to the node MasterForKey names,
// outside the ClusterClient's redirect handling. After each fault that gives
// the key's slot a new owner, the very next call must succeed on an
// ordinary ClusterClient that nothing refreshes (a stale map meets MOVED,
// which RunAck follows itself, or a dead address that refuses the dial,
// after which it asks the master of a reloaded map), and the client's map
// must catch up, so the call after that goes straight to the new owner.
func TestRunAck_cluster_followsNewOwner(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	const key = "{ack}:n"
	faults := []struct {
		name string
		do   func() error
	}{
		{"CLUSTER FAILOVER", func() error { return c.Failover(ctx, key, redistest.FailoverPlain) }},
		{"CLUSTER FAILOVER FORCE", func() error { return c.Failover(ctx, key, redistest.FailoverForce) }},
		{"CLUSTER FAILOVER TAKEOVER", func() error { return c.Failover(ctx, key, redistest.FailoverTakeover) }},
		{"slot migrated", func() error { _, err := c.MoveSlot(ctx, key); return err }},
		{"master killed, replica promoted", func() error {
			killed, err := c.KillMaster(ctx, key)
			if err != nil {
				return err
			}
			// The promoted master needs a replica to acknowledge.
			return c.Rejoin(ctx, killed)
		}},
		// The old master's address refuses connections from now on.
		{"master killed, rejoined on another port", func() error {
			killed, err := c.KillMaster(ctx, key)
			if err != nil {
				return err
			}
			_, err = c.RejoinElsewhere(ctx, killed)
			return err
		}},
		{"master killed for good, a new replica in its place", func() error {
			killed, err := c.KillMaster(ctx, key)
			if err != nil {
				return err
			}
			_, err = c.Replace(ctx, killed)
			return err
		}},
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	want := int64(0)
	run := func(what string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cmd, acked, err := script.RunAck(cctx, rdb, ackBrief2, incr, []string{key})
		require.NoError(t, err, what)
		require.Equal(t, 1, acked, what)
		want++
		require.Equal(t, want, cmd.Val(), what)
	}
	run("before any fault")
	for _, f := range faults {
		require.NoError(t, f.do(), f.name)
		run("first call after " + f.name)
		// The map reloads in the background after a MOVED; once it has,
		// MasterForKey names the new owner. A reload may read a node that
		// has not yet heard of the new owner: the application's own
		// traffic (the EXISTS here) sets off the next one.
		require.Eventually(t, func() bool {
			_ = rdb.Exists(ctx, key).Err()
			m, err := rdb.MasterForKey(ctx, key)
			if err != nil {
				return false
			}
			return m.Set(ctx, "{ack}:probe", "1", 0).Err() == nil
		}, 10*time.Second, 20*time.Millisecond, "the client's map after %s", f.name)
		run("second call after " + f.name)
		acked, err := script.Acked(ctx, rdb, ackBrief2, key)
		require.NoError(t, err, f.name)
		require.Equal(t, 1, acked, f.name)
	}
}

// ackBrief2 waits well within go-redis's default ReadTimeout (3s).
var ackBrief2 = script.Ack{Replicas: 1, Timeout: 2 * time.Second, Required: true}

// A master killed for good, its replica promoted and no replica left to
// acknowledge: on both client shapes, the first RunAck and Acked after every
// live node agreed on the new master succeed (with 0 acknowledgements, as
// optional), although the client's map names the dead address, which
// refuses the dial. Before, both failed with "connection refused" until
// go-redis's minute-long map refresh.
func TestRunAck_cluster_masterKilledForGood(t *testing.T) {
	for _, shape := range []struct {
		name string
		opt  func(*redis.ClusterOptions)
	}{
		{"defaults", func(*redis.ClusterOptions) {}},
		{"send-once", func(o *redis.ClusterOptions) { o.MaxRetries, o.MaxRedirects = -1, -1 }},
	} {
		t.Run(shape.name, func(t *testing.T) {
			c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
				Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
			ctx := t.Context()
			rdb := c.Client(shape.opt)
			const key = "{gone}:n"
			optional := script.Ack{Replicas: 1, Timeout: 100 * time.Millisecond}
			_, acked, err := script.RunAck(ctx, rdb, optional, incr, []string{key})
			require.NoError(t, err)
			require.Equal(t, 1, acked)
			_, err = c.KillMaster(ctx, key)
			require.NoError(t, err)
			agreed := time.Now()
			cmd, acked, err := script.RunAck(ctx, rdb, optional, incr, []string{key})
			require.NoError(t, err, "the first RunAck after the cluster agreed on the new master")
			t.Logf("RunAck answered %v after the cluster agreed", time.Since(agreed))
			require.Equal(t, 0, acked, "no replica is left")
			require.EqualValues(t, 2, cmd.Val())

			_, err = c.KillMaster(ctx, "{gone2}")
			require.NoError(t, err)
			agreed = time.Now()
			acked, err = script.Acked(ctx, rdb, optional, "{gone2}:n")
			require.NoError(t, err, "the first Acked after the cluster agreed on the new master")
			t.Logf("Acked answered %v after the cluster agreed", time.Since(agreed))
			require.Equal(t, 0, acked)
		})
	}
}
