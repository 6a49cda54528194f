package redistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func role(t *testing.T, s *redistest.Server) string {
	t.Helper()
	info, err := s.Client().Info(t.Context(), "replication").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}

func eventuallyGet(t *testing.T, s *redistest.Server, key, want string) {
	t.Helper()
	c := s.Client()
	require.Eventually(t, func() bool { return c.Get(t.Context(), key).Val() == want },
		30*time.Second, 10*time.Millisecond, "%s on %s", key, s.Addr())
}

func TestPair_replicates(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	require.Equal(t, "master", role(t, p.Primary))
	require.Equal(t, "slave", role(t, p.Replica))
	require.NoError(t, p.Primary.Client().Set(ctx, "k", "v", 0).Err())
	eventuallyGet(t, p.Replica, "k", "v")
	require.Error(t, p.Replica.Client().Set(ctx, "k", "w", 0).Err(), "the replica is read-only")
	require.NoError(t, p.Primary.Client().Set(ctx, "k2", "v2", 0).Err())
	require.NoError(t, p.Sync(ctx))
	require.Equal(t, "v2", p.Replica.Client().Get(ctx, "k2").Val())
}

func TestPair_Failover_writesGoToNewPrimary(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	oldPrimary, oldReplica := p.Primary, p.Replica
	oldClient := oldPrimary.Client()
	require.NoError(t, oldClient.Set(ctx, "before", "1", 0).Err())
	require.NoError(t, p.Sync(ctx))

	require.NoError(t, p.Failover(ctx))
	require.Same(t, oldReplica, p.Primary)
	require.Same(t, oldPrimary, p.Replica)
	require.Equal(t, "master", role(t, p.Primary))
	require.Equal(t, "slave", role(t, p.Replica))

	require.Equal(t, "1", p.Primary.Client().Get(ctx, "before").Val())
	require.NoError(t, p.Primary.Client().Set(ctx, "after", "2", 0).Err())
	eventuallyGet(t, p.Replica, "after", "2")
	err := oldClient.Set(ctx, "stale", "x", 0).Err()
	require.ErrorContains(t, err, "READONLY")
}

func TestPair_KillPrimary_WAITedWritesSurvive(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	c := p.Primary.Client()
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, c.Set(ctx, k, k, 0).Err())
	}
	n, err := c.Wait(ctx, 1, 10*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	old := p.Primary
	require.NoError(t, old.Kill())
	require.NoError(t, p.Failover(ctx))
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, k, p.Primary.Client().Get(ctx, k).Val())
	}
	require.NoError(t, p.Primary.Client().Set(ctx, "d", "d", 0).Err())

	// The killed primary comes back as a replica of the new one.
	require.NoError(t, old.Restart(ctx))
	require.Same(t, old, p.Replica)
	eventuallyGet(t, old, "d", "d")
	require.Equal(t, "slave", role(t, old))
}

func TestPair_Failover_pausedPrimaryIsKilled(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	old := p.Primary
	require.NoError(t, old.Pause())
	require.NoError(t, p.Failover(t.Context()))
	require.Zero(t, old.PID())
	require.NoError(t, p.Primary.Client().Set(t.Context(), "k", "v", 0).Err())
}
