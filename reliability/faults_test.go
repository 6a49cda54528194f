package reliability_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/reliability"
)

// TestFaults_singleServer runs the lock, stock and wallet workloads (8
// clients × 1,000 operations each) on one server with AOF and appendfsync
// always while every single-server fault hits it in turn, a lock holder
// pausing past its lease included, and checks every history and invariant.
func TestFaults_singleServer(t *testing.T) {
	d := reliability.NewSingle(t)
	reliability.Run(t, reliability.Scenario{
		Deploy: d,
		Seed:   reliability.Seed(t),
		Faults: []reliability.Fault{
			d.Kill9(1500 * time.Millisecond),
			d.Pause(2 * time.Second),
			d.HoldReplies(300*time.Millisecond, 2*time.Second),
			d.DropReplies(300 * time.Millisecond),
			d.Resets(300 * time.Millisecond),
			d.Partition(1500 * time.Millisecond),
			d.KillClients(),
		},
		Stall: true,
	})
}

// TestFaults_failover runs the workloads on a primary and replica, with
// writes waiting for the replica, through failovers with the old primary
// running and killed.
func TestFaults_failover(t *testing.T) {
	d := reliability.NewPair(t)
	reliability.Run(t, reliability.Scenario{
		Deploy: d,
		Seed:   reliability.Seed(t),
		Faults: []reliability.Fault{d.Failover(), d.CrashFailover(500 * time.Millisecond)},
		Quiet:  [2]time.Duration{time.Second, 2 * time.Second},
	})
}

// TestFaults_clusterShardFailover runs the workloads on a 3-master Cluster
// while the shards of their slot groups fail over in turn.
func TestFaults_clusterShardFailover(t *testing.T) {
	d := reliability.NewCluster(t)
	reliability.Run(t, reliability.Scenario{
		Deploy: d,
		Seed:   reliability.Seed(t),
		Faults: []reliability.Fault{d.ShardFailover(reliability.GroupKeys()...)},
		Quiet:  [2]time.Duration{time.Second, 2 * time.Second},
	})
}
