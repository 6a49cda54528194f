package wallet

import (
	"context"
	"time"
)

// TransferSteps runs only the first steps (1..5) of a transfer across slot
// groups, as a process that crashes after that step would.
func (l *Ledger) TransferSteps(ctx context.Context, t Transfer, steps int) (Result, error) {
	return l.crossTransfer(ctx, t, nil, steps)
}

// SetWindow sets the idempotency window without its 1-minute floor, so a
// test can let a window pass: no fault makes server time run faster.
func SetWindow(l *Ledger, d time.Duration) { l.cfg.window = d }
