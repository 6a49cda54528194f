package lock_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

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
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	locks := mustNew(t, rdb, lock.WithRequiredReplicaAck(1, time.Second), lock.WithTTL(3*time.Second))
	defer locks.Close()
	names := []string{"fl1/a", "fl2/b"}
	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": lock.ErrUnknownOutcome, "replica ack not reached": lock.ErrReplicaAck}}
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		overlaps int
		holding  = map[string]int{}
		last     = map[string]uint64{}
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; runCtx.Err() == nil; i++ {
				name := names[(w+i)%len(names)]
				m := locks.Mutex(name)
				var l *lock.Lease
				if ok, err := answers.Call(ctx, func(ctx context.Context) (err error) {
					l, err = m.Acquire(ctx)
					return err
				}); !ok {
					t.Errorf("%s never acquired: %v", name, err)
					return
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
				mu.Unlock()
				_ = l.Release(ctx) // a lost release leaves the lock to its TTL
			}
		})
	}
	faults, err := c.FaultRounds(ctx, chaosScale(), 300*time.Millisecond, "{fl1}", "{fl2}")
	stopLoad()
	wg.Wait()
	require.NoError(t, err)
	t.Logf("%d faults: %d leases, %d acquires failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | lock Acquire/Extend/Release | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), overlaps)
	require.Zero(t, overlaps, "two holders at once or a token not above the last")
}
