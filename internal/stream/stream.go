// Package stream reads a page of the Redis stream journals that stock and
// wallet keep, the same way for both.
package stream

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/valid"
)

// Page reads up to limit entries of the stream after cursor (both bounded
// by valid.Page, whose error it returns before any I/O) and whether any of
// keys exists (the record the stream belongs to, or the stream itself), in
// one pipeline sent again as p allows for reads. keys must be in the
// stream's slot. next is the ID of the page's last entry when the stream
// holds more after it, and "" when the page reached its end.
func Page(ctx context.Context, rdb redis.UniversalClient, p retry.Policy, stream, cursor string, limit int, keys ...string) (
	msgs []redis.XMessage, next string, exists bool, err error) {
	start, err := valid.Page(cursor, limit)
	if err != nil {
		return nil, "", false, err
	}
	err = retry.Read(ctx, p, func(ctx context.Context, _ int) error {
		var ex *redis.IntCmd
		var xr *redis.XMessageSliceCmd
		_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			ex = pipe.Exists(ctx, keys...)
			// One entry more than the page: a page that ends at the
			// stream's newest entry then returns no cursor.
			xr = pipe.XRangeN(ctx, stream, start, "+", int64(limit)+1)
			return nil
		})
		if err != nil {
			return err
		}
		exists, msgs = ex.Val() > 0, xr.Val()
		return nil
	})
	if err != nil {
		return nil, "", false, err
	}
	if len(msgs) > limit {
		msgs = msgs[:limit]
		next = msgs[limit-1].ID
	}
	return msgs, next, exists, nil
}
