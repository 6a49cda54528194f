package redistest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The error contract of redkit's writes: a write whose reply was lost ends
// in nil or the module's ErrUnknownOutcome whatever the client meets
// afterwards, and calling again with the same ID returns the first
// decision; when nothing reached Redis and the client sends each command
// once, the caller gets the bare error. Contract runs those checks for a
// module's writes through a Proxy that drops the reply, then injects the
// fault a retry meets, on go-redis's default options (it re-sends below
// every hook) and with MaxRetries -1 (it does not). Each module gives its
// writes; the faults, clients and checks are the same for all.

// ContractWrite is one write of a module under the contract.
type ContractWrite struct {
	Name string
	// Skip is how many commands the call sends before its write (a read
	// it makes first): their replies pass.
	Skip int
	// Replays is true when a repeated call reports that it replayed.
	Replays bool
	// Start sets the write up on rdb: a fresh instance of the module under
	// a key prefix of its own, retrying attempts times 50–100 ms apart, its
	// data created and the operations "warm" and "x1" prepared.
	Start func(t *testing.T, rdb redis.UniversalClient, attempts int) ContractCall
}

// ContractCall is a write set up by ContractWrite.Start.
type ContractCall struct {
	// Tag is the hash tag (without braces) of the write's keys.
	Tag string
	// Call runs the write with operation ID id.
	Call func(ctx context.Context, id string) (replayed bool, err error)
	// Check asserts the state once "warm" and "x1" each applied once.
	Check func(t *testing.T)
}

// Contract is a module's writes and its ErrUnknownOutcome.
type Contract struct {
	Writes []ContractWrite
	// Core names the writes every fault runs in the default tier; the
	// other writes run under the cut connection only (all of them with
	// LostReplyThenFault(t, true)).
	Core map[string]bool
	// Moved names the writes besides Core that LostReplyThenSlotMoved runs.
	Moved map[string]bool
	// Unknown is the module's ErrUnknownOutcome.
	Unknown error
}

// ContractVariant is a kind of go-redis client: re-sending after a read
// timeout (the default) or sending each command once.
type ContractVariant struct {
	Name      string
	SendsOnce bool
}

// ContractVariants are the two kinds of client the contract holds for.
var ContractVariants = []ContractVariant{{"default options", false}, {"MaxRetries -1", true}}

