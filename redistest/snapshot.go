package redistest

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Snapshot returns the serialized value (DUMP) of every key matching the
// glob pattern, so a test can check that a refused call changed nothing:
// compare two snapshots with reflect.DeepEqual or require.Equal. It uses
// KEYS, so keep the database small.
func Snapshot(ctx context.Context, c redis.Cmdable, pattern string) (map[string]string, error) {
	ks, err := c.Keys(ctx, pattern).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: snapshot %s: %w", pattern, err)
	}
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		v, err := c.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue // expired in between
		}
		if err != nil {
			return nil, fmt.Errorf("redistest: snapshot %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// State is what a call that must change nothing is checked against: the
// keys matching a pattern, as Snapshot returns them, and the number of keys
// in the database.
type State struct {
	pattern string
	keys    map[string]string
	size    int64
}

// Capture takes the State of the keys matching pattern, failing the test
// when it cannot.
func Capture(tb testing.TB, c redis.Cmdable, pattern string) State {
	tb.Helper()
	ctx := context.Background()
	ks, err := Snapshot(ctx, c, pattern)
	if err != nil {
		tb.Fatal(err)
	}
	size, err := c.DBSize(ctx).Result()
	if err != nil {
		tb.Fatalf("redistest: DBSIZE: %v", err)
	}
	return State{pattern: pattern, keys: ks, size: size}
}

// RequireUnchanged fails the test when a key matching the State's pattern
// was added, deleted or changed since Capture, or the database grew: what
// (a refused call, say) was to change nothing.
func (s State) RequireUnchanged(tb testing.TB, c redis.Cmdable, what string) {
	tb.Helper()
	after := Capture(tb, c, s.pattern)
	var changed []string
	for k, v := range after.keys {
		if s.keys[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range s.keys {
		if _, ok := after.keys[k]; !ok {
			changed = append(changed, k+" (deleted)")
		}
	}
	if len(changed) > 0 {
		sort.Strings(changed)
		tb.Fatalf("%s changed keys matching %s: %v", what, s.pattern, changed)
	}
	if after.size > s.size {
		tb.Fatalf("%s grew the database from %d to %d keys", what, s.size, after.size)
	}
}
