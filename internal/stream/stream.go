// Package stream reads a page of the Redis stream journals that stock and
// wallet keep, the same way for both.
package stream

import (
	"context"
	"errors"

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

// Range reads up to count entries of stream from start to end (XRANGE
// bounds), oldest first, and after them the value of field in hash, in one
// pipeline sent again as p allows for reads. hash must be in the stream's
// slot.
//
// It is how an audit pages through a journal that a concurrent checkpoint
// may trim: stock and wallet trim a journal only behind the checkpoint that
// field names, and a checkpoint only ever moves that field forward. So when
// anchor is still the value the audit started from, no entry from that
// checkpoint on was trimmed before this page was read, the page misses
// nothing, and anything it lacks is drift; when anchor changed, a
// checkpoint (and maybe a trim) came in between and the audit starts over
// from the new one. (HGET comes after XRANGE: a trim between the two shows
// as a changed anchor.)
func Range(ctx context.Context, rdb redis.UniversalClient, p retry.Policy, stream, start, end string, count int64,
	hash, field string) (msgs []redis.XMessage, anchor string, err error) {
	err = retry.Read(ctx, p, func(ctx context.Context, _ int) error {
		var xr *redis.XMessageSliceCmd
		var hg *redis.StringCmd
		_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			xr = pipe.XRangeN(ctx, stream, start, end, count)
			hg = pipe.HGet(ctx, hash, field)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		msgs, anchor = xr.Val(), hg.Val()
		return xr.Err()
	})
	return msgs, anchor, err
}
