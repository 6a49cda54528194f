package stock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// Redis is killed with SIGKILL in the middle of a sale and restarted on the
// same AOF (appendfsync always). Every order a buyer was told succeeded is
// still there, none is applied twice, and calls that ended without a
// definite answer get one when repeated with the same order ID.
func TestInventory_Deduct_killedMidSaleConcurrentSafe(t *testing.T) {
	srv := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	rdb := srv.Client(func(o *redis.Options) { o.DialTimeout, o.ReadTimeout = 500*time.Millisecond, 500*time.Millisecond })
	inv := mustNew(t, rdb)
	t.Cleanup(func() { _ = inv.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	require.NoError(t, inv.Create(ctx, "sku", 1_000_000))

	const buyers, perBuyer = 32, 60
	var acked sync.Map // order ID -> struct{}
	var placed, unresolved atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for b := range buyers {
		wg.Go(func() {
			for k := range perBuyer {
				o := order(fmt.Sprintf("o-%d-%d", b, k), fmt.Sprintf("b-%d", b), "sku", 1)
				for {
					_, err := inv.Deduct(ctx, o)
					if err == nil {
						acked.Store(o.ID, struct{}{})
						placed.Add(1)
						break
					}
					if ctx.Err() != nil {
						errs <- err
						return
					}
					// Unknown outcome, or the server is down: the same order
					// again after a pause, as a caller would.
					unresolved.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	waitFor(t, func() bool { return placed.Load() >= buyers*perBuyer/3 })
	require.NoError(t, srv.Kill())
	time.Sleep(time.Second) // longer than the module's retries last
	require.NoError(t, srv.Restart(ctx))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	n := 0
	acked.Range(func(key, _ any) bool {
		n++
		res, err := inv.Deduct(ctx, order(key.(string), "b-"+between(key.(string)), "sku", 1))
		require.NoError(t, err)
		require.True(t, res.Replayed, key)
		return true
	})
	require.Equal(t, buyers*perBuyer, n)
	lv, err := inv.Level(ctx, "sku")
	require.NoError(t, err)
	require.Equal(t, int64(n), lv.Sold, "acknowledged orders lost or applied twice")
	rep, err := inv.Audit(ctx, "sku")
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Problems)
	t.Logf("calls repeated after a failure: %d", unresolved.Load())
	require.NotZero(t, unresolved.Load(), "the kill went unnoticed")
}

// between returns the buyer number inside "o-<buyer>-<k>".
func between(id string) string {
	var b, k int
	_, _ = fmt.Sscanf(id, "o-%d-%d", &b, &k)
	return fmt.Sprint(b)
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
