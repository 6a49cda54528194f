package redistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestServer_Version(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	v, err := s.Version(t.Context())
	require.NoError(t, err)
	require.True(t, v.AtLeast(7, 0), "version %s", v)
	require.False(t, v.AtLeast(v.Major+1, 0))
	require.False(t, v.AtLeast(v.Major, v.Minor+1))
	require.True(t, v.AtLeast(v.Major-1, 99))
	info, err := s.Client().Info(t.Context(), "server").Result()
	require.NoError(t, err)
	require.Contains(t, info, "redis_version:"+v.String())
}

func TestParseVersion(t *testing.T) {
	v, err := redistest.ParseVersion("7.2.4")
	require.NoError(t, err)
	require.Equal(t, redistest.Version{Major: 7, Minor: 2, Patch: 4}, v)
	v, err = redistest.ParseVersion("8")
	require.NoError(t, err)
	require.Equal(t, redistest.Version{Major: 8}, v)
	_, err = redistest.ParseVersion("x.1")
	require.Error(t, err)
}

func clientIDs(t *testing.T, s *redistest.Server) []string {
	t.Helper()
	out, err := s.Client().ClientList(t.Context()).Result()
	require.NoError(t, err)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok && v != "" {
				names = append(names, v)
			}
		}
	}
	return names
}

func TestServer_KillClients_dropsBlockedClient(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	ctx := t.Context()
	victim := s.Client(func(o *redis.Options) { o.ClientName = "victim"; o.MaxRetries = -1 })
	require.NoError(t, victim.Ping(ctx).Err())
	require.Contains(t, clientIDs(t, s), "victim")

	done := make(chan error, 1)
	go func() { done <- victim.BLPop(ctx, time.Minute, "never").Err() }()
	// Wait until the BLPOP is really blocked on the server.
	admin := s.Client()
	require.Eventually(t, func() bool {
		info, err := admin.Info(ctx, "clients").Result()
		return err == nil && strings.Contains(info, "blocked_clients:1")
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, s.KillClients(ctx))
	select {
	case err := <-done:
		require.Error(t, err, "a killed connection must fail the blocked command")
	case <-time.After(30 * time.Second):
		t.Fatal("BLPOP still blocked after KillClients")
	}
	require.NotContains(t, clientIDs(t, s), "victim")
	// The client reconnects on its next command.
	require.NoError(t, victim.Ping(ctx).Err())
}

func TestServer_KillPubSubClients(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	ctx := t.Context()
	sub := s.Client().Subscribe(ctx, "ch")
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	admin := s.Client()
	count := func() int64 {
		info, err := admin.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
		require.NoError(t, err)
		return int64(strings.Count(info, "id="))
	}
	require.Equal(t, int64(1), count())
	require.NoError(t, s.KillPubSubClients(ctx))
	require.Eventually(t, func() bool { return count() == 0 }, 10*time.Second, 10*time.Millisecond)
}
