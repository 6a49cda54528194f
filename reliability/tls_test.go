package reliability_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Every module over TLS: one server and one 3-master Cluster that accept
// TLS connections only, with a CA generated in the test; each module runs
// its writes, refusals and (lock) notified waiting on both.
func TestTLS_everyModule(t *testing.T) {
	certs := redistest.NewTLS(t)
	servers := map[string]redis.UniversalClient{
		"single":  redistest.New(t, redistest.Options{TLS: certs}).Client(),
		"cluster": redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}}).Client(),
	}
	for name, rdb := range servers {
		t.Run(name+"/lock", func(t *testing.T) {
			ctx := t.Context()
			locks, err := lock.New(rdb, lock.WithKeyPrefix("tls"))
			must(t, err)
			defer locks.Close()
			m := locks.Mutex("shop-7/payout", lock.WithTTL(5*time.Second))
			l, err := m.Acquire(ctx)
			must(t, err)
			waited := make(chan error, 1)
			go func() { // wakes by notification over TLS
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				l, err := locks.Mutex("shop-7/payout").Acquire(ctx)
				if err == nil {
					err = l.Release(ctx)
				}
				waited <- err
			}()
			must(t, lock.CheckFence(ctx, rdb, lock.FenceKey("tls", "acct-1", m.Name()), l.Fence()))
			must(t, l.Release(ctx))
			must(t, <-waited)
		})
		t.Run(name+"/stock", func(t *testing.T) {
			ctx := t.Context()
			inv, err := stock.New(rdb, stock.WithKeyPrefix("tls"))
			must(t, err)
			defer inv.Close()
			must(t, inv.Create(ctx, "shop-7/sku-1", 2))
			buy := func(id string, qty int64) (stock.Result, error) {
				return inv.Deduct(ctx, stock.Order{ID: id, Buyer: "u-" + id, Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: qty}}})
			}
			res, err := buy("o-1", 2)
			must(t, err)
			if lv := res.Levels["shop-7/sku-1"]; lv != (stock.Levels{Sold: 2}) {
				t.Fatalf("levels %+v", lv)
			}
			if _, err := buy("o-2", 1); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("second order: %v, want ErrSoldOut", err)
			}
		})
		t.Run(name+"/wallet", func(t *testing.T) {
			ctx := t.Context()
			led, err := wallet.New(rdb, wallet.WithKeyPrefix("tls"), wallet.WithRecovery(0))
			must(t, err)
			defer led.Close()
			must(t, led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY")))
			_, err = led.Credit(ctx, wallet.Tx{ID: "tx-1", Account: "shop-7/alice", Amount: 100})
			must(t, err)
			res, err := led.Debit(ctx, wallet.Tx{ID: "tx-2", Account: "shop-7/alice", Amount: 60})
			must(t, err)
			if res.Balance.Posted != 40 {
				t.Fatalf("posted %d, want 40", res.Balance.Posted)
			}
			if _, err := led.Debit(ctx, wallet.Tx{ID: "tx-3", Account: "shop-7/alice", Amount: 60}); !errors.Is(err, wallet.ErrInsufficientFunds) {
				t.Fatalf("overdraft: %v, want ErrInsufficientFunds", err)
			}
		})
		t.Run(name+"/idgen", func(t *testing.T) {
			ctx := t.Context()
			seq, err := idgen.NewSequence(rdb, "shop-7/orders", idgen.WithKeyPrefix("tls"))
			must(t, err)
			seg, err := idgen.NewSegment(rdb, "shop-7/order-no", idgen.WithKeyPrefix("tls"))
			must(t, err)
			defer seg.Close()
			var last idgen.ID
			for range 3 {
				a, err := seq.Next(ctx)
				must(t, err)
				b, err := seg.Next(ctx)
				must(t, err)
				if a <= last || b <= 0 {
					t.Fatalf("IDs %d, %d after %d", a, b, last)
				}
				last = a
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
