package lock_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestChaos_Cluster_failover: Acquire, Extend and Release with
// WithRequiredReplicaAck on an ordinary ClusterClient while the names'
// shards are failed over again and again (CLUSTER FAILOVER plain, FORCE
// and TAKEOVER, a master killed with SIGKILL and its replica promoted, the
// slot migrated). A caller that gets an error calls again (a new Acquire;
// a failed one withdrew what it announced): every round ends with a lease.
// No two holders of a name at once and each name's fence tokens strictly
// increase: an acknowledged acquire survives the failover, so the package
// documentation's guarantee with required acknowledgement holds.
func TestChaos_Cluster_failover(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	locks := lock.New(rdb, lock.WithRequiredReplicaAck(1, time.Second), lock.WithTTL(3*time.Second))
	defer locks.Close()
	names := []string{"fl1/a", "fl2/b"}
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg                        sync.WaitGroup
		mu                        sync.Mutex
		rounds, retried, overlaps int
		holding                   = map[string]int{}
		last                      = map[string]uint64{}
		firstErrs                 = map[string]int{}
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; runCtx.Err() == nil; i++ {
				name := names[(w+i)%len(names)]
				m := locks.Mutex(name)
				var l *lock.Lease
				for try := 0; ; try++ {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					var err error
					l, err = m.Acquire(cctx)
					cancel()
					if err == nil {
						break
					}
					mu.Lock()
					retried++
					if try == 0 {
						switch {
						case errors.Is(err, lock.ErrUnknownOutcome):
							firstErrs["outcome unknown"]++
						case errors.Is(err, lock.ErrReplicaAck):
							firstErrs["replica ack not reached"]++
						default:
							firstErrs[err.Error()]++
						}
					}
					mu.Unlock()
					require.Less(t, try, 50, "%s never acquired: %v", name, err)
					time.Sleep(50 * time.Millisecond)
				}
				mu.Lock()
				holding[name]++
				if holding[name] > 1 {
					overlaps++
				}
				if tok := l.Fence().Token; tok <= last[name] {
					overlaps++
				} else {
					last[name] = tok
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				_ = l.Extend(ctx) // may fail while the shard fails over: the lease stays ours until its TTL
				mu.Lock()
				holding[name]--
				rounds++
				mu.Unlock()
				_ = l.Release(ctx) // a lost release leaves the lock to its TTL
			}
		})
	}
	faults := 0
	for range chaosScale() {
		for _, tag := range []string{"{fl1}", "{fl2}"} {
			k, err := c.FaultRound(ctx, tag, 300*time.Millisecond)
			faults += k
			require.NoError(t, err)
		}
	}
	stopLoad()
	wg.Wait()
	t.Logf("%d faults: %d leases, %d acquires failed and were called again; first errors: %v", faults, rounds, retried, firstErrs)
	t.Logf("chaos table | lock Acquire/Extend/Release | %d | %d | %d | %d", rounds, faults, retried, overlaps)
	require.Zero(t, overlaps, "two holders at once or a token not above the last")
}
