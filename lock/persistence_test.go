package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/stretchr/testify/require"
)

// TestMutex_restartWithAOF: with appendfsync always, a lock and its fence
// counter survive a kill -9 and restart of Redis.
func TestMutex_restartWithAOF(t *testing.T) {
	s := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	locks := newLocks(t, s.Client())
	ctx := t.Context()
	m, l := tryMutex(t, locks, "durable", lock.WithTTL(time.Minute), lock.WithWatchdog(false))

	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart(ctx))

	_, err := m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "the lock survived the restart")
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(ctx))
	next := mustTake(t, m.TryAcquire)
	require.Greater(t, next.Fence().Token, l.Fence().Token, "the fence counter survived")
	require.NoError(t, next.Release(ctx))
}

// TestMutex_restartWithoutPersistence shows the documented risk: a Redis
// that loses its data forgets the lock (the holder's lease ends at its next
// renewal) and its fence counter, which starts again.
func TestMutex_restartWithoutPersistence(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	locks := newLocks(t, s.Client())
	ctx := t.Context()
	m, l := tryMutex(t, locks, "volatile", lock.WithTTL(time.Second))
	other, err := m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.Nil(t, other)

	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart(ctx))
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease not ended after Redis lost it")
	}
	if !errorsIsAny(l.Err(), lock.ErrLeaseExpired, lock.ErrRenewFailed) {
		t.Fatalf("lease ended with %v", l.Err())
	}
	next := mustTake(t, m.TryAcquire)
	require.LessOrEqual(t, next.Fence().Token, l.Fence().Token, "the counter went back")
	require.NoError(t, next.Release(ctx))
}

// TestMutex_replicaAck_failover: an acquire acknowledged by the replica
// survives the promotion of that replica, lock and counter alike.
func TestMutex_replicaAck_failover(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	prefix := testPrefix(t)
	locks := mustNew(t, p.Primary.Client(), lock.WithKeyPrefix(prefix), lock.WithRequiredReplicaAck(1, time.Second))
	defer locks.Close()
	m, l := tryMutex(t, locks, "acked", lock.WithTTL(time.Minute), lock.WithWatchdog(false))

	require.NoError(t, p.Failover(ctx))
	after := mustNew(t, p.Primary.Client(), lock.WithKeyPrefix(prefix))
	defer after.Close()
	am := after.Mutex("acked", lock.WithTTL(time.Minute))
	_, err := am.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "the new primary has the lock")
	n, err := p.Primary.Client().Get(ctx, m.CounterKey()).Uint64()
	require.NoError(t, err)
	require.Equal(t, l.Fence().Token, n, "and its fence counter")
}

// TestMutex_requiredReplicaAck_notReached: when the replica cannot
// acknowledge, a required ack fails the acquire and gives the lock back.
func TestMutex_requiredReplicaAck_notReached(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	primary := p.Primary.Client()
	locks := newLocks(t, primary, lock.WithRequiredReplicaAck(1, 200*time.Millisecond))
	best := mustNew(t, primary, lock.WithKeyPrefix(testPrefix(t)), lock.WithReplicaAck(1, 200*time.Millisecond))
	defer best.Close()
	require.NoError(t, p.Replica.Pause())
	t.Cleanup(func() { _ = p.Replica.Resume() })

	m := locks.Mutex("unacked", lock.WithTTL(time.Minute))
	l, err := m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrReplicaAck)
	require.Nil(t, l)
	require.True(t, keyGone(t, primary, m.LockKey())(), "the lock was given back")

	l, err = best.Mutex("unacked").TryAcquire(ctx)
	require.NoError(t, err, "best effort accepts fewer acknowledgements")
	require.NoError(t, l.Release(ctx))
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestLease_failover_endsLease: after a failover, the process's connection
// still points at the demoted primary, which refuses the renewals (or no
// longer has the key once it resynchronised); the lease's Context ends
// instead of running on.
func TestLease_failover_endsLease(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	locks := newLocks(t, p.Primary.Client())
	l, err := locks.Mutex("failover", lock.WithTTL(500*time.Millisecond)).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Failover(ctx))
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease outlived the failover")
	}
	require.True(t, errorsIsAny(l.Err(), lock.ErrRenewFailed, lock.ErrLeaseExpired), "%v", l.Err())
}
