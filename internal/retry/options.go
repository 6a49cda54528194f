package retry

import (
	"fmt"
	"time"

	"github.com/redkit-go/redkit/internal/valid"
)

// Bounds of the retry options every module takes (WithRetry,
// WithClusterBudget).
const (
	MaxAttempts      = 100
	MaxBackoff       = time.Minute
	MaxClusterBudget = time.Minute
)

// SetAttempts is what every module's WithRetry(attempts, minBackoff,
// maxBackoff) does to its policy: it sets the three and keeps the rest.
func (p *Policy) SetAttempts(attempts int, minBackoff, maxBackoff time.Duration) {
	p.Attempts, p.MinBackoff, p.MaxBackoff = attempts, minBackoff, maxBackoff
}

// SetClusterBudget is what every module's WithClusterBudget(d) does: d > 0
// is the budget, 0 turns it off.
func (p *Policy) SetClusterBudget(d time.Duration) {
	if d == 0 {
		d = -1
	}
	p.ClusterBudget = d
}

// Validate reports an option outside the bounds, as an error wrapping
// valid.ErrInvalid that names it.
func (p Policy) Validate() error {
	switch {
	case p.Attempts < 1 || p.Attempts > MaxAttempts:
		return fmt.Errorf("%w: retry attempts %d, want 1..%d", valid.ErrInvalid, p.Attempts, MaxAttempts)
	case p.MinBackoff < 0 || p.MaxBackoff < p.MinBackoff || p.MaxBackoff > MaxBackoff:
		return fmt.Errorf("%w: retry backoff %v..%v, want 0 <= min <= max <= %v", valid.ErrInvalid,
			p.MinBackoff, p.MaxBackoff, MaxBackoff)
	case p.ClusterBudget < -1 || p.ClusterBudget > MaxClusterBudget:
		return fmt.Errorf("%w: cluster budget %v, want 0..%v", valid.ErrInvalid, p.ClusterBudget, MaxClusterBudget)
	}
	return nil
}
