package redistest

import (
	"context"
	"fmt"

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
