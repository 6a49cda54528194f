package redistest_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestKeySlot_matchesServer(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{Config: []string{"cluster-enabled yes"}}).Client()
	for _, k := range []string{"", "a", "{a}", "x{a}y", "{}a", "a{}{b}", "{a}{b}", "redkit:stock:v1:{shop-7}:sku:shop-7/sku-1", "\xff{\x00}"} {
		want, err := rdb.ClusterKeySlot(t.Context(), k).Result()
		require.NoError(t, err)
		require.EqualValues(t, want, redistest.KeySlot(k), "%q", k)
	}
	require.Equal(t, "shop-7", redistest.HashTag("p:m:v1:{shop-7}:sku:{x}"))
	require.Equal(t, "a{}b", redistest.HashTag("a{}b"))
}

func TestCheckKeyTag(t *testing.T) {
	require.NoError(t, redistest.CheckKeyTag("p:m:v1:{g}:k:g/x", "g"))
	require.Error(t, redistest.CheckKeyTag("p:m:v1:{g}:k:{h}", "g"))
	require.Error(t, redistest.CheckKeyTag("p:m:v1:{h}:k", "g"))
	require.Error(t, redistest.CheckKeyTag("p:m:v1:g:k", "g"))
	require.Error(t, redistest.CheckKeyTag("p:m:v1:}g{:k", "g"))
}

func TestSnapshot(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	require.NoError(t, rdb.HSet(ctx, "p:a", "f", 1).Err())
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: "p:j", Values: []any{"k", "v"}}).Err())
	require.NoError(t, rdb.Set(ctx, "q:x", 1, 0).Err())
	before, err := redistest.Snapshot(ctx, rdb, "p:*")
	require.NoError(t, err)
	require.Len(t, before, 2)
	same, err := redistest.Snapshot(ctx, rdb, "p:*")
	require.NoError(t, err)
	require.Equal(t, before, same)
	require.NoError(t, rdb.HSet(ctx, "p:a", "f", 2).Err())
	after, err := redistest.Snapshot(ctx, rdb, "p:*")
	require.NoError(t, err)
	require.NotEqual(t, before, after)
}

// RequireUnchanged passes when nothing changed and fails, naming the key,
// when a key under the pattern changed or the database grew.
func TestState_RequireUnchanged(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	require.NoError(t, rdb.HSet(ctx, "p:a", "f", 1).Err())
	fails := func(change func()) string {
		before := redistest.Capture(t, rdb, "p:*")
		change()
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); before.RequireUnchanged(f, rdb, "the call") }()
		<-done
		return f.msg
	}
	require.Empty(t, fails(func() {}))
	require.Contains(t, fails(func() { rdb.HSet(ctx, "p:a", "f", 2) }), "p:a")
	require.Contains(t, fails(func() { rdb.Del(ctx, "p:a") }), "p:a (deleted)")
	require.Contains(t, fails(func() { rdb.Set(ctx, "elsewhere", 1, 0) }), "grew the database")
}
