package lock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/retry"
)

// Fence identifies one acquisition of a lock: the lock's name and its
// fencing token. Tokens of one name strictly increase with every
// acquisition, so a resource that remembers the highest token it has seen can
// refuse a write from a holder whose lease has since passed to someone else.
type Fence struct {
	Name  string
	Token uint64
}

// FenceLua is a Lua chunk defining redkit_fence(key, token), the fence check
// for resources kept in Redis. Prepend it to a script that writes the
// protected resource and call it before the first write:
//
//	local ok = redkit_fence(KEYS[n], ARGV[m])  -- key from FenceKey, token as a decimal string
//
// It returns true and records the token when the token is greater than or
// equal to the highest token recorded at key (equal: the same lease writing
// again), and false otherwise, writing nothing. A malformed token (not an
// integer in 1..2^53-1) is refused. The fence key must be passed in KEYS and
// share the protected resource's hash tag; it never expires. stock's and
// wallet's WithFence use this same chunk.
var FenceLua = fence.Lua

// FenceKey returns the key at which a resource records the highest fencing
// token it has seen for lockName: <prefix>:fence:v1:{<protectedTag>}:<lockName>.
// protectedTag is the hash tag of the protected resource's keys (so the
// fence check and the write run in one script on Cluster); prefix "" means
// the default prefix "redkit". The arguments are not validated here; names
// that pass Mutex validation and a tag of the same grammar give a well-formed
// key.
func FenceKey(prefix, protectedTag, lockName string) string {
	return fence.Key(prefix, protectedTag, lockName)
}

// CheckFence is the fence check for resources written outside a Lua script:
// it records f.Token at key (from FenceKey) and returns nil when the token is
// greater than or equal to the highest recorded there, and ErrStaleFence
// otherwise. A zero token (a lease without a fence, such as a Semaphore
// permit's) or one above 2^53-1 is ErrInvalid.
//
// The check and the write are separate steps: the resource must itself
// refuse a write carrying an older token than one it has already accepted
// (for example a database row guarded by "WHERE fence <= $token"), or the
// check only narrows the window. Prefer FenceLua inside the writing script
// when the resource lives in Redis.
func CheckFence(ctx context.Context, rdb redis.Scripter, key string, f Fence) error {
	return fence.Check(ctx, rdb, retry.DefaultPolicy().For(rdb), key, f.Token)
}
