package reliability

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

	"github.com/redkit-go/redkit/redistest"
)

// Client timeouts of the workloads: short, so that a paused server or a
// held-back reply turns into a timeout (an unknown outcome) quickly.
const (
	ReadTimeout = 300 * time.Millisecond
	// AckTimeout is how long a write waits for its replica (WAIT) where the
	// deployment has one; it must be shorter than ReadTimeout.
	AckTimeout = 150 * time.Millisecond
)

// Deployment is a Redis deployment the workloads run against.
type Deployment interface {
	// Name says what it is ("single", "pair", "cluster").
	Name() string
	// Client returns a client as a service would have one: through the path
	// the faults act on. It is closed when tb ends.
	Client(tb testing.TB) redis.UniversalClient
	// Admin returns a client for setup and verification that reaches the
	// current primaries directly. It is closed when tb ends.
	Admin(tb testing.TB) redis.UniversalClient
	// ReplicaAck reports whether writes should wait for a replica (the
	// deployment fails over to replicas that may lag).
	ReplicaAck() bool
}

func clientOptions(o *redis.Options) {
	o.ReadTimeout, o.WriteTimeout, o.DialTimeout = ReadTimeout, ReadTimeout, ReadTimeout
	o.PoolTimeout = 2 * time.Second
}

// Single is one redis-server with AOF and appendfsync always, reached
// through a fault proxy.
type Single struct {
	Server *redistest.Server
	Proxy  *redistest.Proxy
}

// NewSingle starts a Single for tb.
func NewSingle(tb testing.TB) *Single {
	tb.Helper()
	s := redistest.New(tb, redistest.Options{AOF: true, AppendFsync: "always"})
	return &Single{Server: s, Proxy: redistest.NewProxy(tb, s.Addr())}
}

func (d *Single) Name() string     { return "single" }
func (d *Single) ReplicaAck() bool { return false }

func (d *Single) Client(tb testing.TB) redis.UniversalClient {
	o := &redis.Options{Addr: d.Proxy.Addr()}
	clientOptions(o)
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func (d *Single) Admin(tb testing.TB) redis.UniversalClient {
	return d.Server.Client()
}

// window is a durable fault that start begins and, hold later, end ends.
func window(name string, hold time.Duration, start func() error, end func(context.Context) error) Fault {
	return Fault{
		Name: name, Durable: true, Hold: hold,
		Start: func(context.Context) (func(context.Context) error, error) {
			if err := start(); err != nil {
				return nil, err
			}
			return end, nil
		},
	}
}

// Kill9 is kill -9 of the server and a restart on the same AOF.
func (d *Single) Kill9(down time.Duration) Fault {
	return window("kill -9 + restart (AOF always)", down, d.Server.Kill, d.Server.Restart)
}

// Pause is SIGSTOP of the server for d, then SIGCONT.
func (d *Single) Pause(hold time.Duration) Fault {
	return window("SIGSTOP/SIGCONT of Redis", hold, d.Server.Pause, func(context.Context) error { return d.Server.Resume() })
}

// HoldReplies holds every reply back for late (past the client read
// timeout) during a window of hold: the commands run, the clients time out.
func (d *Single) HoldReplies(hold, late time.Duration) Fault {
	return window("replies held past the read timeout", hold,
		func() error { d.Proxy.HoldReplies(late); return nil },
		func(context.Context) error { d.Proxy.HoldReplies(0); return nil })
}

// DropReplies discards every reply during a window of hold.
func (d *Single) DropReplies(hold time.Duration) Fault {
	return window("replies dropped", hold,
		func() error { d.Proxy.DropReplies(true); return nil },
		func(context.Context) error { d.Proxy.DropReplies(false); return nil })
}

// Resets aborts every connection with a TCP RST, every 20ms for hold.
func (d *Single) Resets(hold time.Duration) Fault {
	return Fault{
		Name: "connection resets", Durable: true, Hold: hold,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				t := time.NewTicker(20 * time.Millisecond)
				defer t.Stop()
				for {
					d.Proxy.ResetConnections()
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			})
			return func(context.Context) error { close(stop); wg.Wait(); return nil }, nil
		},
	}
}

// KillClients has the server close every client connection.
func (d *Single) KillClients() Fault {
	return Fault{
		Name: "server closes client connections", Durable: true,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, d.Server.KillClients(ctx)
		},
	}
}

// Partition cuts the network between clients and server for hold.
func (d *Single) Partition(hold time.Duration) Fault {
	return window("network partition", hold,
		func() error { return d.Proxy.Cut(true) },
		func(context.Context) error { return d.Proxy.Cut(false) })
}

// Pair is a primary and a replica whose clients always dial the current
// primary, as clients behind Sentinel or a DNS name would.
type Pair struct {
	Pair *redistest.Pair
	// NoAck makes writes not wait for the replica (ReplicaAck false).
	NoAck bool

	primary atomic.Pointer[string]
	// split, while not nil, sends the clients made with an odd index to
	// this address instead (a split brain).
	split   atomic.Pointer[string]
	clients atomic.Int64
}

// NewPair starts a Pair for tb.
func NewPair(tb testing.TB) *Pair {
	tb.Helper()
	d := &Pair{Pair: redistest.NewPair(tb, redistest.Options{})}
	d.retarget()
	return d
}

