package reliability_test

import (
	"testing"
	"time"

	"github.com/redkit-go/redkit/reliability"
)

// TestSplitBrain_measured promotes the replica of a pair while the old
// primary keeps serving half of the clients, then demotes the old primary,
// and reports what was lost, with and without replica acknowledgement.
// Nothing here is gated: no redkit module promises to survive a split brain.
func TestSplitBrain_measured(t *testing.T) {
	rows := splitBrain(t, reliability.Scenario{
		Seed:      reliability.Seed(t),
		Ops:       600,
		MaxFaults: 1,
		Quiet:     [2]time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
	})
	t.Logf("split brain (measured, not gated):\n%s", reliability.FormatTable(rows))
}

// splitBrain runs sc, measured, under a split brain of a new pair: first
// with writes waiting for the replica, then without replica
// acknowledgement.
func splitBrain(t *testing.T, sc reliability.Scenario) []reliability.Row {
	var rows []reliability.Row
	for _, noAck := range []bool{false, true} {
		d := reliability.NewPair(t)
		d.NoAck = noAck
		sc.Name = "split brain, writes wait for the replica"
		if noAck {
			sc.Name = "split brain, no replica acknowledgement"
		}
		sc.Deploy, sc.Faults, sc.Measure = d, []reliability.Fault{d.SplitBrain(time.Second)}, true
		rows = append(rows, reliability.Run(t, sc)...)
	}
	return rows
}
