package lock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestMutex_Cluster: on a Cluster, locks of different shards work side by
// side and waiters are woken by sharded pub/sub (the holders' TTLs are longer
// than the waiters' contexts); a shard failover keeps both the held lease
// and the waiter's subscription working.
func TestMutex_Cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	cc := c.Client()
	locks := lock.New(cc)
	defer locks.Close()
	ctx := t.Context()

	// Names chosen to land on different shards.
	var mutexes []*lock.Mutex
	shards := map[string]bool{}
	for i := 0; len(mutexes) < 3 && i < 100; i++ {
		m := locks.Mutex(fmt.Sprintf("shard-%d", i), lock.WithTTL(time.Minute))
		master, err := cc.MasterForKey(ctx, m.LockKey())
		require.NoError(t, err)
		if addr := master.Options().Addr; !shards[addr] {
			shards[addr] = true
			mutexes = append(mutexes, m)
		}
	}
	require.Len(t, mutexes, 3)

	var (
		held    []*lock.Lease
		waiters []<-chan error
	)
	for _, m := range mutexes {
		l, err := m.TryAcquire(ctx)
		require.NoError(t, err)
		held = append(held, l)
		waiters = append(waiters, waitFor(m))
	}
	for _, m := range mutexes {
		eventually(t, func() bool {
			n, err := cc.PubSubShardNumSub(ctx, m.Channel()).Result()
			require.NoError(t, err)
			return n[m.Channel()] == 1
		}, "waiter subscribed on its shard")
	}

	// Fail over the first name's shard while its waiter waits.
	require.NoError(t, c.FailoverShard(ctx, mutexes[0].LockKey()))
	eventually(t, func() bool {
		n, err := cc.PubSubShardNumSub(ctx, mutexes[0].Channel()).Result()
		return err == nil && n[mutexes[0].Channel()] == 1
	}, "waiter subscribed on the new primary")
	require.NoError(t, held[0].Extend(ctx), "the lease survived a coordinated failover")

	var wg sync.WaitGroup
	for i := range mutexes {
		wg.Go(func() {
			assertNoError(t, held[i].Release(ctx))
			assertNoError(t, <-waiters[i])
		})
	}
	wg.Wait()
}

// TestHashSlot: the slot of a hash tag is Redis Cluster's (CRC16/XMODEM mod
// 16384), checked against CLUSTER KEYSLOT of a real cluster node.
func TestHashSlot(t *testing.T) {
	require.Equal(t, 0x31C3, lock.HashSlot("123456789"), "the CRC16/XMODEM check value")
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 1})
	rdb := c.Client()
	for _, tag := range []string{"foo", "bar", "shop-7", "nightly", "a", "order-12345", "0", "17"} {
		want, err := rdb.ClusterKeySlot(t.Context(), tag).Result()
		require.NoError(t, err)
		require.EqualValues(t, want, lock.HashSlot(tag), tag)
	}
}