// Sync waits until the replica has every write so far.
func (d *Pair) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Pair.Sync(ctx); err != nil {
		info, _ := d.Pair.Primary.Client().Info(context.WithoutCancel(ctx), "replication").Result()
		rinfo, _ := d.Pair.Replica.Client().Info(context.WithoutCancel(ctx), "replication").Result()
		return fmt.Errorf("replica not in sync: %w\nprimary %s:\n%s\nreplica %s:\n%s", err, d.Pair.Primary.Addr(), info, d.Pair.Replica.Addr(), rinfo)
	}
	return nil
}

func (d *Pair) retarget() {
	a := d.Pair.Primary.Addr()
	d.primary.Store(&a)
}

func (d *Pair) Name() string     { return "pair" }
func (d *Pair) ReplicaAck() bool { return !d.NoAck }

// Client returns a client that dials the current primary; clients with an
// odd index follow the other side while a split brain lasts.
func (d *Pair) Client(tb testing.TB) redis.UniversalClient {
	odd := d.clients.Add(1)%2 == 0
	return d.dialing(tb, func() string {
		if s := d.split.Load(); odd && s != nil {
			return *s
		}
		return *d.primary.Load()
	})
}

func (d *Pair) Admin(tb testing.TB) redis.UniversalClient {
	return d.dialing(tb, func() string { return *d.primary.Load() })
}

func (d *Pair) dialing(tb testing.TB, addr func() string) *redis.Client {
	o := &redis.Options{Addr: "primary", Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, network, addr())
	}}
	clientOptions(o)
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover promotes the replica while the primary still runs, then makes
// the old primary its replica (redistest.Pair.Failover). Writes that waited
// for the replica survive.
func (d *Pair) Failover() Fault {
	return Fault{
		Name: "failover (primary+replica)", Durable: true, Blur: true,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			old := d.Pair.Primary
			if err := d.Pair.Failover(ctx); err != nil {
				return nil, err
			}
			d.retarget()
			// Connections to the demoted node would keep reading from it.
			return func(context.Context) error { return old.KillClients(ctx) }, nil
		},
	}
}

// CrashFailover kills the primary with SIGKILL, promotes the replica, and
// brings the old primary back as the new primary's replica after down.
func (d *Pair) CrashFailover(down time.Duration) Fault {
	return Fault{
		Name: "primary killed, replica promoted", Durable: true, Blur: true, Hold: down,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			old := d.Pair.Primary
			if err := old.Kill(); err != nil {
				return nil, err
			}
			if err := d.Pair.Failover(ctx); err != nil {
				return nil, err
			}
			d.retarget()
			return old.Restart, nil
		},
	}
}

// SplitBrain promotes the replica while the primary keeps serving: half of
// the clients (those made with an even index) stay with the old primary,
// the others move to the promoted replica, for hold. Then the old primary
// is made a replica of the new one, dropping what it accepted meanwhile.
// Nothing in redkit promises to survive this; runs that use it measure.
func (d *Pair) SplitBrain(hold time.Duration) Fault {
	return Fault{
		Name: "split brain (replica promoted, old primary still serving)", Hold: hold, Blur: true,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			old, next := d.Pair.Primary, d.Pair.Replica
			admin := next.Client()
			if err := admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
				return nil, err
			}
			a := next.Addr()
			d.split.Store(&a)
			if err := old.KillClients(ctx); err != nil { // the clients that move reconnect
				return nil, err
			}
			return func(ctx context.Context) error {
				host, port, _ := net.SplitHostPort(next.Addr())
				if err := old.Client().Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
					return err
				}
				d.Pair.Primary, d.Pair.Replica = next, old
				d.retarget()
				d.split.Store(nil)
				if err := old.KillClients(ctx); err != nil {
					return err
				}
				return d.Pair.Sync(ctx)
			}, nil
		},
	}
}

// Cluster is a 3-master Redis Cluster with one replica per master.
type Cluster struct {
	Cluster *redistest.Cluster
}

// NewCluster starts a Cluster for tb.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return &Cluster{Cluster: redistest.NewCluster(tb, redistest.ClusterOptions{Masters: 3, Replicas: 1})}
}

func (d *Cluster) Name() string     { return "cluster" }
func (d *Cluster) ReplicaAck() bool { return false }

func (d *Cluster) Client(tb testing.TB) redis.UniversalClient {
	return d.Cluster.Client(func(o *redis.ClusterOptions) {
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = ReadTimeout, ReadTimeout, ReadTimeout
		o.PoolTimeout = 2 * time.Second
	})
}

func (d *Cluster) Admin(tb testing.TB) redis.UniversalClient { return d.Cluster.Client() }

// ShardFailover fails over, in turn, the shard of each key (CLUSTER
// FAILOVER on its replica: coordinated, losing no acknowledged write).
func (d *Cluster) ShardFailover(keys ...string) Fault {
	var n atomic.Int64
	return Fault{
		Name: "cluster shard failover", Durable: true,
		Start: func(ctx context.Context) (func(context.Context) error, error) {
			if len(keys) == 0 {
				return nil, errors.New("reliability: ShardFailover needs a key")
			}
			key := keys[int(n.Add(1)-1)%len(keys)]
			return func(context.Context) error { return nil }, d.Cluster.FailoverShard(ctx, key)
		},
	}
}
