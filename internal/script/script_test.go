package script_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/redistest"
)

var (
	incr   = script.New("return redis.call('INCR', KEYS[1])")
	incrBy = script.New("return redis.call('INCRBY', KEYS[1], ARGV[1])")
)

// counter is a go-redis hook that counts the commands a client sends, by name.
type counter struct {
	mu    sync.Mutex
	sent  map[string]int
	pipes int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		_ = c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		counted := false
		for _, cmd := range cmds {
			counted = c.count(cmd) || counted
		}
		if counted {
			c.mu.Lock()
			c.pipes++
			c.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// count records script traffic (connection set-up commands are not counted).
func (c *counter) count(cmd redis.Cmder) bool {
	name := cmd.Name()
	switch name {
	case "script":
		name = fmt.Sprint(cmd.Args()[0], " ", cmd.Args()[1])
	case "evalsha", "eval", "wait":
	default:
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent = map[string]int{}
	}
	c.sent[name]++
	return true
}

func (c *counter) reset() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sent, pipes := c.sent, c.pipes
	c.sent, c.pipes = nil, 0
	return sent, pipes
}

func TestScript_HashAndSource(t *testing.T) {
	src := "return 1"
	sum := sha1.Sum([]byte(src))
	s := script.New(src)
	require.Equal(t, hex.EncodeToString(sum[:]), s.Hash())
	require.Equal(t, src, s.Source())
}

func TestScript_Run_afterScriptFlush(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	require.EqualValues(t, 1, incr.Run(ctx, rdb, []string{"run"}).Val())
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	n, err := incr.Run(ctx, rdb, []string{"run"}).Int()
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// After SCRIPT FLUSH only one of two scripts is reloaded: the calls of the
// other answer NOSCRIPT and are the only ones sent again.
func TestPipeline_noscript_resendsOnlyFailed(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	hook := &counter{}
	rdb.AddHook(hook)

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, rdb.ScriptLoad(ctx, incrBy.Source()).Err())
	calls := []script.Call{
		{Script: incr, Keys: []string{"a"}},
		{Script: incrBy, Keys: []string{"b"}, Args: []any{10}},
		{Script: incr, Keys: []string{"a"}},
		{Script: incrBy, Keys: []string{"b"}, Args: []any{5}},
		{Script: incr, Keys: []string{"c"}},
	}
	hook.reset()
	cmds := script.Pipeline(ctx, rdb, calls)

	want := []int64{1, 10, 2, 15, 1}
	require.Len(t, cmds, len(calls))
	for i, cmd := range cmds {
		require.NoError(t, cmd.Err(), i)
		require.Equal(t, want[i], cmd.Val(), i)
	}
	sent, pipes := hook.reset()
	// 5 EVALSHA, one SCRIPT LOAD for incr, the 3 incr calls again; never EVAL.
	require.Equal(t, map[string]int{"evalsha": 8, "script load": 1}, sent)
	require.Equal(t, 2, pipes)
	// Every call took effect exactly once.
	require.Equal(t, "2", rdb.Get(ctx, "a").Val())
	require.Equal(t, "15", rdb.Get(ctx, "b").Val())
	require.Equal(t, "1", rdb.Get(ctx, "c").Val())

	// Scripts cached: one round trip.
	cmds = script.Pipeline(ctx, rdb, calls)
	require.Equal(t, int64(3), cmds[0].Val())
	sent, pipes = hook.reset()
	require.Equal(t, map[string]int{"evalsha": 5}, sent)
	require.Equal(t, 1, pipes)
}

func TestPipeline_scriptErrorsStayPerCall(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	bad := script.New("return redis.error_reply('stock: sold out')")
	cmds := script.Pipeline(ctx, rdb, []script.Call{
		{Script: incr, Keys: []string{"x"}},
		{Script: bad},
		{Script: incr, Keys: []string{"x"}},
	})
	require.EqualValues(t, 1, cmds[0].Val())
	require.ErrorContains(t, cmds[1].Err(), "stock: sold out")
	require.EqualValues(t, 2, cmds[2].Val())
	require.Empty(t, script.Pipeline(ctx, rdb, nil))
}

// On a Cluster the reload reaches every master, whichever slot a call hits.
func TestPipeline_cluster_noscript(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := c.Client()
	ctx := t.Context()
	var calls []script.Call
	for i := range 30 {
		calls = append(calls, script.Call{Script: incr, Keys: []string{fmt.Sprintf("{g%d}:n", i)}})
	}
	for round := 1; round <= 2; round++ {
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		for i, cmd := range script.Pipeline(ctx, rdb, calls) {
			require.NoError(t, cmd.Err(), i)
			require.EqualValues(t, round, cmd.Val(), i)
		}
	}
}
