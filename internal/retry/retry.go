// Package retry runs an idempotent Redis write until it gets a definite
// answer, and says so when it cannot.
//
// A failed call falls in one of three classes:
//
//   - Retryable: the command certainly did not run (connection refused, a dial
//     failure, go-redis pool timeout, LOADING, MASTERDOWN, TRYAGAIN,
//     CLUSTERDOWN, READONLY) and may succeed later;
//   - Ambiguous: the command may have run (read timeout, EOF, connection
//     reset, broken pipe, context ended while the call was in flight);
//   - anything else is an answer (a script error, a business refusal) and is
//     returned unchanged.
//
// Do retries the first two classes with jittered, bounded backoff and never
// sleeps past the context's deadline. Retrying an ambiguous failure is safe
// only because every redkit write is idempotent by its operation ID and is
// re-sent with identical arguments. When the attempts run out and some
// attempt was ambiguous, Do returns errors.Join(ErrUnknownOutcome, cause), plus
// ctx.Err() when the context ended: the caller resolves it by calling again
// with the same operation ID.
package retry

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnknownOutcome means an operation may or may not have been applied.
// Calling again with the same operation ID gives the definite answer.
var ErrUnknownOutcome = errors.New("redkit: outcome unknown; call again with the same operation ID")

// Policy bounds the retries of Do.
type Policy struct {
	Attempts   int           // total calls, first one included; < 1 means 1
	MinBackoff time.Duration // wait before the second call; doubles per attempt
	MaxBackoff time.Duration // cap on one wait
}

// DefaultPolicy is 3 attempts with 10ms..200ms jittered backoff.
func DefaultPolicy() Policy {
	return Policy{Attempts: 3, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

// Retryable reports whether err means the command certainly did not run and
// may succeed if sent again later.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true // the connection never existed, so nothing was sent
	}
	return errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, redis.ErrPoolTimeout) ||
		redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) ||
		redis.IsTryAgainError(err) ||
		redis.IsClusterDownError(err) ||
		redis.IsReadOnlyError(err)
}

// Ambiguous reports whether err means the command may have run: the request
// may have reached the server but no reply came back.
func Ambiguous(err error) bool {
	if err == nil || Retryable(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Do calls fn until it succeeds, returns an error that is neither Ambiguous
// nor Retryable, p.Attempts calls were made, or ctx ends. attempt is 1 for
// the first call. fn must be idempotent: send identical arguments each time.
//
// Results:
//   - nil when a call succeeded;
//   - the error unchanged when it is an answer, or when every failure was
//     Retryable (nothing ran), joined with ctx.Err() if ctx ended;
//   - errors.Join(ErrUnknownOutcome, last error[, ctx.Err()]) when some call
//     was Ambiguous and no later call gave an answer.
//
// Do never sleeps past ctx's deadline: when the next wait would end after
// it, Do gives up at once instead.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context, attempt int) error) error {
	if err := ctx.Err(); err != nil {
		return err // nothing was sent
	}
	unknown := false
	for attempt := 1; ; attempt++ {
		err := fn(ctx, attempt)
		if err == nil || !Ambiguous(err) && !Retryable(err) {
			return err
		}
		unknown = unknown || Ambiguous(err)
		if attempt >= p.Attempts || !sleep(ctx, backoff(p, attempt)) {
			return giveUp(ctx, unknown, err)
		}
	}
}

func giveUp(ctx context.Context, unknown bool, cause error) error {
	errs := []error{cause}
	if unknown {
		errs = []error{ErrUnknownOutcome, cause}
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(cause, ctxErr) {
		errs = append(errs, ctxErr)
	}
	if len(errs) == 1 {
		return cause
	}
	return errors.Join(errs...)
}

// backoff is the wait after the given attempt: MinBackoff doubled per
// attempt, capped at MaxBackoff, then jittered down to half at random so
// clients that failed together do not retry together.
func backoff(p Policy, attempt int) time.Duration {
	d := p.MinBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d and reports whether ctx still allows another attempt.
func sleep(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Nonce returns 16 random hex characters. A public call makes one nonce and
// passes it, unchanged, to every attempt of its script: a script that finds
// its operation marker carrying the same nonce knows it is looking at its own
// earlier attempt, not at an earlier call, and reports "not replayed".
func Nonce() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return hex.EncodeToString(b[:])
}
