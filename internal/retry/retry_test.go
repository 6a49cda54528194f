package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/redistest"
)

var (
	errAnswer  = errors.New("stock: sold out")
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	fast       = retry.Policy{Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
)

// script returns the errors in order, then nil; it counts its calls.
func script(calls *int, errs ...error) func(context.Context, int) error {
	return func(_ context.Context, attempt int) error {
		*calls++
		if attempt != *calls {
			panic("attempt numbers must count calls from 1")
		}
		if attempt <= len(errs) {
			return errs[attempt-1]
		}
		return nil
	}
}

// sendsOnce returns p for a client that sends each command at most once
// per call (go-redis MaxRetries -1).
func sendsOnce(t *testing.T, p retry.Policy) retry.Policy {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return p.For(rdb)
}

func TestDo_outcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		errs      []error
		calls     int
		unknown   bool // on a client that sends once
		resends   bool // on a client that re-sends (go-redis defaults)
		wantCause error
	}{
		{"first call succeeds", nil, 1, false, false, nil},
		{"success after ambiguous", []error{io.EOF, io.EOF}, 3, false, false, nil},
		{"answer returned unchanged", []error{errAnswer}, 1, false, false, errAnswer},
		{"answer after ambiguous is definite", []error{io.EOF, errAnswer}, 2, false, false, errAnswer},
		{"answer after not-run is definite", []error{errRefused, errAnswer}, 2, false, false, errAnswer},
		{"all ambiguous", []error{io.EOF, io.EOF, io.ErrUnexpectedEOF}, 3, true, true, io.ErrUnexpectedEOF},
		{"all not-run", []error{errRefused, errRefused, errRefused}, 3, false, true, syscall.ECONNREFUSED},
		{"ambiguous then not-run", []error{io.EOF, errRefused, errRefused}, 3, true, true, syscall.ECONNREFUSED},
	} {
		for _, resends := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/resends=%v", tc.name, resends), func(t *testing.T) {
				p, unknown := sendsOnce(t, fast), tc.unknown
				if resends {
					p, unknown = fast, tc.resends
				}
				calls := 0
				err := retry.Do(t.Context(), p, script(&calls, tc.errs...))
				require.Equal(t, tc.calls, calls)
				if tc.wantCause == nil {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, tc.wantCause)
				require.Equal(t, unknown, errors.Is(err, retry.ErrUnknownOutcome), "%v", err)
				if !unknown && tc.calls == len(tc.errs) {
					require.Equal(t, tc.errs[len(tc.errs)-1], err, "returned unchanged")
				}
			})
		}
	}
}

func TestResends(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  interface{ Close() error }
		want bool
	}{
		{"client default", redis.NewClient(&redis.Options{}), true},
		{"client MaxRetries -1", redis.NewClient(&redis.Options{MaxRetries: -1}), false},
		{"client MaxRetries 1", redis.NewClient(&redis.Options{MaxRetries: 1}), true},
		{"failover default", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}), true},
		{"failover MaxRetries -1", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, MaxRetries: -1}), false},
		{"cluster default", redis.NewClusterClient(&redis.ClusterOptions{}), true},
		{"cluster MaxRedirects -1", redis.NewClusterClient(&redis.ClusterOptions{MaxRedirects: -1}), false},
		{"cluster MaxRedirects -1, MaxRetries 2", redis.NewClusterClient(&redis.ClusterOptions{MaxRedirects: -1, MaxRetries: 2}), true},
		{"ring default", redis.NewRing(&redis.RingOptions{}), true},
		{"ring MaxRetries -1", redis.NewRing(&redis.RingOptions{MaxRetries: -1}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rdb.Close()
			require.Equal(t, tc.want, retry.Resends(tc.rdb))
		})
	}
	require.True(t, retry.Resends(nil), "a client of unknown type re-sends")
	require.True(t, retry.Resends(struct{ redis.UniversalClient }{}), "a wrapped client is unknown")
}

func TestPolicy_After(t *testing.T) {
	once := sendsOnce(t, fast)
	for _, tc := range []struct {
		name        string
		p           retry.Policy
		first, err  error
		wantUnknown bool
	}{
		{"success stands", fast, io.EOF, nil, false},
		{"answer stands", fast, io.EOF, errAnswer, false},
		{"ambiguous then not-run", once, io.EOF, errRefused, true},
		{"not-run then not-run, sends once", once, errRefused, errRefused, false},
		{"not-run then not-run, re-sends", fast, errRefused, errRefused, true},
		{"nothing open then ctx", once, nil, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.After(tc.first, tc.err)
			require.Equal(t, tc.wantUnknown, errors.Is(err, retry.ErrUnknownOutcome), "%v", err)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			}
		})
	}
	already := errors.Join(retry.ErrUnknownOutcome, io.EOF)
	require.Equal(t, already, fast.After(io.EOF, already), "not joined twice")
}

