package idgen_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// TestLease_Cluster_underResharding: leased Snowflakes on an ordinary
// ClusterClient while the slot of their service's node table is moved
// again and again, key by key with a pause: generators start (leasing a
// node), renew every TTL/3 and close (releasing it) throughout. No error
// reaches the caller (no lease refused, none lost), no two live generators
// hold one node, and no ID is handed out twice.
func TestLease_Cluster_underResharding(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	ctx := t.Context()
	for i := range 10 {
		if err := rdb.Set(ctx, fmt.Sprintf("{rsvc}:fill:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := c.Reshard(ctx, []string{"{rsvc}"}, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		seen = map[idgen.ID]bool{}
		live = map[int64]bool{}
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := range 4 {
		wg.Go(func() {
			for round := range 3 {
				s, err := idgen.NewLeasedSnowflake(ctx, rdb, "rsvc", idgen.WithLeaseTTL(time.Second))
				if err != nil {
					fail(fmt.Errorf("lease %d/%d: %w", w, round, err))
					continue
				}
				mu.Lock()
				if live[s.Node()] {
					errs = append(errs, fmt.Errorf("node %d leased twice", s.Node()))
				}
				live[s.Node()] = true
				mu.Unlock()
				// Long enough for a few renewals while slots move.
				for range 40 {
					id, err := s.Next(ctx)
					mu.Lock()
					if err != nil {
						errs = append(errs, fmt.Errorf("next: %w", err))
					} else if seen[id] {
						errs = append(errs, fmt.Errorf("%d twice", id))
					}
					seen[id] = true
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
				if st := s.Lease(); st.Err != nil {
					fail(fmt.Errorf("lease status: %w", st.Err))
				}
				mu.Lock()
				delete(live, s.Node())
				mu.Unlock()
				if err := s.Close(); err != nil {
					fail(fmt.Errorf("close: %w", err))
				}
			}
		})
	}
	wg.Wait()
	st := stop()
	if st.Err != nil {
		t.Fatal(st.Err)
	}
	t.Logf("%d IDs while %d slot moves migrated %d keys; %d errors", len(seen), st.Moves, st.Keys, len(errs))
	if st.Moves == 0 {
		t.Fatal("no slot moved")
	}
	if len(errs) > 0 {
		t.Fatalf("%d errors returned to the caller, first: %v", len(errs), errs[0])
	}
}
