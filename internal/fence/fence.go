// Package fence is the one implementation of fencing tokens in redkit: the
// Lua check that scripts of the protected resource run (Lua), the key where
// a resource records the highest token it has seen (Key), the bounds of a
// token and a lock name (Validate), and the check for resources written
// outside a script (Check). lock publishes it as lock.FenceLua,
// lock.FenceKey and lock.CheckFence; stock and wallet build stock.WithFence
// and wallet.WithFence on it.
package fence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
)

// Lua defines redkit_fence(key, token) for scripts that write a fenced
// resource (see fence.lua for its contract).
//
//go:embed fence.lua
var Lua string

//go:embed check.lua
var checkBody string

var checkScript = script.New(Lua + checkBody)

// ErrStale reports a token lower than one the resource has already seen.
var ErrStale = errors.New("lock: stale fence token")

// Key returns the key at which a resource in slot tag records the highest
// token of lockName: <prefix>:fence:v1:{<tag>}:<lockName>. prefix "" is
// the default prefix.
func Key(prefix, tag, lockName string) string {
	if prefix == "" {
		prefix = keys.DefaultPrefix
	}
	return keys.Space{Prefix: prefix, Module: "fence", Version: 1}.Key(tag, lockName)
}

// ValidToken reports a token outside 1..2^53-1 (zero: a lease without a
// fence, such as a Semaphore permit's) as an error wrapping
// valid.ErrInvalid.
func ValidToken(token uint64) error {
	if token == 0 || token > valid.MaxAmount {
		return fmt.Errorf("%w: fence token %d outside 1..%d", valid.ErrInvalid, token, uint64(valid.MaxAmount))
	}
	return nil
}

// Validate checks a fence a caller passed: its lock name has the grammar
// of lock names and its token is in range.
func Validate(lockName string, token uint64) error {
	if err := valid.Name("fence lock name", lockName); err != nil {
		return err
	}
	return ValidToken(token)
}

// Token is the token as a script argument.
func Token(token uint64) string { return strconv.FormatUint(token, 10) }

// Check records token at key and returns nil when it is greater than or
// equal to the highest recorded there, ErrStale otherwise, retrying per
// policy: re-sending is safe, the same token is accepted again unless a
// newer one was recorded in between, which the caller must hear about
// anyway.
func Check(ctx context.Context, rdb redis.Scripter, policy retry.Policy, key string, token uint64) error {
	if err := ValidToken(token); err != nil {
		return err
	}
	var n int
	err := retry.Do(ctx, policy, func(ctx context.Context, _ int) error {
		var err error
		n, err = checkScript.Run(ctx, rdb, []string{key}, Token(token)).Int()
		return err
	})
	if err != nil {
		return fmt.Errorf("lock: check fence: %w", err)
	}
	if n != 1 {
		return ErrStale
	}
	return nil
}
