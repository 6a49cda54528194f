package wallet

import "context"

// TransferSteps runs only the first steps (1..5) of a transfer across slot
// groups, as a process that crashes after that step would.
func (l *Ledger) TransferSteps(ctx context.Context, t Transfer, steps int) (Result, error) {
	return l.crossTransfer(ctx, t, nil, steps)
}
