package redistest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestServer_KillRestart_AOFSurvives(t *testing.T) {
	s := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	c := s.Client()
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Kill())
	require.Error(t, c.Ping(ctx).Err())
	require.NoError(t, s.Restart(ctx))
	v, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
}
