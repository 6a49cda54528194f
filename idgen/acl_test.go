package idgen_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// The user in idgen/redis.acl can run everything the package does and
// nothing else; Check, refused CONFIG GET, reports unknown settings instead
// of failing.
func TestACL_redisACL_leastPrivilege(t *testing.T) {
	s, password := redistest.NewWithACL(t, "redis.acl")
	rdb := s.Client(func(o *redis.Options) { o.Username, o.Password = "redkit-idgen", password })
	admin := s.Client()
	ctx := t.Context()

	seq, err := idgen.NewSequence(rdb, "shop-7/orders")
	require.NoError(t, err)
	a, err := seq.Next(ctx)
	require.NoError(t, err)
	seg, err := idgen.NewSegment(rdb, "shop-7/order-no", idgen.WithMinStep(10), idgen.WithMaxStep(10))
	require.NoError(t, err)
	for range 25 { // several range fetches, prefetch included
		_, err = seg.Next(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, seg.Close())
	require.NoError(t, admin.ScriptFlush(ctx).Err()) // the next script is loaded again
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "checkout")
	require.NoError(t, err)
	_, err = sf.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, sf.Close())
	b, err := seq.Next(ctx)
	require.NoError(t, err)
	require.Greater(t, b, a)

	rep, err := seq.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	require.NotEmpty(t, rep.Findings)
	for _, f := range rep.Findings {
		require.Equal(t, health.Unknown, f.Severity, "%+v", f)
	}

	redistest.RequireLeastPrivilege(t, rdb, "redkit:lock:v1:{x}:token:x", map[string]error{
		"DEL of its own counter": rdb.Del(ctx, "redkit:idgen:v1:{shop-7}:seq:shop-7/orders").Err(),
	})
}
