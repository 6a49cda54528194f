package redistest_test

import (
	"context"
	"errors"
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
