package retry

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// ReloadInterval is the shortest time between two slot-map reloads that
// Reload makes for one Cluster client: a burst of failed calls (every
// caller of a dead master's slots at once) costs one reload, not one each.
const ReloadInterval = 100 * time.Millisecond

// Reload brings the slot map of rdb, when it is a *redis.ClusterClient, up
// to date before it returns, so that the next command is routed by the
// cluster's current view (another type of client needs none: it returns at
// once). At most one reload per ReloadInterval runs per client: a caller
// that comes while one runs waits for it (or for ctx), and one that comes
// within ReloadInterval of the start of the last one uses the map it got.
//
// go-redis's ReloadState only schedules a reload in the background, and an
// asked reload that comes while one runs or cools down (200 ms) is merged
// into a later one: the next command may well run on the old map. Reload
// uses ForEachShard instead, which loads the map in the calling goroutine
// (CLUSTER SLOTS from the first node of the map's that answers) before it
// visits the nodes, here only to note their addresses (see Node).
// TestReload_freshMapAtOnce fails if a go-redis upgrade changes that.
func Reload(ctx context.Context, rdb any) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	reloaderOf(cc).reload(ctx, cc)
}

// Node returns the client cc holds for the node at addr (host:port), master
// or replica, as a recent Reload found it; when that did not list addr (a
// node a MOVED or ASK reply names that the map does not hold yet), or it
// is older than nodesFresh, it reloads first, as Reload does. It returns
// nil when cc knows no such node.
func Node(ctx context.Context, cc *redis.ClusterClient, addr string) *redis.Client {
	r := reloaderOf(cc)
	if n := r.node(addr); n != nil {
		return n
	}
	r.reload(ctx, cc)
	return r.node(addr)
}

// nodesFresh is how long Node trusts the node clients a reload found:
// go-redis closes the client of a node a minute after a map without it
// was loaded.
const nodesFresh = 30 * time.Second

// reloader is Reload's state for one Cluster client.
type reloader struct {
	// stale is set when a call met an error that says the map is out of
	// date but could not reload it (its ctx had ended, or it gave up
	// first): the next call of Do or Read on the client reloads before
	// its first attempt.
	stale   atomic.Bool
	mu      sync.Mutex
	running chan struct{}            // closed when the reload in progress ends; nil when none
	last    time.Time                // when the last finished reload started
	nodes   map[string]*redis.Client // by address, as the last reload found them
}

func (r *reloader) reload(ctx context.Context, cc *redis.ClusterClient) {
	if ctx.Err() != nil {
		r.stale.Store(true) // the next call reloads
		return
	}
	r.mu.Lock()
	if done := r.running; done != nil {
		r.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	if !r.last.IsZero() && time.Since(r.last) < ReloadInterval {
		r.mu.Unlock()
		return
	}
	done := make(chan struct{})
	r.running = done
	r.mu.Unlock()

	start := time.Now()
	var mu sync.Mutex
	nodes := map[string]*redis.Client{}
	_ = cc.ForEachShard(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		nodes[n.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	r.mu.Lock()
	r.running = nil
	if ctx.Err() == nil {
		r.last = start // a reload cut short by ctx leaves the way open
		r.nodes = nodes
		r.stale.Store(false)
	} else {
		r.stale.Store(true)
	}
	r.mu.Unlock()
	close(done)
}

func (r *reloader) node(addr string) *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last) > nodesFresh {
		return nil
	}
	return r.nodes[addr]
}

// reloaders maps a Cluster client, held weakly, to its reloader; the entry
// goes when the client is garbage.
var reloaders sync.Map // weak.Pointer[redis.ClusterClient] -> *reloader

func reloaderOf(cc *redis.ClusterClient) *reloader {
	k := weak.Make(cc)
	if r, ok := reloaders.Load(k); ok {
		return r.(*reloader)
	}
	r, loaded := reloaders.LoadOrStore(k, &reloader{})
	if !loaded {
		runtime.AddCleanup(cc, func(k weak.Pointer[redis.ClusterClient]) { reloaders.Delete(k) }, k)
	}
	return r.(*reloader)
}
