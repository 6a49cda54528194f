package redistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestProxy_Dropped(t *testing.T) {
	s, px, rdb := proxied(t, 100*time.Millisecond)
	require.NoError(t, rdb.Ping(t.Context()).Err())
	require.Zero(t, px.Dropped())
	px.DropReplies(true)
	require.Error(t, rdb.Incr(t.Context(), "k").Err())
	require.Positive(t, px.Dropped())
	n, err := s.Client().Get(t.Context(), "k").Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "the command whose reply was dropped ran")
}

func TestServer_Busy(t *testing.T) {
	s := redistest.New(t, redistest.Options{Config: []string{"busy-reply-threshold 20"}})
	done, err := s.Busy(t.Context(), 300*time.Millisecond)
	require.NoError(t, err)
	err = s.Client().Set(t.Context(), "k", "v", 0).Err()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "BUSY "), "%v", err)
	require.NoError(t, <-done)
	require.NoError(t, s.Client().Set(t.Context(), "k", "v", 0).Err())
}

func TestCluster_MoveSlot(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2})
	ctx := t.Context()
	stale := c.Client()
	require.NoError(t, stale.Set(ctx, "{g}:a", "1", 0).Err())
	require.NoError(t, stale.Set(ctx, "{g}:b", "2", 0).Err())
	before, err := stale.MasterForKey(ctx, "{g}:a")
	require.NoError(t, err)

	to, err := c.MoveSlot(ctx, "{g}:a")
	require.NoError(t, err)
	require.NotEqual(t, before.Options().Addr, to.Addr())
	require.Equal(t, "2", to.Client().Get(ctx, "{g}:b").Val(), "the slot's keys moved with it")

	// A client that sends once meets the redirect.
	once := c.Client(func(o *redis.ClusterOptions) { o.MaxRedirects = -1 })
	require.NoError(t, once.Ping(ctx).Err())
	m, err := once.MasterForKey(ctx, "{g}:a")
	require.NoError(t, err)
	require.Equal(t, to.Addr(), m.Options().Addr)
	_, moved := redis.IsMovedError(before.Get(ctx, "{g}:a").Err())
	require.True(t, moved, "the old owner answers MOVED")
}

func TestServer_SlowLoading(t *testing.T) {
	s := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	ctx := t.Context()
	require.NoError(t, s.SlowLoading(ctx, time.Second))
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Kill())
	restarted := make(chan error, 1)
	go func() { restarted <- s.Restart(ctx) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	loading := false
	for !loading {
		err := rdb.Get(ctx, "k").Err()
		loading = redis.IsLoadingError(err)
		require.True(t, loading || err != nil, "served before loading: %v", err)
	}
	require.NoError(t, <-restarted)
	require.Equal(t, "v", rdb.Get(ctx, "k").Val(), "the write survived the restart")
}

func TestLostReply(t *testing.T) {
	s, px, rdb := proxied(t, 200*time.Millisecond)
	require.NoError(t, rdb.Ping(t.Context()).Err())
	var ran string
	err := redistest.LostReply(t, px, func() error { return rdb.Incr(t.Context(), "n").Err() }, func() {
		ran = s.Client().Get(t.Context(), "n").Val()
		require.NoError(t, px.Cut(true))
	})
	require.Error(t, err)
	require.Equal(t, "1", ran, "then runs after the command ran")
	require.NoError(t, px.Cut(false))
	require.NoError(t, rdb.Ping(t.Context()).Err(), "replies pass again")
}

func TestProxy_DropRepliesAfter(t *testing.T) {
	s, px, rdb := proxied(t, 100*time.Millisecond)
	require.NoError(t, rdb.Ping(t.Context()).Err())
	px.DropRepliesAfter(1)
	require.NoError(t, rdb.Set(t.Context(), "a", "1", 0).Err(), "the first reply passes")
	require.Error(t, rdb.Set(t.Context(), "b", "2", 0).Err(), "the second is dropped")
	require.EqualValues(t, 1, px.Dropped())
	require.Equal(t, "2", s.Client().Get(t.Context(), "b").Val())
}
