package lock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

type lockInput struct {
	client  int
	acquire bool // else release
}

type lockOutput struct {
	ok    bool   // acquired / released
	token uint64 // acquire only
}

type lockState struct {
	holder int // -1: free
	last   uint64
}

// lockModel is a mutex with fencing tokens: an acquire succeeds only when
// the lock is free and then carries a token above every earlier one; it
// fails only while someone holds the lock; only the holder releases.
var lockModel = porcupine.Model{
	Init: func() any { return lockState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		switch {
		case in.acquire && out.ok:
			return s.holder == -1 && out.token > s.last, lockState{holder: in.client, last: out.token}
		case in.acquire:
			return s.holder != -1 && s.holder != in.client, s
		case out.ok:
			return s.holder == in.client, lockState{holder: -1, last: s.last}
		default:
			return false, s // nothing expires in this test: a release must succeed
		}
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockInput), output.(lockOutput)
		if in.acquire {
			return fmt.Sprintf("acquire() -> ok=%v token=%d", out.ok, out.token)
		}
		return fmt.Sprintf("release() -> ok=%v", out.ok)
	},
}

// TestMutex_Linearizable_ConcurrentSafe records 8 clients × 1,000
// TryAcquire/Release operations on one name (two lock.Clients) and checks
// the history against lockModel with porcupine. An Unknown result fails.
func TestMutex_Linearizable_ConcurrentSafe(t *testing.T) {
	checkLinearizable(t, 8, 1000)
}

func TestChaos_Linearizable(t *testing.T) {
	for range redistest.Chaos(t) {
		checkLinearizable(t, 8, 5000)
	}
}

func checkLinearizable(t *testing.T, clients, opsPerClient int) {
	lcs := twoClients(t, testPrefix(t))
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for c := range clients {
		m := lcs[c%2].Mutex("linear", lock.WithTTL(time.Minute))
		wg.Go(func() {
			var ops []porcupine.Operation
			for len(ops) < opsPerClient {
				call := now()
				l, err := m.TryAcquire(t.Context())
				ret := now()
				if err != nil && !assertErrorIs(t, err, lock.ErrNotAcquired) {
					return
				}
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{client: c, acquire: true},
					Call: call, Output: lockOutput{ok: l != nil, token: l.Fence().Token}, Return: ret})
				if l == nil {
					continue
				}
				call = now()
				err = l.Release(t.Context())
				ret = now()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{client: c},
					Call: call, Output: lockOutput{ok: err == nil}, Return: ret})
			}
			mu.Lock()
			history = append(history, ops...)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, len(history), clients*opsPerClient)
	res := porcupine.CheckOperationsTimeout(lockModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history of %d operations is not linearizable (Unknown = timed out)", len(history))
}

func assertErrorIs(t testing.TB, err, target error) bool {
	t.Helper()
	if err != nil && !errors.Is(err, target) {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
