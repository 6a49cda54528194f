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
	// staleMap: the error says the node the slot map names is gone, so a
	// Cluster client must reload its map before the next attempt.
	for _, tc := range []struct {
		name                           string
		err                            error
		ambiguous, retryable, staleMap bool
	}{
		{"nil", nil, false, false, false},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true, false, true},
		{"EOF", io.EOF, true, false, true},
		{"wrapped EOF", fmt.Errorf("evalsha: %w", io.EOF), true, false, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false, true},
		{"conn reset", readOp(syscall.ECONNRESET), true, false, true},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, true, false, true},
		{"ctx canceled", context.Canceled, true, false, false},
		{"ctx deadline", context.DeadlineExceeded, true, false, false},
		{"conn refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, true, true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, false, true, true},
		{"dial cut by ctx", &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, false, true, true},
		{"refused unwrapped", syscall.ECONNREFUSED, false, true, true},
		{"pool timeout", fmt.Errorf("get conn: %w", redis.ErrPoolTimeout), false, true, false},
		{"other", errors.New("boom"), false, false, false},
		{"redis.Nil", redis.Nil, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ambiguous, retry.Ambiguous(tc.err), "Ambiguous")
			require.Equal(t, tc.retryable, retry.Retryable(tc.err), "Retryable")
			require.Equal(t, tc.staleMap, retry.StaleMap(tc.err), "StaleMap")
		})
	}
}

// Error replies travel through go-redis's real parser: a script returns them
// verbatim from a real server.
func TestClassify_serverErrors(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	for _, tc := range []struct {
		reply               string
		retryable, staleMap bool
	}{
		{"LOADING Redis is loading the dataset in memory", true, false},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", true, false},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true, true},
		{"CLUSTERDOWN The cluster is down", true, true},
		{"READONLY You can't write against a read only replica.", true, true},
		{"NOSCRIPT No matching script", false, false},
		{"ERR something else", false, false},
		{"OOM command not allowed when used memory > 'maxmemory'.", true, false},
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.", true, false},
		{"BUSYKEY Target key name already exists.", false, false},
		{"MOVED 3999 127.0.0.1:6381", true, true},
		{"ASK 3999 127.0.0.1:6381", true, true},
		{"NOREPLICAS Not enough good replicas to write.", true, false},
		{"ERR max number of clients reached", true, false},
	} {
		err := rdb.Eval(t.Context(), "return redis.error_reply(ARGV[1])", nil, tc.reply).Err()
		require.Error(t, err, tc.reply)
		require.Equal(t, tc.retryable, retry.Retryable(err), "Retryable(%q)", err)
		require.False(t, retry.Ambiguous(err), "Ambiguous(%q)", err)
		require.Equal(t, tc.staleMap, retry.StaleMap(err), "StaleMap(%q)", err)
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
	require.True(t, retry.StaleMap(err), "a killed node's address: %v", err)
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
