package stock

import (
	"context"

	"github.com/redkit-go/redkit/health"
)

// ErrRiskySettings is wrapped by Report.Err.
var ErrRiskySettings = health.ErrRiskySettings

// Check inspects the settings of every primary behind the client that decide
// what a crash or memory pressure can lose, so a service can refuse to start
// on risky ones:
//
//   - maxmemory-policy other than noeviction: Redis may evict SKU hashes,
//     markers or journals under memory pressure — stock and idempotency are
//     silently lost;
//   - appendonly no: a restart loses everything since the last snapshot,
//     including acknowledged orders;
//   - appendfsync other than always: a crash (power loss, kill -9 of the
//     host) can lose up to about a second of acknowledged orders;
//   - no-appendfsync-on-rewrite yes: the same crash while an AOF rewrite or
//     RDB save runs can lose up to ~30 s of them, even with appendfsync
//     always;
//   - stop-writes-on-bgsave-error no (RDB only): orders are still
//     acknowledged while snapshots fail.
//
// health.Check lists what each finding rates.
//
// A server that does not answer CONFIG GET gives findings of unknown
// severity, not an error.
func (inv *Inventory) Check(ctx context.Context) (health.Report, error) {
	return health.Check(ctx, inv.rdb)
}
