package stock

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/lock"
)

// ErrStaleFence means the call carried a fence (WithFence) older than one
// the SKU's group has already accepted: the caller's lock passed to someone
// else. Nothing was changed.
var ErrStaleFence = lock.ErrStaleFence

// CallOption configures one write call.
type CallOption interface{ applyCall(*callConfig) }

type callOptionFunc func(*callConfig)

func (f callOptionFunc) applyCall(c *callConfig) { f(c) }

type callConfig struct {
	fence *lock.Fence
}

// WithFence makes the call conditional on f, the fence of a lock.Lease the
// caller holds: the script first checks f.Token against the highest token
// recorded for f.Name in the SKUs' slot group (key
// <prefix>:fence:v1:{<group>}:<lock name>, see lock.FenceKey) and refuses
// with ErrStaleFence when it is lower. An accepted token is recorded even if
// the operation itself is then refused.
func WithFence(f lock.Fence) CallOption {
	return callOptionFunc(func(c *callConfig) { c.fence = &f })
}

func newCallConfig(opts []CallOption) (callConfig, error) {
	var c callConfig
	for _, o := range opts {
		if o != nil {
			o.applyCall(&c)
		}
	}
	if f := c.fence; f != nil {
		if err := valid.Name("fence name", f.Name); err != nil {
			return c, err
		}
		if f.Token == 0 || f.Token > valid.MaxAmount {
			return c, fmt.Errorf("%w: fence token %d outside 1..%d", ErrInvalid, f.Token, uint64(valid.MaxAmount))
		}
	}
	return c, nil
}

// fencePrelude takes the fence key and token off the end of KEYS and ARGV
// and checks them, so the rest of the script sees its usual layout.
const fencePrelude = `
local redkit_fence_key, redkit_fence_token = table.remove(KEYS), table.remove(ARGV)
if not redkit_fence(redkit_fence_key, redkit_fence_token) then return {'stale_fence', 0, '', 0} end
`

var fenced sync.Map // *script.Script -> *script.Script with the fence check

// withFence returns s, or its fenced variant with the fence key and token
// appended to keys and args, when c carries a fence.
func (inv *Inventory) withFence(c callConfig, g string, s *script.Script, keys []string, args []any) (*script.Script, []string, []any) {
	if c.fence == nil {
		return s, keys, args
	}
	v, ok := fenced.Load(s)
	if !ok {
		v, _ = fenced.LoadOrStore(s, script.New(lock.FenceLua+fencePrelude+s.Source()))
	}
	return v.(*script.Script),
		append(keys, lock.FenceKey(inv.cfg.prefix, g, c.fence.Name)),
		append(args, strconv.FormatUint(c.fence.Token, 10))
}
