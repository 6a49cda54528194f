package stock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/stock"
)

// Consume says which SKU's journal each entry came from, also for an entry
// that names another SKU (one written there by other means than stock's
// scripts): a consumer books each entry into the journal it was read from.
func TestConsume_entryJournal(t *testing.T) {
	inv, rdb, prefix := newInventory(t, stock.WithIdempotencyWindow(time.Hour))
	require.Equal(t, time.Hour, inv.IdempotencyWindow())
	ctx := t.Context()
	skus := []string{"j/a", "j/b"}
	for _, s := range skus {
		require.NoError(t, inv.Create(ctx, s, 5))
	}
	bad, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + ":stock:v1:{j}:journal:j/a",
		Values: []any{"op", "x", "kind", "deduct", "sku", "j/b"}}).Result()
	require.NoError(t, err)
	var mu sync.Mutex
	var got []stock.Entry
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- inv.Consume(cctx, stock.Consumer{Group: "g", Name: "c", SKUs: skus, Poll: 5 * time.Millisecond},
			func(_ context.Context, es []stock.Entry) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, es...)
				return nil
			})
	}()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, e := range got {
		switch {
		case e.Op == "x": // stream IDs are per journal: another's may equal bad
			found = true
			require.Equal(t, bad, e.ID)
			require.Equal(t, "j/b", e.SKU)
			require.Equal(t, "j/a", e.Journal, "the damaged entry")
		default:
			require.Equal(t, e.SKU, e.Journal, e.ID)
		}
	}
	require.True(t, found, "the damaged entry was handed over")
}
