package idgen_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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
	c, rdb := redistest.NewFailoverCluster(t)
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
	answers := &redistest.Answers{Tries: 100, Timeout: 5 * time.Second, Kinds: map[string]error{
		"unavailable": idgen.ErrUnavailable, "lease lost": idgen.ErrLeaseLost}}
	runCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		repeats int
		seen    = map[string]bool{}
	)
	for w := range 3 {
		kind, next := []string{"seq", "seg", "snowflake"}[w], []func(context.Context) (idgen.ID, error){seq.Next, seg.Next, sf.Next}[w]
		wg.Go(func() {
			for runCtx.Err() == nil {
				var v idgen.ID
				if ok, err := answers.Call(ctx, func(ctx context.Context) (err error) {
					v, err = next(ctx)
					return err
				}); !ok {
					t.Errorf("%s never answered: %v", kind, err)
					return
				}
				mu.Lock()
				if k := fmt.Sprint(kind, v); seen[k] {
					repeats++
				} else {
					seen[k] = true
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	faults, err := c.FaultRounds(ctx, chaosScale(), 300*time.Millisecond, "{fi}")
	stopLoad()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d faults: %d IDs, %d calls failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | idgen Sequence/Segment/Snowflake | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), repeats)
	if repeats > 0 {
		t.Fatalf("%d values handed out twice", repeats)
	}
}
