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
			d.Kill9(300 * time.Millisecond),
			d.Pause(700 * time.Millisecond),
			d.HoldReplies(200*time.Millisecond, 800*time.Millisecond),
			d.Resets(200 * time.Millisecond),
		},
		Stall: true,
	})
}
