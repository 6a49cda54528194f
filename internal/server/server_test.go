package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/server"
	"github.com/redkit-go/redkit/redistest"
)

// findings indexes a report by setting (one node).
func findings(t *testing.T, rep server.Report) map[string]server.Finding {
	t.Helper()
	m := map[string]server.Finding{}
	for _, f := range rep.Findings {
		require.NotContains(t, m, f.Setting, "one finding per setting")
		m[f.Setting] = f
	}
	return m
}

func check(t *testing.T, opts redistest.Options) (server.Report, map[string]server.Finding, string) {
	t.Helper()
	s := redistest.New(t, opts)
	rep, err := server.Check(t.Context(), s.Client())
	require.NoError(t, err)
	for _, f := range rep.Findings {
		require.Equal(t, s.Addr(), f.Node)
	}
	return rep, findings(t, rep), s.Addr()
}

func TestCheck_safeSettings(t *testing.T) {
	rep, f, _ := check(t, redistest.Options{AOF: true, AppendFsync: "always"})
	require.Len(t, f, 4)
	for _, finding := range rep.Findings {
		require.Equal(t, server.SeverityOK, finding.Severity, finding)
	}
	require.Equal(t, "noeviction", f["maxmemory-policy"].Value)
	require.Equal(t, "always", f["appendfsync"].Value)
	require.Equal(t, "no", f["no-appendfsync-on-rewrite"].Value)
	require.Equal(t, server.SeverityOK, rep.Worst())
	require.NoError(t, rep.Err(server.SeverityWarning))
}

func TestCheck_eviction_critical(t *testing.T) {
	rep, f, _ := check(t, redistest.Options{AOF: true, AppendFsync: "always", MaxmemoryPolicy: "allkeys-lru"})
	got := f["maxmemory-policy"]
	require.Equal(t, server.SeverityCritical, got.Severity)
	require.Equal(t, "allkeys-lru", got.Value)
	require.Equal(t, "keys can be evicted: markers/balances silently lost", got.Risk)
	require.Equal(t, server.SeverityCritical, rep.Worst())
	err := rep.Err(server.SeverityCritical)
	require.ErrorIs(t, err, server.ErrRiskySettings)
	require.ErrorContains(t, err, "maxmemory-policy")
	require.NotContains(t, err.Error(), "appendfsync", "only findings at or above min")
}

func TestCheck_aofOff(t *testing.T) {
	// redistest turns RDB snapshots off (save ""), so nothing survives a restart.
	rep, f, _ := check(t, redistest.Options{})
	require.Equal(t, server.SeverityCritical, f["appendonly"].Severity)
	require.Equal(t, "no", f["appendonly"].Value)
	require.Contains(t, f["appendonly"].Risk, "a restart loses everything")
	require.NotContains(t, f, "appendfsync", "fsync policy does not apply without AOF")
	require.Equal(t, server.SeverityCritical, rep.Worst())

	require.NotContains(t, f, "stop-writes-on-bgsave-error", "nothing to stop without snapshots")

	_, f, _ = check(t, redistest.Options{Config: []string{"save 3600 1"}})
	require.Equal(t, server.SeverityWarning, f["appendonly"].Severity)
	require.Equal(t, "a restart loses everything since the last RDB save", f["appendonly"].Risk)
	require.Equal(t, server.SeverityOK, f["stop-writes-on-bgsave-error"].Severity)
	require.Equal(t, "yes", f["stop-writes-on-bgsave-error"].Value)
}

// With RDB snapshots as the only persistence, stop-writes-on-bgsave-error
// no lets Redis acknowledge writes while every snapshot fails: a restart
// then loses everything since the last snapshot that worked.
func TestCheck_stopWritesOnBgsaveError(t *testing.T) {
	rep, f, _ := check(t, redistest.Options{Config: []string{"save 3600 1", "stop-writes-on-bgsave-error no"}})
	got := f["stop-writes-on-bgsave-error"]
	require.Equal(t, server.SeverityWarning, got.Severity, got)
	require.Equal(t, "no", got.Value)
	require.Contains(t, got.Risk, "while RDB saves fail")
	require.ErrorContains(t, rep.Err(server.SeverityWarning), "stop-writes-on-bgsave-error")
}

