package reliability_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/reliability"
)

// IDs stay unique across generators sharing a name while Redis is killed
// (AOF always) and paused, and Sequence values stay in global order.
func TestIDs_uniqueUnderRestartsAndPauses(t *testing.T) {
	t.Parallel() // the generators are paced: mostly idle
	d := reliability.NewSingle(t)
	seed := reliability.Seed(t)
	faults := []reliability.Fault{d.Kill9(500 * time.Millisecond), d.Pause(1500 * time.Millisecond), d.Resets(200 * time.Millisecond)}
	for _, run := range []reliability.IDRun{
		{Kind: reliability.IDSegment, PerGenerator: 100_000},
		{Kind: reliability.IDSnowflake, PerGenerator: 100_000},
		{Kind: reliability.IDSequence, PerGenerator: 2000},
	} {
		run.Deploy, run.Seed, run.Faults, run.Duration = d, seed, faults, 4*time.Second
		reliability.RunIDs(t, run)
	}
}

// Segments and Sequences on a primary with a replica wait for the replica
// before they use a range, so failovers hand no range out twice.
func TestIDs_uniqueUnderFailover(t *testing.T) {
	t.Parallel()
	d := reliability.NewPair(t)
	seed := reliability.Seed(t)
	faults := []reliability.Fault{d.Failover(), d.CrashFailover(500 * time.Millisecond)}
	for _, run := range []reliability.IDRun{
		{Kind: reliability.IDSegment, PerGenerator: 100_000},
		{Kind: reliability.IDSequence, PerGenerator: 2000},
	} {
		run.Deploy, run.Seed, run.Faults, run.Duration = d, seed, faults, 4*time.Second
		run.Quiet = [2]time.Duration{500 * time.Millisecond, time.Second}
		reliability.RunIDs(t, run)
	}
}
