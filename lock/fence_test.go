package lock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

func TestFenceKey(t *testing.T) {
	require.Equal(t, "redkit:fence:v1:{shop-7}:payout:m-42", lock.FenceKey("", "shop-7", "payout:m-42"))
	require.Equal(t, "app:fence:v1:{acct}:nightly", lock.FenceKey("app", "acct", "nightly"))
}

func TestCheckFence_rejectsStaleToken(t *testing.T) {
	rdb := sharedClient(t)
	ctx := t.Context()
	key := lock.FenceKey(testPrefix(t), "res", "m")

	require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "m", Token: 5}))
	require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "m", Token: 5}), "the same token writes again")
	require.ErrorIs(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "m", Token: 4}), lock.ErrStaleFence)
	require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "m", Token: 1<<53 - 1}))
	require.ErrorIs(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "m", Token: 6}), lock.ErrStaleFence)
	v, err := rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "9007199254740991", v, "the highest token is recorded exactly")
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, int64(-1), int64(ttl), "the fence key never expires")
}

func TestCheckFence_badToken(t *testing.T) {
	rdb := sharedClient(t)
	key := lock.FenceKey(testPrefix(t), "res", "m")
	require.ErrorIs(t, lock.CheckFence(t.Context(), rdb, key, lock.Fence{Name: "m"}), lock.ErrInvalid)
	require.ErrorIs(t, lock.CheckFence(t.Context(), rdb, key, lock.Fence{Name: "m", Token: 1 << 53}), lock.ErrInvalid)
	n, err := rdb.Exists(t.Context(), key).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
}

// TestFenceLua_inScript prepends FenceLua to a script that writes a value
// only under a current fence, as stock and wallet do.
func TestFenceLua_inScript(t *testing.T) {
	rdb := sharedClient(t)
	ctx := t.Context()
	p := testPrefix(t)
	fenceKey := lock.FenceKey(p, "res", "m")
	dataKey := p + ":{res}:data"
	write := redis.NewScript(lock.FenceLua + `
if not redkit_fence(KEYS[1], ARGV[1]) then return redis.error_reply('STALE fence') end
redis.call('SET', KEYS[2], ARGV[2])
return 1`)
	writeNum := redis.NewScript(lock.FenceLua + `
if not redkit_fence(KEYS[1], tonumber(ARGV[1])) then return 0 end
return 1`)

	require.NoError(t, write.Run(ctx, rdb, []string{fenceKey, dataKey}, "10", "a").Err())
	err := write.Run(ctx, rdb, []string{fenceKey, dataKey}, "9", "b").Err()
	require.ErrorContains(t, err, "STALE")
	v, err := rdb.Get(ctx, dataKey).Result()
	require.NoError(t, err)
	require.Equal(t, "a", v, "the stale write did not happen")

	for _, bad := range []string{"0", "-1", "1.5", "abc", "", "9007199254740992", "1e3", " 12", "0x20"} {
		err = write.Run(ctx, rdb, []string{fenceKey, dataKey}, bad, "c").Err()
		require.ErrorContains(t, err, "STALE", "token %q", bad)
	}
	for _, bad := range []string{"0", "-1", "1.5", "9007199254740992"} {
		n, err := writeNum.Run(ctx, rdb, []string{fenceKey}, bad).Int()
		require.NoError(t, err)
		require.Zero(t, n, "numeric token %s", bad)
	}
	n, err := writeNum.Run(ctx, rdb, []string{fenceKey}, "11").Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "a numeric token works too")
	seen, err := rdb.Get(ctx, fenceKey).Result()
	require.NoError(t, err)
	require.Equal(t, "11", seen)
}
