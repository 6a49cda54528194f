package wallet

import (
	"context"
	"time"

	"github.com/redkit-go/redkit/internal/script"
)

// TransferSteps runs only the first steps (1..5) of a transfer across slot
// groups, as a process that crashes after that step would.
func (l *Ledger) TransferSteps(ctx context.Context, t Transfer, steps int) (Result, error) {
	return l.crossTransfer(ctx, t, nil, steps)
}

// SetWindow sets the idempotency window without its 1-minute floor, so a
// test can let a window pass: no fault makes server time run faster.
func SetWindow(l *Ledger, d time.Duration) { l.cfg.window = d }

// SetStaleTransferAge sets how long a transfer across groups stays in
// flight before a call on its source finishes it, and how often a Ledger
// looks, without their production values: no fault makes a crashed
// caller's transfer age faster. Call it before the Ledger is used.
func SetStaleTransferAge(l *Ledger, age, every time.Duration) {
	l.lazy.age, l.lazy.every = age, every
}

// ScriptSource is the full source of the script named as its file in
// scripts/ ("post", "xcredit", ...), for calling it with arguments the Go
// side never sends.
func ScriptSource(name string) string {
	return map[string]*script.Script{
		"open": openScript, "post": postScript, "transfer": transferScript, "close": closeScript,
		"checkpoint": checkpointScript, "hold": holdScript, "resolve": resolveScript, "sweep": sweepScript,
		"xbegin": xbeginScript, "xcredit": xcreditScript, "xfinish": xfinishScript, "xdone": xdoneScript,
		"head": headScript, "xstale": xstaleScript,
	}[name].Source()
}

// SetDefaultRecovery sets the background recovery interval of the Ledgers
// made after it without its 1-second floor, until the test ends: no fault
// makes a minute pass faster.
func SetDefaultRecovery(t interface{ Cleanup(func()) }, d time.Duration) {
	old := defaultRecovery.Swap(int64(d))
	t.Cleanup(func() { defaultRecovery.Store(old) })
}

// DisableDefaultRecovery turns the background recovery off for Ledgers made
// without WithRecovery, for this package's tests: most of them make a
// Ledger and leave it to the end of the test binary, and goleak would count
// its worker. The tests of the default turn it on again
// (SetDefaultRecovery).
func DisableDefaultRecovery() { defaultRecovery.Store(0) }
