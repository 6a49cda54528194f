package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/internal/retry"
)

// serverErr is an error reply as go-redis's parser returns it.
type serverErr string

func (e serverErr) Error() string { return string(e) }
func (serverErr) RedisError()     {}

// outcome is one attempt's end as the model sees it.
type outcome int

const (
	success   outcome = iota
	answer            // a decision of the script
	notRun            // this send certainly did not run
	ambiguous         // this send may have run
	ctxEnded          // the caller's context ended while the attempt was in flight
)

// errorsOf holds real errors of each class, as go-redis returns them.
var errorsOf = map[outcome][]error{
	answer: {errAnswer, serverErr("ERR wallet: invalid: amount"), fmt.Errorf("wrapped: %w", errAnswer)},
	notRun: {
		&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}},
		&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}},
		redis.ErrPoolTimeout,
		serverErr("LOADING Redis is loading the dataset in memory"),
		serverErr("READONLY You can't write against a read only replica."),
		serverErr("MASTERDOWN Link with MASTER is down"),
		serverErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		serverErr("CLUSTERDOWN The cluster is down"),
		serverErr("MOVED 3999 127.0.0.1:6381"),
		serverErr("ASK 3999 127.0.0.1:6381"),
		serverErr("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."),
	},
	ambiguous: {
		&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}},
		io.EOF,
		fmt.Errorf("evalsha: %w", io.ErrUnexpectedEOF),
		&net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}},
		&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE},
	},
}

// TestDo_model draws sequences of attempt outcomes and checks Do's result
// against the contract: unknown exactly when some attempt may have run (it
// failed ambiguous, or not-run on a client that re-sends) and no later
// attempt answered; otherwise the last error unchanged, or nil.
func TestDo_model(t *testing.T) {
	once := sendsOnce(t, retry.Policy{})
	rapid.Check(t, func(rt *rapid.T) {
		resends := rapid.Bool().Draw(rt, "go-redis re-sends")
		attempts := rapid.IntRange(1, 6).Draw(rt, "attempts")
		seq := rapid.SliceOfN(rapid.SampledFrom([]outcome{success, answer, notRun, ambiguous, ctxEnded}),
			1, 8).Draw(rt, "outcomes")
		errs := make([]error, len(seq))
		for i, o := range seq {
			if list := errorsOf[o]; len(list) > 0 {
				errs[i] = rapid.SampledFrom(list).Draw(rt, fmt.Sprintf("error %d", i))
			}
		}

		p := retry.Policy{Attempts: attempts}
		if !resends {
			p = once
			p.Attempts = attempts
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		err := retry.Do(ctx, p, func(ctx context.Context, attempt int) error {
			calls++
			if attempt > len(seq) {
				return nil
			}
			if seq[attempt-1] == ctxEnded {
				cancel()
				return ctx.Err() // as go-redis reports a call cut short by ctx
			}
			return errs[attempt-1]
		})

		// The model.
		mayHaveRun, stopped, last, lastOutcome := false, 0, error(nil), success
		for i := 0; ; i++ {
			o, e := success, error(nil)
			if i < len(seq) {
				o, e = seq[i], errs[i]
			}
			if o == ctxEnded {
				e = context.Canceled
			}
			stopped, last, lastOutcome = i+1, e, o
			if o == success || o == answer {
				break
			}
			mayHaveRun = mayHaveRun || o == ambiguous || o == ctxEnded || o == notRun && resends
			if i+1 >= attempts || o == ctxEnded {
				break
			}
		}

		if calls != stopped {
			rt.Fatalf("calls: got %d, want %d", calls, stopped)
		}
		switch {
		case lastOutcome == success:
			if err != nil {
				rt.Fatalf("want nil, got %v", err)
			}
		case lastOutcome == answer:
			if err != last {
				rt.Fatalf("an answer is returned unchanged: got %v, want %v", err, last)
			}
		default:
			if got := errors.Is(err, retry.ErrUnknownOutcome); got != mayHaveRun {
				rt.Fatalf("unknown: got %v (%v), want %v", got, err, mayHaveRun)
			}
			if !errors.Is(err, last) {
				rt.Fatalf("cause %v not in %v", last, err)
			}
			if !mayHaveRun && lastOutcome == notRun && err != last {
				rt.Fatalf("nothing ran: want the bare error %v, got %v", last, err)
			}
		}
	})
}
