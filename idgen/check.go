package idgen

import (
	"context"

	"github.com/redkit-go/redkit/health"
)

// ErrRiskySettings is wrapped by Report.Err (the same error in every
// module).
var ErrRiskySettings = health.ErrRiskySettings

// Check reports server settings that can make the counter go backwards and
// so let two processes be handed the same range: a restart without AOF
// (appendonly no, appendfsync other than always) or an eviction policy other
// than noeviction. See the package documentation for what happens then.
func (s *Sequence) Check(ctx context.Context) (health.Report, error) {
	return health.Check(ctx, s.c.rdb)
}

// Check reports risky server settings; see Sequence.Check.
func (s *Segment) Check(ctx context.Context) (health.Report, error) {
	return health.Check(ctx, s.c.rdb)
}
