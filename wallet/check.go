package wallet

import (
	"context"

	"github.com/redkit-go/redkit/health"
)

// ErrRiskySettings is wrapped by Report.Err (the same error in every
// module).
var ErrRiskySettings = health.ErrRiskySettings

// Check reports server settings that can lose acknowledged transactions,
// on every primary the Ledger writes to. What each one costs a ledger:
//
//   - maxmemory-policy other than noeviction (critical): under memory
//     pressure Redis may evict an account, its journal or a transaction
//     marker. An evicted marker lets a retried transaction apply twice; an
//     evicted account loses its balance.
//   - appendonly no (critical without RDB snapshots, else warning): a
//     restart loses every transaction since the last snapshot, although
//     callers were told they succeeded.
//   - appendfsync everysec (warning): a crash of the server or its machine
//     loses up to about a second of acknowledged transactions; "no"
//     (critical) up to the operating system's flush interval (~30 s).
//     appendfsync always loses none (each script's writes reach disk
//     before the reply), at the cost of one fsync per write, unless
//     no-appendfsync-on-rewrite is yes (warning): Redis then skips the
//     fsync while an AOF rewrite or RDB save runs, and a crash meanwhile
//     loses up to ~30 s of acknowledged transactions.
//   - stop-writes-on-bgsave-error no (warning, with RDB snapshots only):
//     transactions are still acknowledged while snapshots fail.
//
// A replica does not help with any of these unless writes wait for it
// (replication is asynchronous): a failover can drop the last writes the
// old primary acknowledged.
//
// Use rep.Err(health.Warning) at start-up to refuse to run on risky
// settings. The error is non-nil only when the nodes cannot be listed.
func (l *Ledger) Check(ctx context.Context) (health.Report, error) {
	return health.Check(ctx, l.rdb)
}
