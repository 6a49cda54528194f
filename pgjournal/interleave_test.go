package pgjournal_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// afterHook calls after with each command (or pipeline) once Redis
// answered it, on the caller's goroutine: another client's write made
// there lands at that exact point of the caller's sequence, as a
// concurrent writer's may.
type afterHook struct{ after func(cmds []redis.Cmder) }

func (h afterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h afterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after([]redis.Cmder{cmd})
		return err
	}
}

func (h afterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.after(cmds)
		return err
	}
}

// hasCmd reports whether cmds hold a command named name that Redis
// answered with a value: a script's EVALSHA refused as NOSCRIPT (and sent
// again as EVAL) does not count.
func hasCmd(cmds []redis.Cmder, name string) bool {
	for _, c := range cmds {
		if !strings.EqualFold(c.Name(), name) || c.Err() != nil {
			continue
		}
		if v, ok := c.(*redis.Cmd); !ok || v.Val() != nil {
			return true
		}
	}
	return false
}

// Another client writes to an account while ReconcileWallet compares it:
// a hold right after the first read of the balance, its void right after
// the read of the journal. Both reads of the balance agree (the hold and
// its void cancel out), and the journal read holds the hold and not the
// void: the reconciler must not take that moment for drift.
func TestReconcileWallet_changedAndBackDuringComparison(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	acct := "aba/x"
	walletWork(t, f.led, "aba", 10, acct)
	if _, err := f.led.Credit(ctx, wallet.Tx{ID: "aba-seed", Account: acct, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	f.catchUp(nil, []string{acct})
	var mu sync.Mutex
	step := 0
	hooked := sharedRedis.Client()
	hooked.AddHook(afterHook{after: func(cmds []redis.Cmder) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case step == 0 && (hasCmd(cmds, "evalsha") || hasCmd(cmds, "eval")):
			step++
			if _, err := f.led.Hold(context.Background(), wallet.HoldReq{ID: "aba-h", Account: acct, Amount: 7, TTL: time.Hour}); err != nil {
				t.Error(err)
			}
		case step == 1 && hasCmd(cmds, "xrange"):
			step++
			if _, err := f.led.Void(context.Background(), acct, "aba-h"); err != nil {
				t.Error(err)
			}
		}
	}})
	led, err := wallet.New(hooked, wallet.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	ds, err := f.book.ReconcileWallet(ctx, led, acct)
	if err != nil {
		t.Fatal(err)
	}
	if step != 2 {
		t.Fatalf("the writes were not made at their moments (step %d)", step)
	}
	if len(ds) != 0 {
		t.Fatalf("BUG: \"the reconciler reports drift, not lag\": a hold and its void written during the comparison "+
			"(the void after the journal read) reported as drift: Redis %v, book %v (%d unbooked)", ds[0].Redis, ds[0].Book, ds[0].Unbooked)
	}
}

// The same for a stock SKU: a reservation right after the first read of
// the levels, its cancellation right after the read of the journal.
func TestReconcileStock_changedAndBackDuringComparison(t *testing.T) {
	f := shared(t)
	ctx := t.Context()
	sku := "abs/s"
	stockWork(t, f.inv, "abs", 10, sku)
	f.catchUp([]string{sku}, nil)
	o := stock.Order{ID: "abs-r", Buyer: "b", Items: []stock.Item{{SKU: sku, Qty: 2}}}
	var mu sync.Mutex
	step := 0
	hooked := sharedRedis.Client()
	hooked.AddHook(afterHook{after: func(cmds []redis.Cmder) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case step == 0 && !hasCmd(cmds, "xrange") && (hasCmd(cmds, "evalsha") || hasCmd(cmds, "hmget") || hasCmd(cmds, "hgetall")):
			step++
			if _, err := f.inv.Reserve(context.Background(), o, time.Hour); err != nil {
				t.Error(err)
			}
		case step == 1 && hasCmd(cmds, "xrange"):
			step++
			if _, err := f.inv.Cancel(context.Background(), o); err != nil {
				t.Error(err)
			}
		}
	}})
	inv, err := stock.New(hooked, stock.WithKeyPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	ds, err := f.book.ReconcileStock(ctx, inv, sku)
	if err != nil {
		t.Fatal(err)
	}
	if step != 2 {
		t.Fatalf("the writes were not made at their moments (step %d)", step)
	}
	if len(ds) != 0 {
		t.Fatalf("BUG: \"the reconciler reports drift, not lag\": a reservation and its cancellation written during the comparison "+
			"(the cancellation after the journal read) reported as drift: Redis %v, book %v (%d unbooked)", ds[0].Redis, ds[0].Book, ds[0].Unbooked)
	}
}
