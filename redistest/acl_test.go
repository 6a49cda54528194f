package redistest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestNewWithACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "redis.acl")
	require.NoError(t, os.WriteFile(file, []byte("user app on >CHANGE-ME ~app:* -@all +get +set +eval\n"), 0o600))
	s, password := redistest.NewWithACL(t, file)
	ctx := t.Context()
	app := s.Client(func(o *redis.Options) { o.Username, o.Password = "app", password })
	require.NoError(t, app.Set(ctx, "app:k", 1, 0).Err())
	require.True(t, redistest.IsNoPerm(app.Set(ctx, "other", 1, 0).Err()))
	require.True(t, redistest.IsNoPerm(app.Del(ctx, "app:k").Err()))
	require.True(t, redistest.IsNoPerm(app.Eval(ctx, "return redis.call('DEL', KEYS[1])", []string{"app:k"}).Err()))
	require.False(t, redistest.IsNoPerm(app.Get(ctx, "app:k").Err()))
	wrong := s.Client(func(o *redis.Options) { o.Username, o.Password = "app", redistest.ACLPlaceholder })
	require.Error(t, wrong.Ping(ctx).Err(), "the placeholder password does not log in")
	require.NoError(t, s.Client().FlushAll(ctx).Err(), "the default user is an administrator")
}
