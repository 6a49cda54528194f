package stock_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// shared is one redis-server for the tests that need no faults; each test
// uses its own key prefix on it.
var shared *redistest.Server

type mainRun struct{ m *testing.M }

func (r mainRun) Run() int {
	s, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = s
	defer s.Close()
	return r.m.Run()
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // faults make go-redis log every failed dial
	goleak.VerifyTestMain(mainRun{m}, goleak.IgnoreAnyFunction(redistest.DialProber))
}

var prefixes atomic.Int64

// newInventory returns an Inventory with a key prefix no other test uses,
// on the shared server, and a client for looking at the keys.
func newInventory(t *testing.T, opts ...stock.Option) (*stock.Inventory, *redis.Client, string) {
	t.Helper()
	rdb := shared.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	inv := mustNew(t, rdb, append([]stock.Option{stock.WithKeyPrefix(prefix)}, opts...)...)
	t.Cleanup(func() { require.NoError(t, inv.Close()) })
	prefixOfInv.Store(inv, prefix)
	return inv, rdb, prefix
}

// keysUnder lists the keys whose name starts with prefix.
func keysUnder(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	ks, err := rdb.Keys(t.Context(), prefix+":*").Result()
	require.NoError(t, err)
	return ks
}

func order(id, buyer string, items ...any) stock.Order {
	o := stock.Order{ID: id, Buyer: buyer}
	for i := 0; i < len(items); i += 2 {
		o.Items = append(o.Items, stock.Item{SKU: items[i].(string), Qty: int64(items[i+1].(int))})
	}
	return o
}

// stocked is newInventory with SKUs created, given as pairs of SKU and
// initial units: stocked(t, "g/a", 10, "g/b", 5).
func stocked(t *testing.T, skus ...any) *stock.Inventory {
	t.Helper()
	inv, _, _ := newInventory(t)
	for i := 0; i < len(skus); i += 2 {
		require.NoError(t, inv.Create(t.Context(), skus[i].(string), int64(skus[i+1].(int))))
	}
	return inv
}

func opID(kind string, i int) string { return fmt.Sprintf("%s-%d", kind, i) }

// mustNew is stock.New for tests whose options are valid: an error fails
// the test.
func mustNew(tb testing.TB, rdb redis.UniversalClient, opts ...stock.Option) *stock.Inventory {
	tb.Helper()
	inv, err := stock.New(rdb, opts...)
	if err != nil {
		tb.Fatalf("stock.New: %v", err)
	}
	return inv
}
