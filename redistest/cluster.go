package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions configure a Redis Cluster on loopback.
type ClusterOptions struct {
	// Masters is the number of shards (default 3). The 16384 slots are
	// split evenly between them.
	Masters int
	// Replicas is the number of replicas per master (default 0).
	// FailoverShard needs at least 1.
	Replicas int
	// Options apply to every node (Port and Dir must be zero).
	Options Options
}

// Cluster is a Redis Cluster of local redis-server processes.
type Cluster struct {
	opts Options // of every node, also of a node that replaces another

	mu    sync.Mutex
	nodes []*Server // the cluster's members, a killed one included until it rejoins or is replaced
	// dead are members killed and not (yet) back: the other nodes flag
	// them failed, and a check of the cluster's agreement skips them.
	dead map[*Server]bool
	// retired are processes the cluster no longer counts (a node that came
	// back on another port, a node replaced): Close stops them last, as a
	// node restarted on another port shares its predecessor's directory.
	retired []*Server
	// votedAbout is when a failover of each master last asked the other
	// masters' votes (CLUSTER FAILOVER plain or FORCE).
	votedAbout map[*Server]time.Time
	shards     []*shard
	clients    []*redis.ClusterClient // made by Client, refreshed by Failover
	appClients []*redis.ClusterClient // made by AppClient, never refreshed
	closed     bool
}

// shard is one master and its replicas; FailoverShard swaps them.
type shard struct {
	master   *Server
	replicas []*Server
}

// NewCluster starts a cluster for a test and stops it in tb.Cleanup.
func NewCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c, err := StartCluster(context.Background(), opts)
	return forTest(tb, c, err)
}

// StartCluster starts Masters*(1+Replicas) cluster nodes, assigns the slots
// (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER MEET), attaches the replicas
// (CLUSTER REPLICATE) and returns once every node reports cluster_state:ok
// and all nodes agree on who serves which slots. The caller must Close it.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.Masters < 1 || opts.Replicas < 0 || opts.Masters > 16384 {
		return nil, fmt.Errorf("redistest: StartCluster: bad shape %d masters, %d replicas", opts.Masters, opts.Replicas)
	}
	if opts.Options.Port != 0 || opts.Options.Dir != "" {
		return nil, errors.New("redistest: StartCluster: Options.Port and Options.Dir must be zero")
	}
	n := opts.Masters * (1 + opts.Replicas)
	c := &Cluster{opts: opts.Options, nodes: make([]*Server, n), dead: map[*Server]bool{}, votedAbout: map[*Server]time.Time{}}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c.nodes[i], errs[i] = startServer(ctx, opts.Options, func(s *Server) { s.cluster = true })
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		return nil, err
	}
	for i := range opts.Masters {
		sh := &shard{master: c.nodes[i]}
		for r := range opts.Replicas {
			sh.replicas = append(sh.replicas, c.nodes[opts.Masters+i*opts.Replicas+r])
		}
		c.shards = append(c.shards, sh)
	}
	if err := c.form(ctx, opts.Masters); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) form(ctx context.Context, masters int) error {
	ids := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		// Distinct config epochs avoid a collision-resolution round. A
		// node on a port that a cluster still shutting down used can have
		// been reached by its gossip and know other nodes (its epoch is
		// then no longer 0): such a node is reset to an empty one first.
		var err error
		for try := 0; try < 3; try++ {
			if try > 0 {
				if _, rerr := s.do(ctx, "CLUSTER", "RESET", "HARD"); rerr != nil {
					return fmt.Errorf("redistest: CLUSTER RESET HARD: %w", rerr)
				}
			}
			if _, err = s.do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err == nil ||
				!strings.Contains(err.Error(), "already non-zero") {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER SET-CONFIG-EPOCH: %w", err)
		}
		v, err := s.do(ctx, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID: %w", err)
		}
		ids[i], _ = v.(string)
	}
	for i, sh := range c.shards {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if _, err := sh.master.do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE %d %d: %w", lo, hi, err)
		}
	}
	first := c.nodes[0]
	for _, s := range c.nodes[1:] {
		if _, err := first.do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.port+10000); err != nil {
			return fmt.Errorf("redistest: CLUSTER MEET %s: %w", s.Addr(), err)
		}
	}
	// A replica can only follow a master it already knows.
	if err := c.waitAllKnown(ctx); err != nil {
		return err
	}
	for i, sh := range c.shards {
		for _, r := range sh.replicas {
			if _, err := r.do(ctx, "CLUSTER", "REPLICATE", ids[i]); err != nil {
				return fmt.Errorf("redistest: CLUSTER REPLICATE: %w", err)
			}
		}
	}
	return c.waitStable(ctx)
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, master, link, slots string
}

func (s *Server) clusterNodes(ctx context.Context) ([]clusterNode, error) {
	v, err := s.do(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	text, _ := v.(string)
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr // a lone node has not learned its IP
		}
		out = append(out, clusterNode{id: f[0], addr: addr, flags: f[2], master: f[3], link: f[7], slots: strings.Join(f[8:], " ")})
	}
	return out, nil
}

