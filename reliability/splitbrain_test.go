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
	seed := reliability.Seed(t)
	var rows []reliability.Row
	for _, noAck := range []bool{false, true} {
		d := reliability.NewPair(t)
		d.NoAck = noAck
		name := "split brain, writes wait for the replica"
		if noAck {
			name = "split brain, no replica acknowledgement"
		}
		rows = append(rows, reliability.Run(t, reliability.Scenario{
			Name:      name,
			Deploy:    d,
			Seed:      seed,
			Faults:    []reliability.Fault{d.SplitBrain(time.Second)},
			Ops:       600,
			MaxFaults: 1,
			Quiet:     [2]time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
			Measure:   true,
		})...)
	}
	t.Logf("split brain (measured, not gated):\n%s", reliability.FormatTable(rows))
}
