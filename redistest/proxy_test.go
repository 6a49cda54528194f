package redistest_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// proxied starts a server and a proxy to it, and returns a client of the
// proxy that never retries, so that a test sees every reply the proxy
// drops or holds past readTimeout (0: go-redis's default).
func proxied(t *testing.T, readTimeout time.Duration) (*redistest.Server, *redistest.Proxy, *redis.Client) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return s, px, c
}

// rawConn is a bare RESP connection, so a test controls every read.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, inline string) {
	t.Helper()
	_, err := c.Write([]byte(inline + "\r\n"))
	require.NoError(t, err)
}

// readLine reads one reply line, waiting at most d.
func (c *rawConn) readLine(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	return c.r.ReadString('\n')
}

func counter(t *testing.T, s *redistest.Server, key string) int64 {
	t.Helper()
	n, err := s.Client().Get(t.Context(), key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func TestProxy_passesThrough(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{Addr: px.Addr()})
	defer c.Close()
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	pipe := c.Pipeline()
	for range 500 {
		pipe.Incr(ctx, "n")
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(500), counter(t, s, "n"))
	require.Equal(t, "v", s.Client().Get(ctx, "k").Val())
}

func TestProxy_HoldReplies_commandRunsReplyHeld(t *testing.T) {
	// A go-redis client whose read timeout is shorter than the hold.
	s, px, c := proxied(t, 200*time.Millisecond)
	ctx := t.Context()
	require.NoError(t, c.Ping(ctx).Err())
	px.HoldReplies(3 * time.Second)
	err := c.Incr(ctx, "ctr").Err()
	require.Error(t, err)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a client timeout, got %v", err)
	// ...yet the command took effect on the server.
	require.Eventually(t, func() bool { return counter(t, s, "ctr") == 1 }, 10*time.Second, 10*time.Millisecond)

	// The reply was held, not lost: a patient reader gets it afterwards.
	rc := dialRaw(t, px.Addr())
	rc.send(t, "INCR ctr")
	_, err = rc.readLine(100 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Eventually(t, func() bool { return counter(t, s, "ctr") == 2 }, 10*time.Second, 10*time.Millisecond)
	line, err := rc.readLine(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, ":2\r\n", line)

	px.HoldReplies(0)
	require.NoError(t, c.Incr(ctx, "ctr").Err())
}

func TestProxy_SetLatency_delaysReplies(t *testing.T) {
	_, px, c := proxied(t, 200*time.Millisecond)
	ctx := t.Context()
	px.SetLatency(3 * time.Second)
	require.Error(t, c.Ping(ctx).Err())
	px.SetLatency(0)
	require.NoError(t, c.Ping(ctx).Err())

	// Small latency: replies still arrive, in order.
	px.SetLatency(20 * time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: px.Addr()})
	defer slow.Close()
	pipe := slow.Pipeline()
	cmds := make([]*redis.IntCmd, 50)
	for i := range cmds {
		cmds[i] = pipe.Incr(ctx, "seq")
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for i, cmd := range cmds {
		require.Equal(t, int64(i+1), cmd.Val())
	}
}

func TestProxy_DropReplies_commandRunsReplyLost(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rc := dialRaw(t, px.Addr())
	px.DropReplies(true)
	rc.send(t, "SET dropped yes")
	require.Eventually(t, func() bool {
		return s.Client().Get(t.Context(), "dropped").Val() == "yes"
	}, 10*time.Second, 10*time.Millisecond)
	_, err := rc.readLine(300 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	px.DropReplies(false)
	rc.send(t, "PING")
	// The +OK of the SET is gone for good: the next reply is the PONG.
	line, err := rc.readLine(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)
}

func TestProxy_ResetConnections(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rc := dialRaw(t, px.Addr())
	rc.send(t, "PING")
	line, err := rc.readLine(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)

	px.ResetConnections()
	_, err = rc.readLine(30 * time.Second)
	require.ErrorIs(t, err, syscall.ECONNRESET)

	// New connections work.
	rc2 := dialRaw(t, px.Addr())
	rc2.send(t, "PING")
	line, err = rc2.readLine(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)
}

func TestProxy_Cut(t *testing.T) {
	_, px, c := proxied(t, 0)
	ctx := t.Context()
	require.NoError(t, c.Ping(ctx).Err())
	rc := dialRaw(t, px.Addr())

	require.NoError(t, px.Cut(true))
	_, err := rc.readLine(30 * time.Second)
	require.Error(t, err, "an open connection is closed by Cut")
	_, err = net.DialTimeout("tcp", px.Addr(), 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Error(t, c.Ping(ctx).Err())

	require.NoError(t, px.Cut(false))
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 10*time.Second, 10*time.Millisecond)
}

func TestProxy_targetDown(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	require.NoError(t, s.Kill())
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
	defer c.Close()
	require.Error(t, c.Ping(t.Context()).Err())
	require.NoError(t, s.Restart(t.Context()))
	require.Eventually(t, func() bool { return c.Ping(t.Context()).Err() == nil }, 10*time.Second, 10*time.Millisecond)
}

func TestProxy_faultsConcurrentSafe(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px, err := redistest.StartProxy(s.Addr())
	require.NoError(t, err)
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 500 * time.Millisecond, PoolSize: 8})
	defer c.Close()

	stop := make(chan struct{})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.Incr(ctx, "n").Err() == nil {
					ok.Add(1)
				}
			}
		})
	}
	for i := range 20 {
		px.SetLatency(time.Duration(i%3) * time.Millisecond)
		px.DropReplies(i%5 == 4)
		if i%4 == 0 {
			px.ResetConnections()
		}
		if i%7 == 0 {
			require.NoError(t, px.Cut(true))
			require.NoError(t, px.Cut(false))
		}
		time.Sleep(20 * time.Millisecond)
	}
	px.DropReplies(false)
	px.SetLatency(0)
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 10*time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, px.Close())
	require.NoError(t, px.Close())
	// Every acknowledged INCR ran; some unacknowledged ones ran too.
	require.GreaterOrEqual(t, counter(t, s, "n"), ok.Load())
}
