package wallet_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// A debit over TLS: one server and a 3-master Cluster that accept TLS
// connections only, with a CA generated in the test.
func TestTLS_debit(t *testing.T) {
	certs := redistest.NewTLS(t)
	single := redistest.New(t, redistest.Options{TLS: certs}).Client()
	cluster := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}}).Client()
	for name, rdb := range map[string]redis.UniversalClient{"single": single, "cluster": cluster} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			led := mustNew(t, rdb)
			t.Cleanup(func() { _ = led.Close() })
			require.NoError(t, led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY")))
			_, err := led.Credit(ctx, wallet.Tx{ID: "tx-1", Account: "shop-7/alice", Amount: 100})
			require.NoError(t, err)
			res, err := led.Debit(ctx, wallet.Tx{ID: "tx-2", Account: "shop-7/alice", Amount: 60})
			require.NoError(t, err)
			require.EqualValues(t, 40, res.Balance.Posted)
			_, err = led.Debit(ctx, wallet.Tx{ID: "tx-3", Account: "shop-7/alice", Amount: 60})
			require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
		})
	}
}
