package lock

import (
	"context"

	"github.com/redkit-go/redkit/health"
)

// ErrRiskySettings is wrapped by Report.Err (the same error in every
// module).
var ErrRiskySettings = health.ErrRiskySettings

// Check inspects the settings of every primary behind the Client that decide
// what a crash or memory pressure can lose, so a service can refuse to start
// on risky ones: with an eviction policy other than noeviction Redis may
// evict a held lock (another owner then takes it) or a fence counter (tokens
// start again below those already handed out); without AOF, or with
// appendfsync other than always, a restart or crash can lose both the same
// way. A server that does not answer CONFIG GET gives findings of unknown
// severity, not an error.
func (c *Client) Check(ctx context.Context) (health.Report, error) { return health.Check(ctx, c.rdb) }

// Check runs Client.Check on every master of the Redlock and returns their
// findings together.
func (rl *Redlock) Check(ctx context.Context) (health.Report, error) {
	var all health.Report
	for _, p := range rl.peers {
		rep, err := p.Check(ctx)
		if err != nil {
			return health.Report{}, err
		}
		all.Findings = append(all.Findings, rep.Findings...)
	}
	return all, nil
}
