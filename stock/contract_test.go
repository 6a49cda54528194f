package stock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// The error contract (internal/retry's doc): a write whose reply was lost
// ends in nil or ErrUnknownOutcome whatever the client meets afterwards, and
// calling again with the same ID returns the first decision. These tests
// lose a write's reply through the proxy and then inject the fault a retry
// meets, on go-redis's default options (it re-sends below every hook) and
// with MaxRetries -1 (it does not).

// contractWrite is one write of stock, called with an operation ID.
type contractWrite struct {
	name string
	// prepare runs before the call for each ID (the warm-up's and the one
	// under test): a reservation to confirm, an order to refund.
	prepare func(ctx context.Context, inv *stock.Inventory, sku, id string) error
	call    func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error)
	// check asserts the state after the warm-up and the call under test,
	// each applied once.
	check   func(t *testing.T, inv *stock.Inventory, sku string)
	replays bool // a repeated call reports Result.Replayed
	// skip is how many commands the call sends before its write (a read
	// of a SKU it has not seen yet): their replies pass.
	skip int
}

const contractInitial = 100

func contractOrder(id, sku string, qty int64) stock.Order {
	return stock.Order{ID: id, Buyer: "b-" + id, Items: []stock.Item{{SKU: sku, Qty: qty}}}
}

func requireLevels(t *testing.T, inv *stock.Inventory, sku string, want stock.Levels) {
	t.Helper()
	lv, err := inv.Level(context.Background(), sku)
	require.NoError(t, err)
	require.Equal(t, want, lv, "applied exactly once")
}

func levels(want stock.Levels) func(*testing.T, *stock.Inventory, string) {
	return func(t *testing.T, inv *stock.Inventory, sku string) { requireLevels(t, inv, sku, want) }
}

// fence is a lock.Fence the fenced writes carry; its token is recorded in
// the SKU's group on first use and stays current.
var fence = lock.Fence{Name: "contract", Token: 7}

func contractWrites() []contractWrite {
	none := func(context.Context, *stock.Inventory, string, string) error { return nil }
	return []contractWrite{
		{name: "Create", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return stock.Result{}, inv.Create(ctx, sku+"."+id, 7)
			},
			check: func(t *testing.T, inv *stock.Inventory, sku string) {
				requireLevels(t, inv, sku+".x1", stock.Levels{Available: 7})
			}, skip: 1},
		{name: "Restock", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Restock(ctx, id, sku, 5)
			},
			check: levels(stock.Levels{Available: contractInitial + 10}), replays: true},
		{name: "WriteOff", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.WriteOff(ctx, id, sku, 3)
			},
			check: levels(stock.Levels{Available: contractInitial - 6}), replays: true},
		{name: "Restock/fenced", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Restock(ctx, id, sku, 5, stock.WithFence(fence))
			},
			check: levels(stock.Levels{Available: contractInitial + 10}), replays: true},
		{name: "Deduct", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Deduct(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "Deduct/fenced", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Deduct(ctx, contractOrder(id, sku, 2), stock.WithFence(fence))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "DeductBatch", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				r := inv.DeductBatch(ctx, []stock.Order{contractOrder(id, sku, 2)})
				return r[0].Result, r[0].Err
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "Reserve", prepare: none,
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Reserved: 4}), replays: true},
		{name: "Confirm",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Confirm(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial - 4, Sold: 4}), replays: true},
		{name: "ConfirmPartial",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.ConfirmPartial(ctx, contractOrder(id, sku, 2), []stock.Item{{SKU: sku, Qty: 1}})
			},
			check: levels(stock.Levels{Available: contractInitial - 2, Sold: 2}), replays: true},
		{name: "Cancel",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Reserve(ctx, contractOrder(id, sku, 2), time.Hour)
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Cancel(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial})},
		{name: "Refund",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				_, err := inv.Deduct(ctx, contractOrder(id, sku, 2))
				return err
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return inv.Refund(ctx, contractOrder(id, sku, 2))
			},
			check: levels(stock.Levels{Available: contractInitial, Sold: 4, Refunded: 4}), replays: true},
		{name: "CloseSKU",
			prepare: func(ctx context.Context, inv *stock.Inventory, sku, id string) error {
				return inv.Create(ctx, sku+"."+id, 1)
			},
			call: func(ctx context.Context, inv *stock.Inventory, sku, id string) (stock.Result, error) {
				return stock.Result{}, inv.CloseSKU(ctx, sku+"."+id)
			},
			check: func(t *testing.T, inv *stock.Inventory, sku string) {
				_, err := inv.Deduct(context.Background(), contractOrder("after-close", sku+".x1", 1))
				require.ErrorIs(t, err, stock.ErrSKUClosed)
			}},
	}
}

