package redistest_test

import (
	"crypto/tls"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func requireTLS(t *testing.T) {
	t.Helper()
	require.NoError(t, redistest.TLSSupported(), "use a redis-server built with TLS, as Debian's is")
}

func TestTLS_server(t *testing.T) {
	requireTLS(t)
	certs := redistest.NewTLS(t)
	s := redistest.New(t, redistest.Options{TLS: certs, AOF: true})
	ctx := t.Context()
	rdb := s.Client()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Restart(ctx), "restarts over TLS too")
	require.Equal(t, "v", rdb.Get(ctx, "k").Val())

	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer plain.Close()
	require.Error(t, plain.Ping(ctx).Err(), "plain TCP is refused")

	untrusted := s.Client(func(o *redis.Options) { o.TLSConfig, o.MaxRetries = &tls.Config{MinVersion: tls.VersionTLS12}, -1 })
	require.Error(t, untrusted.Ping(ctx).Err(), "a client that does not trust the CA refuses the server")
}

func TestTLS_pairAndCluster(t *testing.T) {
	requireTLS(t)
	certs := redistest.NewTLS(t)
	ctx := t.Context()
	p := redistest.NewPair(t, redistest.Options{TLS: certs})
	require.NoError(t, p.Primary.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, p.Sync(ctx), "replication runs over TLS")
	require.Equal(t, "v", p.Replica.Client().Get(ctx, "k").Val())

	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}})
	cc := c.Client()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		require.NoError(t, cc.Set(ctx, k, k, 0).Err())
		require.Equal(t, k, cc.Get(ctx, k).Val())
	}
}
