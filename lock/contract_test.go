package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// The error contract (internal/retry's doc) for the lock's writes: a write
// whose reply was lost ends in nil or ErrUnknownOutcome whatever the client
// meets afterwards, on go-redis's default options (it re-sends below every
// hook) and with MaxRetries -1 (it does not).

var contractVariants = []struct {
	name      string
	sendsOnce bool
}{{"default options", false}, {"MaxRetries -1", true}}

func contractClient(t *testing.T, px *redistest.Proxy, sendsOnce bool, adjust func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: px.Addr(), ReadTimeout: 300 * time.Millisecond,
		DialerRetries: 1} // a refused dial fails at once
	if sendsOnce {
		o.MaxRetries = -1
	}
	if adjust != nil {
		adjust(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// contractFault is what a retry meets after the reply was lost.
type contractFault struct {
	name   string
	server redistest.Options
	setup  func(t *testing.T, s *redistest.Server)
	client func(o *redis.Options)
	then   func(t *testing.T, s *redistest.Server, px *redistest.Proxy, rdb *redis.Client, bg *background)
	heal   func(t *testing.T, px *redistest.Proxy, bg *background)
}

type background struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func (b *background) run(fn func() error) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := fn(); err != nil {
			b.mu.Lock()
			b.err = errors.Join(b.err, err)
			b.mu.Unlock()
		}
	}()
}

func (b *background) wait(t *testing.T) {
	b.wg.Wait()
	require.NoError(t, b.err)
}

const contractBusy = time.Second

func contractFaults() []contractFault {
	wait := func(t *testing.T, _ *redistest.Proxy, bg *background) { bg.wait(t) }
	return []contractFault{
		{name: "cut",
			then: func(t *testing.T, _ *redistest.Server, px *redistest.Proxy, _ *redis.Client, _ *background) {
				require.NoError(t, px.Cut(true))
			},
			heal: func(t *testing.T, px *redistest.Proxy, _ *background) { require.NoError(t, px.Cut(false)) }},
		{name: "loading",
			server: redistest.Options{AOF: true, AppendFsync: "always"},
			setup:  func(t *testing.T, s *redistest.Server) { require.NoError(t, s.SlowLoading(t.Context(), time.Second)) },
			then: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy, _ *redis.Client, bg *background) {
				require.NoError(t, s.Kill())
				bg.run(func() error { return s.Restart(context.Background()) })
			},
			heal: wait},
		{name: "pool exhausted",
			client: func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 1, 50*time.Millisecond },
			then: func(t *testing.T, _ *redistest.Server, _ *redistest.Proxy, rdb *redis.Client, bg *background) {
				for i := range 2 {
					bg.run(func() error {
						for {
							err := rdb.BLPop(context.Background(), contractBusy, fmt.Sprintf("blocker-%d", i)).Err()
							if !errors.Is(err, redis.ErrPoolTimeout) {
								return nil
							}
						}
					})
				}
			},
			heal: wait},
		{name: "busy",
			server: redistest.Options{Config: []string{"busy-reply-threshold 20"}},
			then: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy, _ *redis.Client, bg *background) {
				done, err := s.Busy(t.Context(), contractBusy)
				require.NoError(t, err)
				bg.run(func() error { return <-done })
			},
			heal: wait},
	}
}

var contractN atomic.Int64

// CheckFence records a token: its reply lost, then each fault, it returns
// nil or ErrUnknownOutcome; the same Fence again is accepted, and an older
// token is refused, so the first call's token was recorded.
func TestContract_CheckFence_lostReplyThenFault(t *testing.T) {
	for _, fault := range contractFaults() {
		t.Run(fault.name, func(t *testing.T) {
			s := redistest.New(t, fault.server)
			if fault.setup != nil {
				fault.setup(t, s)
			}
			for _, v := range contractVariants {
				t.Run(v.name, func(t *testing.T) {
					ctx := t.Context()
					px := redistest.NewProxy(t, s.Addr())
					rdb := contractClient(t, px, v.sendsOnce, fault.client)
					key := lock.FenceKey(fmt.Sprintf("contract%d", contractN.Add(1)), "g", "res")
					require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 5}))

					bg := &background{}
					err := redistest.LostReply(t, px, func() error {
						return lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7})
					}, func() { fault.then(t, s, px, rdb, bg) })
					fault.heal(t, px, bg)
					t.Logf("call under the fault: %v", err)
					if err != nil {
						require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
					}
					require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7}), "the same fence again")
					require.ErrorIs(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 6}), lock.ErrStaleFence,
						"the lost call recorded its token")
				})
			}
		})
	}
}