// appendfsync always with no-appendfsync-on-rewrite yes: Redis skips the
// fsync while an AOF rewrite or RDB save runs, so an acknowledged write
// may not be on disk. Check must not rate such a server OK.
func TestCheck_noAppendfsyncOnRewrite(t *testing.T) {
	for _, tc := range []struct {
		fsync string
		want  server.Severity
	}{
		{"always", server.SeverityWarning},
		{"everysec", server.SeverityWarning},
		{"no", server.SeverityOK}, // nothing to skip; appendfsync no is critical on its own
	} {
		t.Run(tc.fsync, func(t *testing.T) {
			rep, f, _ := check(t, redistest.Options{AOF: true, AppendFsync: tc.fsync,
				Config: []string{"no-appendfsync-on-rewrite yes"}})
			got := f["no-appendfsync-on-rewrite"]
			require.Equal(t, "yes", got.Value)
			require.Equal(t, tc.want, got.Severity, got)
			if tc.want == server.SeverityWarning {
				require.Contains(t, got.Risk, "rewrite")
				require.GreaterOrEqual(t, rep.Worst(), server.SeverityWarning)
				require.ErrorContains(t, rep.Err(server.SeverityWarning), "no-appendfsync-on-rewrite")
			}
		})
	}
}

func TestCheck_appendfsync(t *testing.T) {
	for _, tc := range []struct {
		fsync string
		want  server.Severity
		risk  string
	}{
		{"always", server.SeverityOK, "fsynced"},
		{"everysec", server.SeverityWarning, "a crash can lose up to ~1s of acknowledged writes"},
		{"no", server.SeverityCritical, "a crash can lose every write"},
	} {
		t.Run(tc.fsync, func(t *testing.T) {
			rep, f, _ := check(t, redistest.Options{AOF: true, AppendFsync: tc.fsync})
			require.Equal(t, tc.want, f["appendfsync"].Severity)
			require.Equal(t, tc.fsync, f["appendfsync"].Value)
			require.Contains(t, f["appendfsync"].Risk, tc.risk)
			require.Equal(t, server.SeverityOK, f["appendonly"].Severity)
			require.Equal(t, tc.want, rep.Worst())
		})
	}
}

func TestCheck_configUnavailable_unknown(t *testing.T) {
	rep, f, _ := check(t, redistest.Options{Config: []string{`rename-command CONFIG ""`}})
	require.Len(t, f, 2, "appendonly unknown, so appendfsync and no-appendfsync-on-rewrite are not asked")
	for _, finding := range rep.Findings {
		require.Equal(t, server.SeverityUnknown, finding.Severity, finding)
		require.Contains(t, finding.Risk, "cannot read")
	}
	require.Equal(t, server.SeverityUnknown, rep.Worst())
	require.NoError(t, rep.Err(server.SeverityWarning))
	require.Error(t, rep.Err(server.SeverityUnknown))
}

func TestCheck_cluster_perMaster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3,
		Options: redistest.Options{AOF: true, AppendFsync: "always"}})
	risky := c.Masters()[1]
	require.NoError(t, risky.Client().ConfigSet(t.Context(), "appendfsync", "everysec").Err())

	rep, err := server.Check(t.Context(), c.Client())
	require.NoError(t, err)
	byNode := map[string][]server.Finding{}
	for _, f := range rep.Findings {
		byNode[f.Node] = append(byNode[f.Node], f)
	}
	require.Len(t, byNode, 3)
	for _, m := range c.Masters() {
		require.Len(t, byNode[m.Addr()], 4, m.Addr())
		for _, f := range byNode[m.Addr()] {
			want := server.SeverityOK
			if m == risky && f.Setting == "appendfsync" {
				want = server.SeverityWarning
			}
			require.Equal(t, want, f.Severity, f)
		}
	}
	require.Equal(t, server.SeverityWarning, rep.Worst())
}

func TestSeverity_String(t *testing.T) {
	require.Equal(t, "unknown", server.SeverityUnknown.String())
	require.Equal(t, "ok", server.SeverityOK.String())
	require.Equal(t, "warning", server.SeverityWarning.String())
	require.Equal(t, "critical", server.SeverityCritical.String())
	require.Equal(t, server.SeverityUnknown, server.Report{}.Worst())
}

