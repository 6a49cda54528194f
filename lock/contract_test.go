package lock_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// The error contract (internal/retry's doc) for the lock's writes: a write
// whose reply was lost ends in nil or ErrUnknownOutcome whatever the client
// meets afterwards, on go-redis's default options (it re-sends below every
// hook) and with MaxRetries -1 (it does not).

var contractN atomic.Int64

// CheckFence records a token: its reply lost, then each fault, it returns
// nil or ErrUnknownOutcome; the same Fence again is accepted, and an older
// token is refused, so the first call's token was recorded.
func TestContract_CheckFence_lostReplyThenFault(t *testing.T) {
	redistest.ForEachFault(t, func(t *testing.T, fault redistest.ContractFault, newRun func() *redistest.FaultRun) {
		ctx := t.Context()
		f := newRun()
		key := lock.FenceKey(fmt.Sprintf("contract%d", contractN.Add(1)), "g", "res")
		require.NoError(t, lock.CheckFence(ctx, f.Client, key, lock.Fence{Name: "res", Token: 5}))

		err := redistest.LostReply(t, f.Proxy, func() error {
			return lock.CheckFence(ctx, f.Client, key, lock.Fence{Name: "res", Token: 7})
		}, func() {
			require.Equal(t, "7", f.Server.Client().Get(ctx, key).Val(), "the reply lost is the check's, which recorded 7")
			fault.Then(t, f)
		})
		fault.Heal(t, f)
		t.Logf("call under the fault: %v", err)
		if err != nil {
			require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
		}
		require.NoError(t, lock.CheckFence(ctx, f.Client, key, lock.Fence{Name: "res", Token: 7}), "the same fence again")
		require.ErrorIs(t, lock.CheckFence(ctx, f.Client, key, lock.Fence{Name: "res", Token: 6}), lock.ErrStaleFence,
			"the lost call recorded its token")
	})
}

// Nothing reached Redis (the port was cut before the call): a client that
// sends once gets the bare error and the token was not recorded; a client
// that re-sends cannot tell, so the outcome is unknown.
func TestContract_CheckFence_nothingSent(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	for _, v := range redistest.ContractVariants {
		t.Run(v.Name, func(t *testing.T) {
			ctx := t.Context()
			px := redistest.NewProxy(t, s.Addr())
			rdb := redistest.ContractClient(t, px, v.SendsOnce, nil)
			key := lock.FenceKey(fmt.Sprintf("contract%d", contractN.Add(1)), "g", "res")
			require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 5}))
			require.NoError(t, px.Cut(true))
			err := lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7})
			require.Error(t, err)
			require.Equal(t, !v.SendsOnce, errors.Is(err, lock.ErrUnknownOutcome), "%v", err)
			require.NoError(t, px.Cut(false))
			require.NoError(t, lock.CheckFence(ctx, s.Client(), key, lock.Fence{Name: "res", Token: 6}),
				"token 7 was never recorded")
		})
	}
}

// An acquire (it takes the next fencing token) whose reply is lost and
// whose retry meets each fault: a lease, or ErrUnknownOutcome and the lock
// it may have taken is given back once Redis answers, so another owner gets
// it with a greater token.
func TestContract_TryAcquire_lostReplyThenFault(t *testing.T) {
	redistest.ForEachFault(t, func(t *testing.T, fault redistest.ContractFault, newRun func() *redistest.FaultRun) {
		ctx := t.Context()
		f := newRun()
		prefix := fmt.Sprintf("contract%d", contractN.Add(1))
		locks := mustNew(t, f.Client, lock.WithKeyPrefix(prefix), lock.WithWatchdog(false))
		t.Cleanup(func() { _ = locks.Close() })
		m := locks.Mutex("g/res", lock.WithTTL(time.Minute))
		warm, err := m.TryAcquire(ctx)
		require.NoError(t, err)
		require.NoError(t, warm.Release(ctx))

		direct := f.Server.Client()
		before, err := redistest.Snapshot(ctx, direct, prefix+":*")
		require.NoError(t, err)
		var lease *lock.Lease
		err = redistest.LostReply(t, f.Proxy, func() error {
			var err error
			lease, err = m.TryAcquire(ctx)
			return err
		}, func() {
			after, err := redistest.Snapshot(ctx, direct, prefix+":*")
			require.NoError(t, err)
			require.NotEqual(t, before, after, "the reply lost is the acquire's, which took the lock")
			fault.Then(t, f)
		})
		fault.Heal(t, f)
		t.Logf("call under the fault: %v", err)
		if err != nil {
			require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in a lease or ErrUnknownOutcome")
		} else {
			require.NoError(t, lease.Release(ctx))
		}
		other := mustNew(t, f.Server.Client(), lock.WithKeyPrefix(prefix), lock.WithWatchdog(false))
		defer other.Close()
		var next *lock.Lease
		for next == nil {
			next, err = other.Mutex("g/res", lock.WithTTL(time.Minute)).TryAcquire(ctx)
			if errors.Is(err, lock.ErrNotAcquired) {
				time.Sleep(10 * time.Millisecond) // the abandoned lock is being given back
				continue
			}
			require.NoError(t, err)
		}
		require.Greater(t, next.Fence().Token, warm.Fence().Token+1, "the lost acquire took a token")
		require.NoError(t, next.Release(ctx))
	})
}

// On the loopback Cluster: CheckFence's reply is lost and the fence key's
// slot moves to the other master before the retry, which meets MOVED.
func TestContract_CheckFence_lostReplyThenSlotMoved(t *testing.T) {
	c := redistest.NewContractCluster(t)
	for _, v := range redistest.ContractVariants {
		t.Run(v.Name, func(t *testing.T) {
			ctx := t.Context()
			rdb := c.ProxiedClient(v.SendsOnce)
			tag := fmt.Sprintf("g%d", contractN.Add(1))
			key := lock.FenceKey("contract", tag, "res")
			require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 5}))
			err := redistest.LostReply(t, c.ProxyOf(t, key), func() error {
				return lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7})
			}, func() {
				require.Equal(t, "7", c.Direct.Get(ctx, key).Val(), "the reply lost is the check's, which recorded 7")
				_, err := c.MoveSlot(ctx, key)
				require.NoError(t, err)
			})
			t.Logf("call under the fault: %v", err)
			if err != nil {
				require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
			}
			c.Direct.ReloadState(ctx)
			require.ErrorIs(t, lock.CheckFence(ctx, c.Direct, key, lock.Fence{Name: "res", Token: 6}), lock.ErrStaleFence,
				"the lost call recorded its token")
		})
	}
}
