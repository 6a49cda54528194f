package lock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// A lock over TLS: one server and a 3-master Cluster that accept TLS
// connections only, with a CA generated in the test.
func TestTLS_acquireRelease(t *testing.T) {
	certs := redistest.NewTLS(t)
	single := redistest.New(t, redistest.Options{TLS: certs}).Client()
	cluster := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}}).Client()
	for name, rdb := range map[string]redis.UniversalClient{"single": single, "cluster": cluster} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			locks := newLocks(t, rdb)
			m := locks.Mutex("shop-7/payout", lock.WithTTL(5*time.Second))
			l, err := m.Acquire(ctx)
			require.NoError(t, err)
			waited := waitFor(locks.Mutex("shop-7/payout")) // wakes by notification over TLS
			require.NoError(t, lock.CheckFence(ctx, rdb, lock.FenceKey("", "acct-1", m.Name()), l.Fence()))
			require.NoError(t, l.Release(ctx))
			require.NoError(t, <-waited)
		})
	}
}
