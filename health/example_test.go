package health_test

import (
	"errors"
	"fmt"

	"github.com/redkit-go/redkit/health"
)

// A service refuses to start on settings that can lose acknowledged
// writes, and logs the rest.
func ExampleReport_Err() {
	rep := health.Report{Findings: []health.Finding{
		{Node: "10.0.0.7:6379", Setting: "maxmemory-policy", Value: "noeviction", Severity: health.OK,
			Risk: "keys are never evicted"},
		{Node: "10.0.0.7:6379", Setting: "appendfsync", Value: "everysec", Severity: health.Warning,
			Risk: "a crash can lose up to ~1s of acknowledged writes"},
	}}
	fmt.Println(rep.Worst())
	fmt.Println(rep.Err(health.Critical))
	err := rep.Err(health.Warning)
	fmt.Println(errors.Is(err, health.ErrRiskySettings))
	// Output:
	// warning
	// <nil>
	// true
}