func (c *Cluster) waitAllKnown(ctx context.Context) error {
	members, live := c.members()
	return poll(ctx, 30*time.Second, func() (bool, error) {
		for _, s := range live {
			nodes, err := s.clusterNodes(ctx)
			if err != nil || len(nodes) != len(members) {
				return false, nil
			}
			for _, n := range nodes {
				if strings.Contains(n.flags, "handshake") || strings.Contains(n.flags, "noaddr") {
					return false, nil
				}
			}
		}
		return true, nil
	}, "cluster nodes to meet")
}

// members returns the cluster's members and, of them, those not dead.
func (c *Cluster) members() (members, live []*Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	members = slices.Clone(c.nodes)
	for _, s := range members {
		if !c.dead[s] {
			live = append(live, s)
		}
	}
	return members, live
}

// waitStable waits until every live node reports cluster_state:ok and
// every live node has the same view: the same masters with the same slots,
// each replica following the master recorded in c.shards, all links to
// live nodes connected. A dead node is only required to be known, as
// failed or not.
func (c *Cluster) waitStable(ctx context.Context) error {
	c.mu.Lock()
	want := make(map[string]string) // addr -> "master" or master's addr
	dead := make(map[string]bool)
	for _, sh := range c.shards {
		want[sh.master.Addr()] = "master"
		for _, r := range sh.replicas {
			want[r.Addr()] = sh.master.Addr()
		}
	}
	for s := range c.dead {
		delete(want, s.Addr())
		dead[s.Addr()] = true
	}
	c.mu.Unlock()
	members, live := c.members()
	return poll(ctx, 60*time.Second, func() (bool, error) {
		var views []string
		for _, s := range live {
			if want[s.Addr()] != "master" {
				info, err := s.info(ctx, "replication")
				if err != nil || infoField(info, "master_link_status") != "up" {
					return false, nil
				}
			}
			info, err := s.do(ctx, "CLUSTER", "INFO")
			if str, _ := info.(string); err != nil || infoField(str, "cluster_state") != "ok" {
				return false, nil
			}
			nodes, err := s.clusterNodes(ctx)
			if err != nil || len(nodes) != len(members) {
				return false, nil
			}
			byID := map[string]string{}
			for _, n := range nodes {
				byID[n.id] = n.addr
			}
			var view []string
			for _, n := range nodes {
				if dead[n.addr] {
					continue
				}
				if n.link != "connected" || strings.Contains(n.flags, "fail") || strings.Contains(n.flags, "handshake") {
					return false, nil
				}
				role := "master"
				if strings.Contains(n.flags, "slave") {
					role = byID[n.master]
				}
				if want[n.addr] != role {
					return false, nil
				}
				view = append(view, n.id+" "+role+" "+n.slots)
			}
			slices.Sort(view)
			views = append(views, strings.Join(view, "\n"))
		}
		for _, v := range views[1:] {
			if v != views[0] {
				return false, nil
			}
		}
		return true, nil
	}, "cluster_state:ok and agreement on every node")
}

// Client returns a new cluster client seeded with every node, closed by
// Close. Extra options are applied on top of Addrs.
func (c *Cluster) Client(opt ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: c.Nodes()[0].tlsConfig()}
	for _, f := range opt {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	c.mu.Lock()
	c.clients = append(c.clients, cc)
	c.mu.Unlock()
	return cc
}

// Addrs returns the address of every node (a killed one included until it
// rejoins or is replaced).
func (c *Cluster) Addrs() []string {
	nodes := c.Nodes()
	out := make([]string, len(nodes))
	for i, s := range nodes {
		out[i] = s.Addr()
	}
	return out
}

// Masters returns the current master of every shard, in slot order.
func (c *Cluster) Masters() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Server, len(c.shards))
	for i, sh := range c.shards {
		out[i] = sh.master
	}
	return out
}

// Replica returns the first replica of the shard whose master serves
// key's slot now. It needs Replicas ≥ 1.
func (c *Cluster) Replica(ctx context.Context, key string) (*Server, error) {
	sh, err := c.shardOf(ctx, key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.liveReplica(sh)
	if r == nil {
		return nil, errors.New("redistest: Replica needs a running replica (ClusterOptions.Replicas ≥ 1)")
	}
	return r, nil
}

// liveReplica returns the first replica of sh that is not dead, or nil.
// Called with c.mu.
func (c *Cluster) liveReplica(sh *shard) *Server {
	for _, r := range sh.replicas {
		if !c.dead[r] {
			return r
		}
	}
	return nil
}

// Nodes returns every node, masters and replicas (a killed one included
// until it rejoins or is replaced).
func (c *Cluster) Nodes() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// FailoverShard fails over the shard that owns key: its first replica runs
// CLUSTER FAILOVER (a coordinated failover, so no acknowledged write is
// lost) and becomes the master; the old master becomes its replica. It
// returns once every node agrees and every client made by Client routes
// key to the new master. It needs Replicas ≥ 1.
func (c *Cluster) FailoverShard(ctx context.Context, key string) error {
	return c.Failover(ctx, key, FailoverPlain)
}

// Close closes the clients made by Client and stops every node.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients := append(c.clients, c.appClients...)
	c.clients, c.appClients = nil, nil
	nodes := append(slices.Clone(c.nodes), c.retired...)
	c.mu.Unlock()
	var errs []error
	for _, cc := range clients {
		errs = append(errs, cc.Close())
	}
	for _, s := range nodes {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
