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
// which RunAck follows itself), and the client's map must catch up, so the
// call after that goes straight to the new owner.
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
		// The map reloads in the background; once it has, MasterForKey
		// names the new owner.
		require.Eventually(t, func() bool {
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
