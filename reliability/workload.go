package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"
)

// Tally is what one workload counted in one run.
type Tally struct {
	Ops     int // operations issued (resubmissions of one operation count once)
	Acked   int // writes acknowledged to the client
	Unknown int // operations whose outcome the client never learned
	// Retried counts operations that needed more than one call to get an
	// answer (the first call failed: timeout, reset, server down).
	Retried int
	// Lost counts acknowledged writes missing after recovery.
	Lost int
	// Unacked counts writes that were applied but not acknowledged by the
	// replica they waited for (ErrReplicaAck, WAIT short): reported, and not
	// counted as acknowledged.
	Unacked int
	// Mutex counts mutual-exclusion violations: fenced writes accepted from
	// two leases that overlapped (a lost update of the protected counter,
	// a token handed out twice, tokens accepted out of order).
	Mutex int
	// Oversell counts units sold beyond a SKU's supply.
	Oversell int
	// Double counts operation IDs whose effect appears more than once.
	Double int
	// Problems lists invariant failures that are bugs whatever the fault:
	// a journal that does not match the state, a resubmission answered
	// differently, a refused operation that was applied.
	Problems []string
	// Details describes the lost writes, violations, oversold units and
	// double charges counted above (the first few of each).
	Details []string
}

func (t *Tally) problem(format string, args ...any) {
	if len(t.Problems) < 50 {
		t.Problems = append(t.Problems, fmt.Sprintf(format, args...))
	}
}

func (t *Tally) detail(format string, args ...any) {
	if len(t.Details) < 50 {
		t.Details = append(t.Details, fmt.Sprintf(format, args...))
	}
}

// workload is one module's part of a run.
type workload interface {
	name() string
	setup(ctx context.Context) error
	// client runs operations as client i while more(done) says so.
	client(ctx context.Context, i int, rng *rand.Rand, more func(done int) bool)
	// verify checks the invariants after recovery; it may issue calls to
	// resolve outcomes.
	verify(ctx context.Context) Tally
	history() *History
	model() porcupine.Model
	progress() *Progress
	close()
}

// SettleBudget bounds how long a client keeps resubmitting one operation
// to learn its outcome before it records the outcome as unknown.
var SettleBudget = 8 * time.Second

// settle calls op until it returns an answer (answer(err) is true), ctx
// ends or the budget runs out; it returns whether the last error is an
// answer, how many calls it made, and that error. Every call must carry the
// same operation ID.
func settle(ctx context.Context, op func() error, answer func(error) bool) (known bool, calls int, err error) {
	deadline := time.Now().Add(SettleBudget)
	for n := 1; ; n++ {
		err := op()
		if answer(err) {
			return true, n, err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false, n, err
		}
		t := time.NewTimer(time.Duration(10+rand.IntN(30)) * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
