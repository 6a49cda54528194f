package reliability_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/reliability"
)

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

func TestFaults_failover(t *testing.T) {
	d := reliability.NewPair(t)
	reliability.Run(t, reliability.Scenario{
		Deploy: d,
		Seed:   reliability.Seed(t),
		Faults: []reliability.Fault{d.Failover(), d.CrashFailover(500 * time.Millisecond)},
		Quiet:  [2]time.Duration{time.Second, 2 * time.Second},
	})
}

func TestFaults_clusterShardFailover(t *testing.T) {
	d := reliability.NewCluster(t)
	reliability.Run(t, reliability.Scenario{
		Deploy: d,
		Seed:   reliability.Seed(t),
		Faults: []reliability.Fault{d.ShardFailover(reliability.GroupKeys()...)},
		Quiet:  [2]time.Duration{time.Second, 2 * time.Second},
	})
}
