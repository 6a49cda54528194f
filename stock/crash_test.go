package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
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
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, "condition not reached within a minute")
}

// TestChaos_killedRepeatedly kills Redis (AOF always) 3 x CHAOS_SCALE times
// during a sale with reservations, confirmations and refunds, and checks
// that no acknowledged operation was lost and the books balance.
func TestChaos_killedRepeatedly(t *testing.T) {
	scale := redistest.Chaos(t)
	srv := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	rdb := srv.Client(func(o *redis.Options) { o.DialTimeout, o.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond })
	inv := mustNew(t, rdb)
	defer inv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	require.NoError(t, inv.Create(ctx, "sku", 1_000_000))

	// do repeats an operation with the same arguments until it gets a
	// definite answer, as a caller is told to.
	do := func(f func() error) error {
		for {
			err := f()
			if err == nil || ctx.Err() != nil {
				return err
			}
			for _, answer := range []error{stock.ErrSoldOut, stock.ErrBuyerLimit, stock.ErrConflict, stock.ErrInvalid,
				stock.ErrHoldExpired, stock.ErrCancelled, stock.ErrSKUNotFound, stock.ErrSKUClosed} {
				if errors.Is(err, answer) {
					return err
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var sold, refunded atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for b := range 16 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				o := order(fmt.Sprintf("o-%d-%d", b, k), fmt.Sprintf("b-%d", b), "sku", 1+k%3)
				q := o.Items[0].Qty
				var err error
				switch k % 3 {
				case 0:
					err = do(func() error { _, err := inv.Deduct(ctx, o); return err })
				case 1:
					err = errors.Join(
						do(func() error { _, err := inv.Reserve(ctx, o, time.Hour); return err }),
						do(func() error { _, err := inv.Confirm(ctx, o); return err }))
				default:
					err = errors.Join(
						do(func() error { _, err := inv.Deduct(ctx, o); return err }),
						do(func() error { _, err := inv.Refund(ctx, o); return err }))
					refunded.Add(q)
				}
				if err != nil {
					t.Error(err)
					return
				}
				sold.Add(q)
			}
		})
	}
	for range 3 * scale {
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, srv.Kill())
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, srv.Restart(ctx))
	}
	close(stop)
	wg.Wait()
	lv := level(t, inv, "sku")
	require.Equal(t, sold.Load(), lv.Sold)
	require.Equal(t, refunded.Load(), lv.Refunded)
	require.Zero(t, lv.Reserved)
	audited(t, inv, "sku")
}
