package stock_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/redistest"
)

func TestInventory_Check(t *testing.T) {
	risky := redistest.New(t, redistest.Options{MaxmemoryPolicy: "allkeys-lru"})
	inv := mustNew(t, risky.Client())
	rep, err := inv.Check(t.Context())
	require.NoError(t, err)
	settings := map[string]health.Severity{}
	for _, f := range rep.Findings {
		settings[f.Setting] = f.Severity
	}
	require.Contains(t, settings, "maxmemory-policy")
	require.Contains(t, settings, "appendonly")
	require.Equal(t, health.Critical, rep.Worst())

	safe := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	rep, err = mustNew(t, safe.Client()).Check(t.Context())
	require.NoError(t, err)
	require.Less(t, rep.Worst(), health.Warning, rep.Findings)

	// appendfsync always is not enough: with no-appendfsync-on-rewrite yes
	// Redis skips the fsync while a rewrite or RDB save runs.
	skips := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always",
		Config: []string{"no-appendfsync-on-rewrite yes"}})
	rep, err = mustNew(t, skips.Client()).Check(t.Context())
	require.NoError(t, err)
	require.Equal(t, health.Warning, rep.Worst(), rep.Findings)
	require.ErrorContains(t, rep.Err(health.Warning), "no-appendfsync-on-rewrite")
}
