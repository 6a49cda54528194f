package stock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// A deduction over TLS: one server and a 3-master Cluster that accept TLS
// connections only, with a CA generated in the test.
func TestTLS_deduct(t *testing.T) {
	certs := redistest.NewTLS(t)
	single := redistest.New(t, redistest.Options{TLS: certs}).Client()
	cluster := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}}).Client()
	for name, rdb := range map[string]redis.UniversalClient{"single": single, "cluster": cluster} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			inv := mustNew(t, rdb)
			t.Cleanup(func() { _ = inv.Close() })
			require.NoError(t, inv.Create(ctx, "shop-7/sku-1", 2))
			res, err := inv.Deduct(ctx, order("o-1", "u-1", "shop-7/sku-1", 2))
			require.NoError(t, err)
			require.Equal(t, stock.Levels{Sold: 2}, res.Levels["shop-7/sku-1"])
			_, err = inv.Deduct(ctx, order("o-2", "u-2", "shop-7/sku-1", 1))
			require.ErrorIs(t, err, stock.ErrSoldOut)
		})
	}
}
