package lock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

// An option that cannot apply to a Redlock is refused, on NewRedlock and
// on Redlock.Mutex, instead of being accepted and ignored; nothing reaches
// Redis.
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
			rl := lock.NewRedlock([]redis.UniversalClient{rdb}, lock.WithKeyPrefix(prefix), opt)
			_, err := rl.Mutex("job").TryAcquire(ctx)
			require.ErrorIs(t, err, lock.ErrInvalid)
			require.NoError(t, rl.Close())

			rl = lock.NewRedlock([]redis.UniversalClient{rdb}, lock.WithKeyPrefix(prefix))
			_, err = rl.Mutex("job", opt).TryAcquire(ctx)
			require.ErrorIs(t, err, lock.ErrInvalid)
			require.NoError(t, rl.Close())
			require.Empty(t, rdb.Keys(ctx, prefix+":*").Val())
		})
	}
}

// WithRetry and WithClusterBudget take the same shape in every module and
// refuse values outside their bounds.
func TestOptions_retryBounds(t *testing.T) {
	ctx := t.Context()
	rdb := sharedClient(t)
	for name, opt := range map[string]lock.Option{
		"no attempt":        lock.WithRetry(0, 0, 0),
		"too many attempts": lock.WithRetry(101, 0, 0),
		"min above max":     lock.WithRetry(3, time.Second, time.Millisecond),
		"negative backoff":  lock.WithRetry(3, -time.Millisecond, time.Millisecond),
		"backoff too long":  lock.WithRetry(3, 0, 2*time.Minute),
		"budget too long":   lock.WithClusterBudget(2 * time.Minute),
		"negative budget":   lock.WithClusterBudget(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			c := lock.New(rdb, lock.WithKeyPrefix(testPrefix(t)), opt)
			defer c.Close()
			_, err := c.Mutex("job").TryAcquire(ctx)
			require.ErrorIs(t, err, lock.ErrInvalid)
		})
	}
	c := lock.New(rdb, lock.WithKeyPrefix(testPrefix(t)), lock.WithRetry(1, 0, 0), lock.WithClusterBudget(0))
	defer c.Close()
	l, err := c.Mutex("job").TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}
