package idgen_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(redistest.DialProber)) }

// requireUnique fails when any value occurs twice.
func requireUnique(t testing.TB, ids []int64) {
	t.Helper()
	s := append([]int64(nil), ids...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			t.Fatalf("duplicate ID %d", s[i])
		}
	}
}

// requireIncreasing marks the test failed unless ids are strictly
// increasing. It may be called from any goroutine.
func requireIncreasing(t testing.TB, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Errorf("ID %d at %d after %d", ids[i], i, ids[i-1])
			return
		}
	}
}

// scriptCounter counts script calls (one per Redis round trip of a generator).
type scriptCounter struct{ n atomic.Int64 }

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if strings.HasPrefix(cmd.Name(), "eval") {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