// contractFault is what a retry meets after the reply was lost.
type contractFault struct {
	name string
	// server is the configuration of the fault's server.
	server redistest.Options
	// setup readies a fresh server for the fault (once per test).
	setup func(t *testing.T, s *redistest.Server)
	// client adjusts the client the writes go through.
	client func(o *redis.Options)
	// then injects the fault once the reply was dropped; heal undoes it
	// after the call returned.
	then func(t *testing.T, f *faultRun)
	heal func(t *testing.T, f *faultRun)
}

type faultRun struct {
	s   *redistest.Server
	px  *redistest.Proxy
	rdb *redis.Client
	wg  sync.WaitGroup
	err error // from background work of then, checked by heal
	mu  sync.Mutex
}

func (f *faultRun) background(fn func() error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := fn(); err != nil {
			f.mu.Lock()
			f.err = errors.Join(f.err, err)
			f.mu.Unlock()
		}
	}()
}

func (f *faultRun) wait(t *testing.T) {
	f.wg.Wait()
	require.NoError(t, f.err)
}

// busyFor outlasts the read timeout and every retry of contractPolicy.
const busyFor = time.Second

// contractPolicy spreads the module's own retries over a few hundred
// milliseconds, so they meet the fault rather than outrun it.
var contractPolicy = contractRetry{Attempts: 4, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

// contractRetry is the arguments of stock.WithRetry.
type contractRetry struct {
	Attempts               int
	MinBackoff, MaxBackoff time.Duration
}

func contractFaults() []contractFault {
	return []contractFault{
		{name: "cut",
			then: func(t *testing.T, f *faultRun) { require.NoError(t, f.px.Cut(true)) },
			heal: func(t *testing.T, f *faultRun) { require.NoError(t, f.px.Cut(false)) }},
		{name: "loading",
			server: redistest.Options{AOF: true, AppendFsync: "always"},
			setup: func(t *testing.T, s *redistest.Server) {
				require.NoError(t, s.SlowLoading(t.Context(), time.Second))
			},
			then: func(t *testing.T, f *faultRun) {
				require.NoError(t, f.s.Kill())
				f.background(func() error { return f.s.Restart(context.Background()) })
			},
			heal: func(t *testing.T, f *faultRun) { f.wait(t) }},
		{name: "pool exhausted",
			client: func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 1, 50*time.Millisecond },
			then: func(t *testing.T, f *faultRun) {
				// Two callers queue for the only connection and hold it
				// for longer than the write's retries last once they have it.
				for i := range 2 {
					f.background(func() error {
						for {
							err := f.rdb.BLPop(context.Background(), busyFor, fmt.Sprintf("blocker-%d", i)).Err()
							if !errors.Is(err, redis.ErrPoolTimeout) {
								return nil
							}
						}
					})
				}
			},
			heal: func(t *testing.T, f *faultRun) { f.wait(t) }},
		{name: "busy",
			server: redistest.Options{Config: []string{"busy-reply-threshold 20"}},
			then: func(t *testing.T, f *faultRun) {
				done, err := f.s.Busy(t.Context(), busyFor)
				require.NoError(t, err)
				f.background(func() error { return <-done })
			},
			heal: func(t *testing.T, f *faultRun) { f.wait(t) }},
	}
}

// variants are the two kinds of go-redis client.
var variants = []struct {
	name      string
	sendsOnce bool
}{{"default options", false}, {"MaxRetries -1", true}}

// core are the writes every fault runs in the default tier; the chaos tier
// runs every write under every fault.
var core = map[string]bool{"Deduct": true, "Restock/fenced": true}

func TestContract_lostReplyThenFault(t *testing.T) { contractMatrix(t, false) }

// TestChaos_contractEveryWrite is TestContract_lostReplyThenFault with
// every write under every fault (about three minutes).
func TestChaos_contractEveryWrite(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	contractMatrix(t, true)
}

func contractMatrix(t *testing.T, full bool) {
	for _, fault := range contractFaults() {
		t.Run(fault.name, func(t *testing.T) {
			s := redistest.New(t, fault.server)
			if fault.setup != nil {
				fault.setup(t, s)
			}
			for _, v := range variants {
				for _, w := range contractWrites() {
					if !full && fault.name != "cut" && !core[w.name] {
						continue
					}
					t.Run(v.name+"/"+w.name, func(t *testing.T) {
						px := redistest.NewProxy(t, s.Addr())
						rdb := proxiedClient(t, px, v.sendsOnce, fault.client)
						f := &faultRun{s: s, px: px, rdb: rdb}
						runContract(t, rdb, contractPolicy, w, true, func(_ string, call func() error) error {
							return redistest.LostReplyAfter(t, px, w.skip, call, func() { fault.then(t, f) })
						}, func() { fault.heal(t, f) })
					})
				}
			}
		})
	}
}

