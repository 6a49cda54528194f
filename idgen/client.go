package idgen

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ClientWrapper is implemented by a type that wraps a go-redis client (a
// struct embedding *redis.Client for instrumentation or multi-tenancy, say)
// so that Sequence and Segment can use it. Unwrap returns the wrapped
// client: a *redis.Client (also from redis.NewFailoverClient), a
// *redis.ClusterClient, or another ClientWrapper.
//
// Sequence and Segment wait for a replica's acknowledgement of every
// reservation when the counter's primary has replicas, with WAIT on the
// connection to that primary, and count those replicas with INFO
// replication on it. Only the client types above say which connection that
// is; for any other type the acknowledgement could not be had, and a
// failover could then hand out a range twice. NewSequence and NewSegment
// therefore refuse any other type (a *redis.Ring included: it moves a key
// to another shard when it marks one down, so two processes could count on
// two shards), unless it unwraps to one of them. The counter's commands are
// then sent through the unwrapped client.
type ClientWrapper interface {
	Unwrap() redis.UniversalClient
}

// maxUnwrap bounds the chain of ClientWrappers followed, so a wrapper that
// unwraps to itself is an error rather than a hang.
const maxUnwrap = 16

// counterClient returns the client a counter sends its commands through:
// rdb itself when it is a *redis.Client or *redis.ClusterClient, or what it
// unwraps to (ClientWrapper); an error wrapping ErrInvalid otherwise.
func counterClient(rdb redis.UniversalClient) (redis.UniversalClient, error) {
	given := rdb
	for range maxUnwrap {
		switch c := rdb.(type) {
		case *redis.Client:
			if c == nil {
				return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
			}
			return c, nil
		case *redis.ClusterClient:
			if c == nil {
				return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
			}
			return c, nil
		case *redis.Ring:
			return nil, fmt.Errorf("%w: a *redis.Ring cannot hold a counter: it moves a key to another shard when it marks one down, and WAIT cannot reach the key's primary; use a *redis.Client or *redis.ClusterClient", ErrInvalid)
		case ClientWrapper:
			if rdb = c.Unwrap(); rdb == nil {
				return nil, fmt.Errorf("%w: %T unwraps to a nil Redis client", ErrInvalid, c)
			}
		default:
			return nil, fmt.Errorf("%w: %T is not a *redis.Client or *redis.ClusterClient, so replica acknowledgement could not reach the counter's primary; implement idgen.ClientWrapper to unwrap it", ErrInvalid, rdb)
		}
	}
	return nil, fmt.Errorf("%w: %T unwraps more than %d times", ErrInvalid, given, maxUnwrap)
}
