package stock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// TestChaos_killedRepeatedly kills Redis (AOF always) 3 x CHAOS_SCALE times
// during a sale with reservations, confirmations and refunds, and checks
// that no acknowledged operation was lost and the books balance.
func TestChaos_killedRepeatedly(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
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
				stock.ErrHoldExpired, stock.ErrCancelled, stock.ErrNotFound, stock.ErrSKUClosed} {
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
	for range 3 * chaosScale() {
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
