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
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/redistest"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify_transportErrors(t *testing.T) {
	readOp := func(err error) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: err}}
	}
	for _, tc := range []struct {
		name                 string
		err                  error
		ambiguous, retryable bool
	}{
		{"nil", nil, false, false},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true, false},
		{"EOF", io.EOF, true, false},
		{"wrapped EOF", fmt.Errorf("evalsha: %w", io.EOF), true, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false},
		{"conn reset", readOp(syscall.ECONNRESET), true, false},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, true, false},
		{"ctx canceled", context.Canceled, true, false},
		{"ctx deadline", context.DeadlineExceeded, true, false},
		{"conn refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, false, true},
		{"refused unwrapped", syscall.ECONNREFUSED, false, true},
		{"pool timeout", fmt.Errorf("get conn: %w", redis.ErrPoolTimeout), false, true},
		{"other", errors.New("boom"), false, false},
		{"redis.Nil", redis.Nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ambiguous, retry.Ambiguous(tc.err), "Ambiguous")
			require.Equal(t, tc.retryable, retry.Retryable(tc.err), "Retryable")
		})
	}
}

// Error replies travel through go-redis's real parser: a script returns them
// verbatim from a real server.
func TestClassify_serverErrors(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	for _, tc := range []struct {
		reply     string
		retryable bool
	}{
		{"LOADING Redis is loading the dataset in memory", true},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"READONLY You can't write against a read only replica.", true},
		{"NOSCRIPT No matching script", false},
		{"ERR something else", false},
		{"OOM command not allowed when used memory > 'maxmemory'.", true},
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.", true},
		{"BUSYKEY Target key name already exists.", false},
		{"MOVED 3999 127.0.0.1:6381", true},
		{"ASK 3999 127.0.0.1:6381", true},
		{"NOREPLICAS Not enough good replicas to write.", true},
		{"ERR max number of clients reached", true},
	} {
		err := rdb.Eval(t.Context(), "return redis.error_reply(ARGV[1])", nil, tc.reply).Err()
		require.Error(t, err, tc.reply)
		require.Equal(t, tc.retryable, retry.Retryable(err), "Retryable(%q)", err)
		require.False(t, retry.Ambiguous(err), "Ambiguous(%q)", err)
	}
}

func TestClassify_realRefusedAndReadonly(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	err := p.Replica.Client().Set(t.Context(), "k", "v", 0).Err()
	require.True(t, retry.Retryable(err), "write to replica: %v", err)

	require.NoError(t, p.Primary.Kill())
	err = p.Primary.Client().Ping(t.Context()).Err()
	require.True(t, retry.Retryable(err), "ping killed server: %v", err)
	require.False(t, retry.Ambiguous(err))
}

func TestClassify_realPoolTimeout(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) {
		o.PoolSize = 1
		o.PoolTimeout = 100 * time.Millisecond
		o.MaxRetries = -1
	})
	conn := rdb.Conn() // holds the only connection
	defer conn.Close()
	require.NoError(t, conn.Ping(t.Context()).Err())
	err := rdb.Ping(t.Context()).Err()
	require.ErrorIs(t, err, redis.ErrPoolTimeout)
	require.True(t, retry.Retryable(err))
	require.False(t, retry.Ambiguous(err))
}