func TestProbe(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	v, err := s.Version(t.Context())
	require.NoError(t, err)

	f := server.Probe(t.Context(), s.Client())
	require.True(t, f.Known)
	require.Equal(t, []int{v.Major, v.Minor, v.Patch}, []int{f.Major, f.Minor, f.Patch})
	require.Equal(t, v.AtLeast(7, 2), f.WaitAOF)
	require.Equal(t, v.AtLeast(7, 4), f.HExpire)
	require.True(t, f.AtLeast(v.Major, v.Minor))
	require.False(t, f.AtLeast(v.Major, v.Minor+1))
}

func TestProbe_cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	v, err := c.Masters()[0].Version(t.Context())
	require.NoError(t, err)
	f := server.Probe(t.Context(), c.Client())
	require.True(t, f.Known)
	require.Equal(t, v.Major, f.Major)
	require.Equal(t, v.Minor, f.Minor)
}

func TestProbe_errorsAreUnknown(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	require.NoError(t, s.Kill())
	require.Equal(t, server.Features{}, server.Probe(t.Context(), rdb))

	// A server that answers INFO without a version (renamed INFO, as some
	// proxies and embedded servers do) is unknown too.
	s2 := redistest.New(t, redistest.Options{Config: []string{`rename-command INFO ""`}})
	require.Equal(t, server.Features{}, server.Probe(t.Context(), s2.Client()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.False(t, server.Probe(ctx, s2.Client()).Known)
}

func TestReplicas(t *testing.T) {
	ctx := t.Context()
	solo := redistest.New(t, redistest.Options{})
	n, err := server.Replicas(ctx, solo.Client(), "k")
	require.NoError(t, err)
	require.Equal(t, 0, n)

	p := redistest.NewPair(t, redistest.Options{})
	n, err = server.Replicas(ctx, p.Primary.Client(), "k")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// Each shard is asked about its own replicas: after one shard's replica
// leaves, only keys of that shard report 0.
func TestReplicas_cluster(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := c.Client()
	ctx := t.Context()
	keys := []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}"}
	for _, key := range keys {
		n, err := server.Replicas(ctx, rdb, key)
		require.NoError(t, err, key)
		require.Equal(t, 1, n, key)
	}

	const gone = "{a}"
	primary, err := rdb.MasterForKey(ctx, gone)
	require.NoError(t, err)
	replica, err := c.Replica(ctx, gone)
	require.NoError(t, err)
	require.NoError(t, replica.Client().ClusterResetSoft(ctx).Err())
	require.Eventually(t, func() bool {
		n, err := server.Replicas(ctx, rdb, gone)
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond)
	for _, key := range keys {
		other, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		if other.Options().Addr == primary.Options().Addr {
			continue
		}
		n, err := server.Replicas(ctx, rdb, key)
		require.NoError(t, err, key)
		require.Equal(t, 1, n, key)
	}
}

// A master killed for good stays in an ordinary ClusterClient's slot map,
// and INFO to its address is refused: Replicas reloads the map and asks
// the promoted master, on both client shapes, and answers at once after
// every live node agreed on it (its replica is gone with the old master,
// so it has none). Before, it failed with "connection refused".
func TestReplicas_cluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for _, shape := range []struct {
		name, key string
		opt       func(*redis.ClusterOptions)
	}{
		{"defaults", "{a}", func(*redis.ClusterOptions) {}},
		{"send-once", "{c}", func(o *redis.ClusterOptions) { o.MaxRetries, o.MaxRedirects = -1, -1 }},
	} {
		t.Run(shape.name, func(t *testing.T) {
			rdb := c.Client(shape.opt)
			n, err := server.Replicas(ctx, rdb, shape.key)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			_, err = c.KillMaster(ctx, shape.key)
			require.NoError(t, err)
			n, err = server.Replicas(ctx, rdb, shape.key)
			require.NoError(t, err, "the first probe after the cluster agreed on the new master")
			require.Equal(t, 0, n)
		})
	}
}