// Nothing reached Redis (the port was cut before the call): a client that
// sends once gets the bare error and the token was not recorded; a client
// that re-sends cannot tell, so the outcome is unknown.
func TestContract_CheckFence_nothingSent(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	for _, v := range contractVariants {
		t.Run(v.name, func(t *testing.T) {
			ctx := t.Context()
			px := redistest.NewProxy(t, s.Addr())
			rdb := contractClient(t, px, v.sendsOnce, nil)
			key := lock.FenceKey(fmt.Sprintf("contract%d", contractN.Add(1)), "g", "res")
			require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 5}))
			require.NoError(t, px.Cut(true))
			err := lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7})
			require.Error(t, err)
			require.Equal(t, !v.sendsOnce, errors.Is(err, lock.ErrUnknownOutcome), "%v", err)
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
	for _, fault := range contractFaults() {
		t.Run(fault.name, func(t *testing.T) {
			s := redistest.New(t, fault.server)
			if fault.setup != nil {
				fault.setup(t, s)
			}
			for _, v := range contractVariants {
				t.Run(v.name, func(t *testing.T) {
					ctx := t.Context()
					px := redistest.NewProxy(t, s.Addr())
					rdb := contractClient(t, px, v.sendsOnce, fault.client)
					prefix := fmt.Sprintf("contract%d", contractN.Add(1))
					locks := mustNew(t, rdb, lock.WithKeyPrefix(prefix), lock.WithWatchdog(false))
					t.Cleanup(func() { _ = locks.Close() })
					m := locks.Mutex("g/res", lock.WithTTL(time.Minute))
					warm, err := m.TryAcquire(ctx)
					require.NoError(t, err)
					require.NoError(t, warm.Release(ctx))

					var lease *lock.Lease
					bg := &background{}
					err = redistest.LostReply(t, px, func() error {
						var err error
						lease, err = m.TryAcquire(ctx)
						return err
					}, func() { fault.then(t, s, px, rdb, bg) })
					fault.heal(t, px, bg)
					t.Logf("call under the fault: %v", err)
					if err != nil {
						require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in a lease or ErrUnknownOutcome")
					} else {
						require.NoError(t, lease.Release(ctx))
					}
					other := mustNew(t, s.Client(), lock.WithKeyPrefix(prefix), lock.WithWatchdog(false))
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
		})
	}
}

// On the loopback Cluster: CheckFence's reply is lost and the fence key's
// slot moves to the other master before the retry, which meets MOVED.
func TestContract_CheckFence_lostReplyThenSlotMoved(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2})
	proxies := map[string]*redistest.Proxy{}
	for _, m := range c.Masters() {
		proxies[m.Addr()] = redistest.NewProxy(t, m.Addr())
	}
	direct := c.Client()
	for _, v := range contractVariants {
		t.Run(v.name, func(t *testing.T) {
			ctx := t.Context()
			rdb := c.Client(func(o *redis.ClusterOptions) {
				o.ReadTimeout, o.DialerRetries = 300*time.Millisecond, 1
				o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if px, ok := proxies[addr]; ok {
						addr = px.Addr()
					}
					var d net.Dialer
					return d.DialContext(ctx, network, addr)
				}
				if v.sendsOnce {
					o.MaxRedirects, o.MaxRetries = -1, -1
				}
			})
			tag := fmt.Sprintf("g%d", contractN.Add(1))
			key := lock.FenceKey("contract", tag, "res")
			require.NoError(t, lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 5}))
			owner, err := direct.MasterForKey(ctx, key)
			require.NoError(t, err)
			err = redistest.LostReply(t, proxies[owner.Options().Addr], func() error {
				return lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "res", Token: 7})
			}, func() {
				_, err := c.MoveSlot(ctx, key)
				require.NoError(t, err)
			})
			t.Logf("call under the fault: %v", err)
			if err != nil {
				require.ErrorIs(t, err, lock.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
			}
			direct.ReloadState(ctx)
			require.ErrorIs(t, lock.CheckFence(ctx, direct, key, lock.Fence{Name: "res", Token: 6}), lock.ErrStaleFence,
				"the lost call recorded its token")
		})
	}
}