func TestDo_attemptsBelowOne(t *testing.T) {
	calls := 0
	err := retry.Do(t.Context(), retry.Policy{}, script(&calls, io.EOF))
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrUnknownOutcome)
}

func TestDo_canceledBeforeFirstCall(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	err := retry.Do(ctx, fast, script(&calls, io.EOF))
	require.Equal(t, 0, calls)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, retry.ErrUnknownOutcome)
}

// runDo runs Do in the background and fails the test if it does not return
// within a generous bound (a Do that slept its hour-long backoff would).
func runDo(t *testing.T, ctx context.Context, p retry.Policy, fn func(context.Context, int) error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- retry.Do(ctx, p, fn) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Do kept sleeping")
		return nil
	}
}

func TestDo_neverSleepsPastDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	slow := retry.Policy{Attempts: 5, MinBackoff: time.Hour, MaxBackoff: time.Hour}
	calls := 0
	err := runDo(t, ctx, slow, script(&calls, io.EOF, io.EOF))
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrUnknownOutcome)
	require.ErrorIs(t, err, io.EOF)
}

func TestDo_ctxEndsDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	slow := retry.Policy{Attempts: 5, MinBackoff: time.Hour, MaxBackoff: time.Hour}
	calls := 0
	fn := func(ctx context.Context, attempt int) error {
		calls++
		cancel()
		return errRefused
	}
	err := runDo(t, ctx, sendsOnce(t, slow), fn)
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorIs(t, err, context.Canceled, "ctx error joined, not swallowed")
	require.NotErrorIs(t, err, retry.ErrUnknownOutcome)
}

func TestDo_ctxEndsMidCall(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	fn := func(ctx context.Context, attempt int) error {
		calls++
		cancel()
		return ctx.Err() // as go-redis reports a call cut short by ctx
	}
	err := runDo(t, ctx, fast, fn)
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := retry.Nonce()
		require.Regexp(t, `^[0-9a-f]{16}$`, n)
		require.False(t, seen[n], "repeated nonce %s", n)
		seen[n] = true
	}
}

// A paused server leaves every call without a reply: the INCR may have run,
// so Do must not claim a definite failure.
func TestDo_pausedServer_unknownOutcome(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	require.NoError(t, rdb.Ping(t.Context()).Err())
	require.NoError(t, s.Pause())
	defer func() { require.NoError(t, s.Resume()) }()

	var calls atomic.Int32
	err := retry.Do(t.Context(), fast, func(ctx context.Context, _ int) error {
		calls.Add(1)
		return rdb.Incr(ctx, "retry:paused").Err()
	})
	require.ErrorIs(t, err, retry.ErrUnknownOutcome)
	var timeout net.Error
	require.True(t, errors.As(err, &timeout) && timeout.Timeout(), "cause is the read timeout: %v", err)
	require.EqualValues(t, 3, calls.Load())
}

// Connection refused is Retryable; a server restarted during the backoff
// serves the next attempt and Do succeeds with a definite answer.
func TestDo_killedServer_recoversAfterRestart(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	require.NoError(t, s.Kill())
	rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })

	restarted := make(chan error, 1)
	p := retry.Policy{Attempts: 1000, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	var refused atomic.Int32
	err := retry.Do(t.Context(), p, func(ctx context.Context, attempt int) error {
		err := rdb.Incr(ctx, "retry:restart").Err()
		if err != nil {
			require.True(t, retry.Retryable(err), "%v", err)
			if refused.Add(1) == 1 {
				go func() { restarted <- s.Restart(context.Background()) }()
			}
		}
		return err
	})
	require.NoError(t, <-restarted)
	require.NoError(t, err)
	require.Positive(t, refused.Load())
	n, err := rdb.Get(t.Context(), "retry:restart").Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "refused attempts never ran")
}

func TestRead_neverUnknown(t *testing.T) {
	for _, errs := range [][]error{{io.EOF, io.EOF, io.EOF}, {io.EOF, errRefused, errRefused}, {errRefused, errRefused, errRefused}} {
		calls := 0
		err := retry.Read(t.Context(), fast, script(&calls, errs...))
		require.Equal(t, 3, calls)
		require.ErrorIs(t, err, errs[2])
		require.NotErrorIs(t, err, retry.ErrUnknownOutcome, "a read decides nothing")
	}
	calls := 0
	require.NoError(t, retry.Read(t.Context(), fast, script(&calls, io.EOF)))
	require.Equal(t, 2, calls, "a read is retried like a write")
}