// ContractClient is a client through px with a read timeout the faults
// outlast, re-sending or not; adjust, when not nil, changes its options.
func ContractClient(t testing.TB, px *Proxy, sendsOnce bool, adjust func(*redis.Options)) *redis.Client {
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

// ContractFault is what a retry meets after the reply was lost.
type ContractFault struct {
	Name string
	// Server is the configuration of the fault's server.
	Server Options
	// Setup readies a fresh server for the fault (once per test).
	Setup func(t *testing.T, s *Server)
	// Client adjusts the client the writes go through.
	Client func(o *redis.Options)
	// Then injects the fault once the reply was dropped; Heal undoes it
	// after the call returned.
	Then, Heal func(t *testing.T, f *FaultRun)
}

// FaultRun is one injection of a ContractFault.
type FaultRun struct {
	Server *Server
	Proxy  *Proxy
	Client *redis.Client

	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// Background runs fn beside the call; Wait waits for it.
func (f *FaultRun) Background(fn func() error) {
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

// Wait waits for the work Background started and fails t with its errors.
func (f *FaultRun) Wait(t testing.TB) {
	f.wg.Wait()
	if f.err != nil {
		t.Fatalf("redistest: fault: %v", f.err)
	}
}

// busyFor outlasts the read timeout and every retry of the contract's
// attempts (4, 50–100 ms apart).
const busyFor = time.Second

// ContractFaults are the faults a retry meets: the connection cut, the
// server restarted and answering LOADING, the client's pool exhausted, a
// script keeping the server BUSY.
func ContractFaults() []ContractFault {
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wait := func(t *testing.T, f *FaultRun) { f.Wait(t) }
	return []ContractFault{
		{Name: "cut",
			Then: func(t *testing.T, f *FaultRun) { must(t, f.Proxy.Cut(true)) },
			Heal: func(t *testing.T, f *FaultRun) { must(t, f.Proxy.Cut(false)) }},
		{Name: "loading",
			Server: Options{AOF: true, AppendFsync: "always"},
			Setup:  func(t *testing.T, s *Server) { must(t, s.SlowLoading(t.Context(), time.Second)) },
			Then: func(t *testing.T, f *FaultRun) {
				must(t, f.Server.Kill())
				f.Background(func() error { return f.Server.Restart(context.Background()) })
			},
			Heal: wait},
		{Name: "pool exhausted",
			Client: func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 1, 50*time.Millisecond },
			Then: func(t *testing.T, f *FaultRun) {
				// Two callers queue for the only connection and hold it for
				// longer than the write's retries last once they have it.
				for i := range 2 {
					f.Background(func() error {
						for {
							err := f.Client.BLPop(context.Background(), busyFor, fmt.Sprintf("blocker-%d", i)).Err()
							if !errors.Is(err, redis.ErrPoolTimeout) {
								return nil
							}
						}
					})
				}
			},
			Heal: wait},
		{Name: "busy",
			Server: Options{Config: []string{"busy-reply-threshold 20"}},
			Then: func(t *testing.T, f *FaultRun) {
				done, err := f.Server.Busy(t.Context(), busyFor)
				must(t, err)
				f.Background(func() error { return <-done })
			},
			Heal: wait},
	}
}

// ForEachFault runs fn for each fault of ContractFaults and each client
// variant, on a fresh server per fault, as subtests "<fault>/<variant>".
// fn gets a run through a fresh proxy and client with NewRun.
func ForEachFault(t *testing.T, fn func(t *testing.T, fault ContractFault, newRun func() *FaultRun)) {
	for _, fault := range ContractFaults() {
		t.Run(fault.Name, func(t *testing.T) {
			s := New(t, fault.Server)
			if fault.Setup != nil {
				fault.Setup(t, s)
			}
			for _, v := range ContractVariants {
				t.Run(v.Name, func(t *testing.T) {
					fn(t, fault, func() *FaultRun {
						px := NewProxy(t, s.Addr())
						return &FaultRun{Server: s, Proxy: px, Client: ContractClient(t, px, v.SendsOnce, fault.Client)}
					})
				})
			}
		})
	}
}

// Run runs the contract's tiers as subtests: LostReplyThenFault (the Core
// writes under every fault), LostReplyThenSlotMoved and NothingSent.
func (c Contract) Run(t *testing.T) {
	t.Run("lostReplyThenFault", func(t *testing.T) { c.LostReplyThenFault(t, false) })
	t.Run("lostReplyThenSlotMoved", c.LostReplyThenSlotMoved)
	t.Run("nothingSent", c.NothingSent)
}

// RunChaos is LostReplyThenFault with every write under every fault (a
// few minutes). It skips unless RUN_CHAOS is set, as make chaos does.
func (c Contract) RunChaos(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("chaos tier: make chaos")
	}
	c.LostReplyThenFault(t, true)
}

// LostReplyThenFault loses the reply of each write and then injects each
// fault before the retry: the call ends in nil or Unknown, and the same ID
// again returns the first decision, applied once. When the reply is lost,
// a key of the write's hash tag must have changed (the write ran), or the
// test fails. With full false, faults other than the cut run the Core
// writes only.
func (c Contract) LostReplyThenFault(t *testing.T, full bool) {
	ForEachFault(t, func(t *testing.T, fault ContractFault, newRun func() *FaultRun) {
		for _, w := range c.Writes {
			if !full && fault.Name != "cut" && !c.Core[w.Name] {
				continue
			}
			t.Run(w.Name, func(t *testing.T) {
				f := newRun()
				direct := f.Server.Client()
				c.run(t, f.Client, 4, w, true, func(tag string, call func() error) error {
					wrote := writesOf(t, direct, tag)
					return LostReplyAfter(t, f.Proxy, w.Skip, call, func() { wrote(); fault.Then(t, f) })
				}, func() { fault.Heal(t, f) })
			})
		}
	})
}

// ContractCluster is a loopback Cluster of two masters, each reached
// through a Proxy, for losing a reply on the master that owns a key.
type ContractCluster struct {
	*Cluster
	// Proxies are the masters' proxies, by the master's address.
	Proxies map[string]*Proxy
	// Direct is a client that does not go through the proxies.
	Direct *redis.ClusterClient
}

// NewContractCluster starts a ContractCluster, stopped at the end of t.
func NewContractCluster(t *testing.T) *ContractCluster {
	cl := &ContractCluster{Cluster: NewCluster(t, ClusterOptions{Masters: 2}), Proxies: map[string]*Proxy{}}
	for _, m := range cl.Masters() {
		cl.Proxies[m.Addr()] = NewProxy(t, m.Addr())
	}
	cl.Direct = cl.Client()
	return cl
}

// ProxiedClient is a client through the proxies with the contract's read
// timeout; with sendsOnce it sends each command once and follows no
// redirect.
func (c *ContractCluster) ProxiedClient(sendsOnce bool) *redis.ClusterClient {
	return c.Client(func(o *redis.ClusterOptions) {
		o.ReadTimeout, o.DialerRetries = 300*time.Millisecond, 1
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if px, ok := c.Proxies[addr]; ok {
				addr = px.Addr()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		if sendsOnce {
			o.MaxRedirects, o.MaxRetries = -1, -1
		}
	})
}

// ProxyOf returns the proxy of the master that owns key.
func (c *ContractCluster) ProxyOf(t testing.TB, key string) *Proxy {
	owner, err := c.Direct.MasterForKey(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Proxies[owner.Options().Addr]
}

// LostReplyThenSlotMoved runs the Core and Moved writes on a loopback
// Cluster of two masters: the reply is lost (a key of the write's hash tag
// changed, or the test fails) and the key's slot moves to the other master
// before the retry, which meets MOVED (and, once go-redis's redirects ran
// out or are off, returns it).
func (c Contract) LostReplyThenSlotMoved(t *testing.T) {
	cl := NewContractCluster(t)
	for _, v := range ContractVariants {
		for _, w := range c.Writes {
			if !c.Core[w.Name] && !c.Moved[w.Name] {
				continue
			}
			t.Run(v.Name+"/"+w.Name, func(t *testing.T) {
				rdb := cl.ProxiedClient(v.SendsOnce)
				// Two attempts: the second meets MOVED (the first one's
				// redirects ran out or are off) and is the last.
				var moved func() bool
				c.run(t, rdb, 2, w, true, func(tag string, call func() error) error {
					owner, err := cl.Direct.MasterForKey(t.Context(), "{"+tag+"}")
					if err != nil {
						t.Fatal(err)
					}
					wrote := writesOf(t, owner, tag)
					return LostReplyAfter(t, cl.ProxyOf(t, "{"+tag+"}"), w.Skip, call, func() {
						wrote()
						to, err := cl.MoveSlot(t.Context(), "{"+tag+"}")
						if err != nil {
							t.Fatal(err)
						}
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

// NothingSent cuts the connection before each write: a client that sends
// once gets the bare error (not Unknown) and the write did not happen; a
// client that re-sends cannot tell, so the outcome is unknown (unless the
// call failed on a read before its write). Calling again applies it once.
func (c Contract) NothingSent(t *testing.T) {
	s := New(t, Options{})
	for _, v := range ContractVariants {
		for _, w := range c.Writes {
			t.Run(v.Name+"/"+w.Name, func(t *testing.T) {
				px := NewProxy(t, s.Addr())
				rdb := ContractClient(t, px, v.SendsOnce, nil)
				c.run(t, rdb, 4, w, false, func(_ string, call func() error) error {
					if err := px.Cut(true); err != nil {
						t.Fatal(err)
					}
					err := call()
					if err == nil {
						t.Fatal("a call through a cut connection succeeded")
					}
					if want := !v.SendsOnce && w.Skip == 0; errors.Is(err, c.Unknown) != want {
						t.Fatalf("unknown outcome = %v, want %v: %v", !want, want, err)
					}
					return nil
				}, func() {
					if err := px.Cut(false); err != nil {
						t.Fatal(err)
					}
					// go-redis backs off dialling after refused dials.
					for rdb.Ping(t.Context()).Err() != nil {
						time.Sleep(10 * time.Millisecond)
					}
				})
			})
		}
	}
}

// run sets w up, calls it once to warm up (scripts loaded, caches filled),
// then once under inject, heals, and checks the contract: when the call's
// write ran (ran), the call ended in nil or Unknown and calling again with
// the same ID returns the first decision; when it did not, calling again
// applies it for the first time.
func (c Contract) run(t *testing.T, rdb redis.UniversalClient, attempts int, w ContractWrite, ran bool,
	inject func(tag string, call func() error) error, heal func()) {
	t.Helper()
	ctx := t.Context()
	call := w.Start(t, rdb, attempts)
	if _, err := call.Call(ctx, "warm"); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	err := inject(call.Tag, func() error { _, err := call.Call(ctx, "x1"); return err })
	heal()
	t.Logf("call under the fault: %v", err)
	if err != nil && !errors.Is(err, c.Unknown) {
		t.Fatalf("a write that ran ends in nil or ErrUnknownOutcome, not %v", err)
	}
	replayed, err := call.Call(ctx, "x1")
	if err != nil {
		t.Fatalf("the same ID again: %v", err)
	}
	if w.Replays && replayed != ran {
		t.Fatalf("replayed = %v: the first call %s", replayed, map[bool]string{true: "applied it", false: "did not run"}[ran])
	}
	call.Check(t)
}

// writesOf takes the keys of the hash tag tag on c and returns a check,
// run once a reply was lost, that fails t unless one of them changed: the
// reply lost must be that of the write, which ran, not of a command that
// changed nothing.
func writesOf(t *testing.T, c redis.Cmdable, tag string) func() {
	t.Helper()
	pattern := "*{" + tag + "}*"
	before, err := Snapshot(t.Context(), c, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		after, err := Snapshot(t.Context(), c, pattern)
		if err != nil {
			t.Fatal(err)
		}
		if maps.Equal(before, after) {
			t.Fatalf("redistest: a reply was lost, yet no key matching %s changed: the command that ran was not the write", pattern)
		}
	}
}

// Tag returns the hash tag of a "group/name" ID: the part before '/'.
func Tag(id string) string {
	g, _, _ := strings.Cut(id, "/")
	return g
}
