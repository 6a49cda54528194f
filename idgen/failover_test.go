package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// TestChaos_Cluster_failover: Sequence.Next, Segment.Next and a leased
// Snowflake on an ordinary ClusterClient with a replica per master (every
// reservation waits for one) while the counters' shard is failed over
// again and again (CLUSTER FAILOVER plain, FORCE and TAKEOVER, a master
// killed with SIGKILL and its replica promoted, the slot migrated). A caller
// that gets an error calls again: no value is handed out twice.
func TestChaos_Cluster_failover(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	ctx := t.Context()
	seq, err := idgen.NewSequence(rdb, "fi/seq")
	if err != nil {
		t.Fatal(err)
	}
	seg, err := idgen.NewSegment(rdb, "fi/seg", idgen.WithMinStep(20), idgen.WithMaxStep(20))
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "fi", idgen.WithLeaseTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg                       sync.WaitGroup
		mu                       sync.Mutex
		issued, retried, repeats int
		seen                     = map[string]bool{}
		firstErrs                = map[string]int{}
	)
	for w := range 3 {
		kind, next := []string{"seq", "seg", "snowflake"}[w], []func(context.Context) (idgen.ID, error){seq.Next, seg.Next, sf.Next}[w]
		wg.Go(func() {
			for runCtx.Err() == nil {
				for try := 0; ; try++ {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
					v, err := next(cctx)
					cancel()
					mu.Lock()
					if err == nil {
						issued++
						if k := fmt.Sprint(kind, v); seen[k] {
							repeats++
						} else {
							seen[k] = true
						}
						mu.Unlock()
						break
					}
					retried++
					if try == 0 {
						switch {
						case errors.Is(err, idgen.ErrUnavailable):
							firstErrs[kind+": unavailable"]++
						default:
							firstErrs[kind+": "+err.Error()]++
						}
					}
					mu.Unlock()
					if try >= 100 {
						t.Errorf("%s never answered: %v", kind, err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	faults := 0
	for range chaosScale() {
		for _, tag := range []string{"{fi}"} {
			n, err := c.FaultRound(ctx, tag, 300*time.Millisecond)
			faults += n
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	stopLoad()
	wg.Wait()
	t.Logf("%d faults: %d IDs, %d calls failed and were called again; first errors: %v", faults, issued, retried, firstErrs)
	t.Logf("chaos table | idgen Sequence/Segment/Snowflake | %d | %d | %d | %d", issued, faults, retried, repeats)
	if repeats > 0 {
		t.Fatalf("%d values handed out twice", repeats)
	}
}