// proxiedClient is a client through px with a read timeout the faults
// outlast, re-sending or not.
func proxiedClient(t *testing.T, px *redistest.Proxy, sendsOnce bool, adjust func(*redis.Options)) *redis.Client {
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

// On the loopback Cluster, the reply is lost and the key's slot moves to the
// other master before the retry: it meets MOVED (and, once go-redis's
// redirects run out or are off, returns it).
func TestContract_lostReplyThenSlotMoved(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 2})
	proxies := map[string]*redistest.Proxy{}
	for _, m := range c.Masters() {
		proxies[m.Addr()] = redistest.NewProxy(t, m.Addr())
	}
	direct := c.Client()
	for _, v := range variants {
		for _, w := range contractWrites() {
			if !core[w.name] && w.name != "Create" && w.name != "DeductBatch" {
				continue
			}
			t.Run(v.name+"/"+w.name, func(t *testing.T) {
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
				// Two attempts: the second meets MOVED (the first one's
				// redirects ran out or are off) and is the last.
				p := contractPolicy
				p.Attempts = 2
				var moved func() bool
				runContract(t, rdb, p, w, true, func(sku string, call func() error) error {
					tag, _, _ := strings.Cut(sku, "/")
					owner, err := direct.MasterForKey(t.Context(), "{"+tag+"}")
					require.NoError(t, err)
					return redistest.LostReplyAfter(t, proxies[owner.Options().Addr], w.skip, call, func() {
						to, err := c.MoveSlot(t.Context(), "{"+tag+"}")
						require.NoError(t, err)
						moved = func() bool {
							m, err := rdb.MasterForKey(t.Context(), "{"+tag+"}")
							return err == nil && m.Options().Addr == to.Addr()
						}
					})
				}, func() {
					// A client that follows no redirects learns the new
					// owner once it reloaded (in the background); a read
					// before the write would otherwise fail on MOVED.
					for !moved() {
						rdb.ReloadState(t.Context())
						time.Sleep(10 * time.Millisecond)
					}
				})
			})
		}
	}
}

// The other side: when nothing reached Redis (the port was cut before the
// call) and the client sends each command once, the caller gets the bare
// error, not ErrUnknownOutcome, and the write did not happen. A client that
// re-sends cannot tell, so the outcome is unknown.
func TestContract_nothingSent(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	for _, v := range variants {
		for _, w := range contractWrites() {
			t.Run(v.name+"/"+w.name, func(t *testing.T) {
				px := redistest.NewProxy(t, s.Addr())
				rdb := proxiedClient(t, px, v.sendsOnce, nil)
				runContract(t, rdb, contractPolicy, w, false, func(_ string, call func() error) error {
					require.NoError(t, px.Cut(true))
					err := call()
					require.Error(t, err)
					// A call that reads first (Create's lookup) fails on the
					// read: its write was never sent, whatever the client.
					require.Equal(t, !v.sendsOnce && w.skip == 0, errors.Is(err, stock.ErrUnknownOutcome), "%v", err)
					return nil
				}, func() {
					require.NoError(t, px.Cut(false))
					// go-redis backs off dialling after refused dials.
					for rdb.Ping(t.Context()).Err() != nil {
						time.Sleep(10 * time.Millisecond)
					}
				})
			})
		}
	}
}

var contractSKUs atomic.Int64

// runContract runs w once to warm up (scripts loaded, caches filled), then
// once under inject, heals, and checks the contract: when the call's write
// ran (ran), the call ended in nil or ErrUnknownOutcome and calling again
// with the same ID returns the first decision; when it did not, calling
// again applies it for the first time.
func runContract(t *testing.T, rdb redis.UniversalClient, p contractRetry, w contractWrite, ran bool,
	inject func(sku string, call func() error) error, heal func()) {
	t.Helper()
	ctx := t.Context()
	n := contractSKUs.Add(1)
	sku := fmt.Sprintf("c%d/sku", n)
	inv := mustNew(t, rdb, stock.WithKeyPrefix(fmt.Sprintf("contract%d", n)),
		stock.WithReclaimInterval(0), stock.WithRetry(p.Attempts, p.MinBackoff, p.MaxBackoff))
	t.Cleanup(func() { require.NoError(t, inv.Close()) })
	require.NoError(t, inv.Create(ctx, sku, contractInitial))
	for _, id := range []string{"warm", "x1"} {
		require.NoError(t, w.prepare(ctx, inv, sku, id))
	}
	_, err := w.call(ctx, inv, sku, "warm")
	require.NoError(t, err)

	err = inject(sku, func() error { _, err := w.call(ctx, inv, sku, "x1"); return err })
	heal()
	t.Logf("call under the fault: %v", err)
	if err != nil {
		require.ErrorIs(t, err, stock.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
	}
	res, err := w.call(ctx, inv, sku, "x1")
	require.NoError(t, err, "the same ID again")
	if w.replays {
		require.Equal(t, ran, res.Replayed, "the first call applied it")
	}
	w.check(t, inv, sku)
}
