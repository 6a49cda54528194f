package lock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// Client.Check rates the server's settings; Redlock.Check those of every
// master: a master that evicts keys is critical, since an evicted lock key
// lets a second owner in.
func TestCheck_clientAndRedlock(t *testing.T) {
	ctx := t.Context()
	safe := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	risky := redistest.New(t, redistest.Options{Config: []string{"maxmemory-policy allkeys-lru"}})
	c := mustNew(t, safe.Client())
	defer c.Close()
	rep, err := c.Check(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Err(health.Warning))

	rl := mustRedlock(t, []redis.UniversalClient{safe.Client(), risky.Client()})
	defer rl.Close()
	rep, err = rl.Check(ctx)
	require.NoError(t, err)
	nodes := map[string]bool{}
	for _, f := range rep.Findings {
		nodes[f.Node] = true
	}
	require.Equal(t, map[string]bool{safe.Addr(): true, risky.Addr(): true}, nodes)
	require.Equal(t, health.Critical, rep.Worst())
	require.ErrorIs(t, rep.Err(health.Critical), lock.ErrRiskySettings)
}
