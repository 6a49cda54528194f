package lock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

// An option that cannot apply to a Redlock is refused, by NewRedlock and
// by every call of a Redlock.Mutex given it, instead of being accepted and
// ignored; nothing reaches Redis.
func TestRedlock_optionsThatCannotApplyAreRefused(t *testing.T) {
	ctx := t.Context()
	rdb := sharedClient(t)
	for name, opt := range map[string]lock.Option{
		"WithFair":               lock.WithFair(true),
		"WithReplicaAck":         lock.WithReplicaAck(1, 100*time.Millisecond),
		"WithRequiredReplicaAck": lock.WithRequiredReplicaAck(1, 100*time.Millisecond),
		"WithRetry":              lock.WithRetry(5, time.Millisecond, 10*time.Millisecond),
		"WithClusterBudget":      lock.WithClusterBudget(time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t)
			rl, err := lock.NewRedlock([]redis.UniversalClient{rdb}, lock.WithKeyPrefix(prefix), opt)
			require.ErrorIs(t, err, lock.ErrInvalid)
			require.Nil(t, rl)

			rl = mustRedlock(t, []redis.UniversalClient{rdb}, lock.WithKeyPrefix(prefix))
			_, err = rl.Mutex("job", opt).TryAcquire(ctx)
			require.ErrorIs(t, err, lock.ErrInvalid)
			require.NoError(t, rl.Close())
			require.Empty(t, rdb.Keys(ctx, prefix+":*").Val())
		})
	}
}

// A Mutex given WithRetry or WithClusterBudget outside their bounds fails
// every call with ErrInvalid (New refuses them too: reliability's
// TestNew_refusesBadOptions checks every module's constructor); nothing
// reaches Redis.
func TestMutex_retryBounds(t *testing.T) {
	ctx := t.Context()
	rdb := sharedClient(t)
	prefix := testPrefix(t)
	c := mustNew(t, rdb, lock.WithKeyPrefix(prefix))
	defer c.Close()
	for name, opt := range map[string]lock.Option{
		"no attempt":      lock.WithRetry(0, 0, 0),
		"min above max":   lock.WithRetry(3, time.Second, time.Millisecond),
		"negative budget": lock.WithClusterBudget(-time.Second),
	} {
		_, err := c.Mutex("job", opt).TryAcquire(ctx)
		require.ErrorIs(t, err, lock.ErrInvalid, name)
	}
	require.Empty(t, rdb.Keys(ctx, prefix+":*").Val())
	l, err := c.Mutex("job", lock.WithRetry(1, 0, 0), lock.WithClusterBudget(0)).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}
