package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// The error contract (internal/retry's doc): a write whose reply was lost
// ends in nil or ErrUnknownOutcome whatever the client meets afterwards, and
// calling again with the same ID returns the first decision. These tests
// lose a write's reply through the proxy and then inject the fault a retry
// meets, on go-redis's default options (it re-sends below every hook) and
// with MaxRetries -1 (it does not).

// contractWrite is one write of wallet, called with a transaction ID, on
// accounts a and b of one slot group (and c of another).
type contractWrite struct {
	name string
	// prepare runs before the call for each ID (the warm-up's and the one
	// under test): a hold to capture or void.
	prepare func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error
	call    func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error)
	// check asserts the state after the warm-up and the call under test,
	// each applied once.
	check   func(t *testing.T, l *wallet.Ledger, acc accounts)
	replays bool // a repeated call reports Result.Replayed
	// skip is how many commands the call sends before its write: their
	// replies pass.
	skip int
}

type accounts struct{ a, b, c string }

const seed = 1000

func requireBalance(t *testing.T, l *wallet.Ledger, account string, posted, held int64) {
	t.Helper()
	b, err := l.Balance(context.Background(), account)
	require.NoError(t, err)
	require.Equal(t, [2]int64{posted, held}, [2]int64{b.Posted, b.Held}, "%s: posted, held: applied exactly once", account)
}

func balances(a, b int64) func(*testing.T, *wallet.Ledger, accounts) {
	return func(t *testing.T, l *wallet.Ledger, acc accounts) {
		requireBalance(t, l, acc.a, a, 0)
		requireBalance(t, l, acc.b, b, 0)
	}
}

// fence is a lock.Fence the fenced writes carry; its token is recorded in
// the accounts' group on first use and stays current.
var contractFence = lock.Fence{Name: "contract", Token: 7}

func contractWrites() []contractWrite {
	none := func(context.Context, *wallet.Ledger, accounts, string) error { return nil }
	hold := func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error {
		_, err := l.Hold(ctx, wallet.HoldReq{ID: id, Account: acc.a, Amount: 50, TTL: time.Hour})
		return err
	}
	return []contractWrite{
		{name: "Open", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return wallet.Result{}, l.Open(ctx, acc.a+"."+id, wallet.WithCurrency("EUR"))
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				b, err := l.Balance(context.Background(), acc.a+".x1")
				require.NoError(t, err)
				require.Equal(t, "EUR", b.Currency)
			}},
		{name: "Credit", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Credit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 100})
			},
			check: balances(seed+200, 0), replays: true},
		{name: "Debit", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Debit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 30})
			},
			check: balances(seed-60, 0), replays: true},
		{name: "Debit/fenced", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Debit(ctx, wallet.Tx{ID: id, Account: acc.a, Amount: 30}, wallet.WithFence(contractFence))
			},
			check: balances(seed-60, 0), replays: true},
		{name: "Transfer", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Transfer(ctx, wallet.Transfer{ID: id, From: acc.a, To: acc.b, Amount: 10})
			},
			check: balances(seed-20, 20), replays: true},
		{name: "TransferBatch", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				r := l.TransferBatch(ctx, []wallet.Transfer{{ID: id, From: acc.a, To: acc.b, Amount: 10}})
				return r[0].Result, r[0].Err
			},
			check: balances(seed-20, 20), replays: true},
		{name: "Transfer/cross-group", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Transfer(ctx, wallet.Transfer{ID: id, From: acc.a, To: acc.c, Amount: 10})
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				requireBalance(t, l, acc.a, seed-20, 0)
				requireBalance(t, l, acc.c, 20, 0)
			}, replays: true, skip: 1}, // it reads the destination first
		{name: "Hold", prepare: none,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Hold(ctx, wallet.HoldReq{ID: id, Account: acc.a, Amount: 50, TTL: time.Hour})
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed, 100) },
			replays: true},
		{name: "Capture", prepare: hold,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Capture(ctx, acc.a, id, 20)
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed-40, 0) },
			replays: true},
		{name: "Void", prepare: hold,
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return l.Void(ctx, acc.a, id)
			},
			check:   func(t *testing.T, l *wallet.Ledger, acc accounts) { requireBalance(t, l, acc.a, seed, 0) },
			replays: true},
		{name: "CloseAccount",
			prepare: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) error {
				return l.Open(ctx, acc.a+"."+id, wallet.WithCurrency("EUR"))
			},
			call: func(ctx context.Context, l *wallet.Ledger, acc accounts, id string) (wallet.Result, error) {
				return wallet.Result{}, l.CloseAccount(ctx, acc.a+"."+id)
			},
			check: func(t *testing.T, l *wallet.Ledger, acc accounts) {
				b, err := l.Balance(context.Background(), acc.a+".x1")
				require.NoError(t, err)
				require.True(t, b.Closed)
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
var contractPolicy = wallet.WithRetry(4, 50*time.Millisecond, 100*time.Millisecond)

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
var core = map[string]bool{"Debit": true, "Transfer": true, "Debit/fenced": true}

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

// On the loopback Cluster, the reply is lost and the accounts' slot moves to
// the other master before the retry: it meets MOVED (and, once go-redis's
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
			if !core[w.name] && w.name != "Open" && w.name != "TransferBatch" {
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
				p := wallet.WithRetry(2, 50*time.Millisecond, 100*time.Millisecond)
				var moved func() bool
				runContract(t, rdb, p, w, true, func(tag string, call func() error) error {
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
					// A call that reads first fails on the read: its write
					// was never sent, whatever the client.
					require.Equal(t, !v.sendsOnce && w.skip == 0, errors.Is(err, wallet.ErrUnknownOutcome), "%v", err)
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

var contractGroups atomic.Int64

// runContract runs w once to warm up (scripts loaded), then once under
// inject, heals, and checks the contract: when the call's write ran (ran),
// the call ended in nil or ErrUnknownOutcome and calling again with the same
// ID returns the first decision; when it did not, calling again applies it
// for the first time.
func runContract(t *testing.T, rdb redis.UniversalClient, p wallet.Option, w contractWrite, ran bool,
	inject func(group string, call func() error) error, heal func()) {
	t.Helper()
	ctx := t.Context()
	n := contractGroups.Add(1)
	acc := accounts{a: fmt.Sprintf("w%d/a", n), b: fmt.Sprintf("w%d/b", n), c: fmt.Sprintf("x%d/c", n)}
	l := mustNew(t, rdb, wallet.WithKeyPrefix(fmt.Sprintf("contract%d", n)), p)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	for _, a := range []string{acc.a, acc.b, acc.c} {
		require.NoError(t, l.Open(ctx, a, wallet.WithCurrency("EUR")))
	}
	_, err := l.Credit(ctx, wallet.Tx{ID: "seed", Account: acc.a, Amount: seed})
	require.NoError(t, err)
	for _, id := range []string{"warm", "x1"} {
		require.NoError(t, w.prepare(ctx, l, acc, id))
	}
	_, err = w.call(ctx, l, acc, "warm")
	require.NoError(t, err)

	err = inject(fmt.Sprintf("w%d", n), func() error { _, err := w.call(ctx, l, acc, "x1"); return err })
	heal()
	t.Logf("call under the fault: %v", err)
	if err != nil {
		require.ErrorIs(t, err, wallet.ErrUnknownOutcome, "a write that ran ends in nil or ErrUnknownOutcome")
	}
	res, err := w.call(ctx, l, acc, "x1")
	require.NoError(t, err, "the same ID again")
	if w.replays {
		require.Equal(t, ran, res.Replayed, "the first call applied it")
	}
	w.check(t, l, acc)
}
