package stock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/script"
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
// caller holds: the script checks f.Token against the highest token
// recorded for f.Name in the SKUs' slot group (key
// <prefix>:fence:v1:{<group>}:<lock name>, see lock.FenceKey) and refuses
// with ErrStaleFence, writing nothing, when it is lower. A call that repeats
// an operation already decided gets the stored decision first, whatever its
// token. An accepted token is recorded even if the operation itself is then
// refused. On a SKU split into buckets the token is recorded in the
// group's own fence key first, then in every bucket's (tag {<group>#k}),
// before the call runs; a higher token found in any of them is recorded in
// all, so a token accepted anywhere in the group makes lower tokens stale
// through every bucket (after the replay of a decided operation).
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
		return c, fence.Validate(f.Name, f.Token)
	}
	return c, nil
}

// fencePrelude takes the fence key and token off the end of KEYS and ARGV,
// so the rest of the script sees its usual layout. The check itself runs
// where the script calls fence_ok: after the operation marker was read, so
// a call that repeats a decided operation gets the stored decision whatever
// token it carries (a lease that applied an order and lost the reply learns
// the outcome even after its successor wrote), and before the first write of
// an operation not decided yet.
const fencePrelude = `
local redkit_fence_key, redkit_fence_token = table.remove(KEYS), table.remove(ARGV)
`

// fenceHook is the line of deduct.lua, hold.lua and adjust.lua that a fenced
// variant replaces with the real check.
const fenceHook = "local function fence_ok() return true end"

const fenceCheck = "local function fence_ok() return redkit_fence(redkit_fence_key, redkit_fence_token) end"

var fenced sync.Map // *script.Script -> *script.Script with the fence check

// withFence returns s, or its fenced variant with the fence key and token
// appended to keys and args, when c carries a fence.
func (inv *Inventory) withFence(c callConfig, g string, s *script.Script, keys []string, args []any) (*script.Script, []string, []any) {
	if c.fence == nil {
		return s, keys, args
	}
	v, ok := fenced.Load(s)
	if !ok {
		src := s.Source()
		if !strings.Contains(src, fenceHook) {
			panic("stock: fenced script without " + fenceHook)
		}
		v, _ = fenced.LoadOrStore(s, script.New(fence.Lua+fencePrelude+strings.Replace(src, fenceHook, fenceCheck, 1)))
	}
	return v.(*script.Script),
		append(keys, fence.Key(inv.cfg.prefix, g, c.fence.Name)),
		append(args, fence.Token(c.fence.Token))
}

// raiseFences records the call's fence token in the fence key of every
// bucket of a SKU split into b buckets, before the operation runs in one of
// them. The slot group's own key ({g}, bucket 0's, also the key of every SKU
// of the group without buckets) comes first, then every other bucket's (a
// script can only touch the keys of its own bucket's hash tag). When any of
// them holds a higher token, that token is recorded in every bucket's key
// too: the operation's own script, which judges the token in its bucket
// after its replay check (a decided operation is answered whatever its
// token), then refuses it (ErrStaleFence). So a token lower than one seen
// anywhere in the group is stale through every bucket of every SKU of the
// group. A key holding a higher token keeps it (fence.Check writes
// nothing then). With WithReplicaAck each record is acknowledged like a
// write; ackErr reports those the replicas did not acknowledge, for the
// caller to return with the operation's result. Nothing of the operation
// has been sent when err is not nil.
func (inv *Inventory) raiseFences(ctx context.Context, c callConfig, g string, b int) (ackErr, err error) {
	if c.fence == nil || b <= 1 {
		return nil, nil
	}
	keys := make([]string, b)
	for k := range keys {
		keys[k] = fence.Key(inv.cfg.prefix, bucketTag(g, k), c.fence.Name)
	}
	f, higher := *c.fence, uint64(0)
	for _, key := range keys {
		err := fence.Check(ctx, inv.rdb, inv.cfg.retry, key, f.Token)
		if errors.Is(err, fence.ErrStale) {
			v, err := inv.rdb.Get(ctx, key).Uint64()
			if err != nil {
				return nil, err
			}
			higher = max(higher, v)
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := script.Acked(ctx, inv.rdb, inv.cfg.ack, key); errors.Is(err, script.ErrReplicaAck) {
			ackErr = errors.Join(ackErr, err)
		} else if err != nil {
			return nil, err
		}
	}
	if higher == 0 {
		return ackErr, nil
	}
	f.Token = higher
	for _, key := range keys {
		if err := fence.Check(ctx, inv.rdb, inv.cfg.retry, key, f.Token); err != nil && !errors.Is(err, fence.ErrStale) {
			return nil, err
		}
		if _, err := script.Acked(ctx, inv.rdb, inv.cfg.ack, key); errors.Is(err, script.ErrReplicaAck) {
			ackErr = errors.Join(ackErr, err)
		} else if err != nil {
			return nil, err
		}
	}
	return ackErr, nil
}
