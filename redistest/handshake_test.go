package redistest_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// outcome is what a SET sent under a fault met and did.
type outcome int

const (
	answered outcome = iota // the SET was answered and ran
	ranLate                 // the client timed out, the SET ran (its reply was late or lost)
	notRun                  // the client got an error, the SET never ran
	either                  // answered, or failed on a connection found closed: ran if and only if answered
)

// TestFaults_handshake: what each fault does to a new connection's
// handshake and to a command on an open one, as the package doc states,
// for a client sending once (go-redis's handshake: HELLO, CLIENT SETINFO).
func TestFaults_handshake(t *testing.T) {
	type fault struct {
		name          string
		opts          redistest.Options
		proxy         bool
		setup         func(t *testing.T, s *redistest.Server)
		inject, heal  func(t *testing.T, s *redistest.Server, px *redistest.Proxy)
		fresh, warm   outcome
		freshErr, why string
	}
	var busy <-chan error
	var restarted chan error
	faults := []fault{
		{name: "Kill", inject: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) { require.NoError(t, s.Kill()) },
			heal: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) {
				require.NoError(t, s.Restart(t.Context()))
			},
			fresh: notRun, warm: notRun, freshErr: "connection refused"},
		{name: "Pause", inject: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) { require.NoError(t, s.Pause()) },
			heal:  func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) { require.NoError(t, s.Resume()) },
			fresh: notRun, warm: ranLate, freshErr: "i/o timeout"},
		{name: "KillClients", inject: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) {
			require.NoError(t, s.KillClients(t.Context()))
		},
			heal:  func(*testing.T, *redistest.Server, *redistest.Proxy) {},
			fresh: answered, warm: either},
		{name: "Busy", opts: redistest.Options{Config: []string{"busy-reply-threshold 20"}},
			inject: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) {
				var err error
				busy, err = s.Busy(t.Context(), 4*time.Second)
				require.NoError(t, err)
			},
			heal:  func(t *testing.T, _ *redistest.Server, _ *redistest.Proxy) { require.NoError(t, <-busy) },
			fresh: notRun, warm: notRun, freshErr: "BUSY"},
		{name: "SlowLoading", opts: redistest.Options{AOF: true, AppendFsync: "always"},
			setup: func(t *testing.T, s *redistest.Server) { require.NoError(t, s.SlowLoading(t.Context(), 6*time.Second)) },
			inject: func(t *testing.T, s *redistest.Server, _ *redistest.Proxy) {
				require.NoError(t, s.Kill())
				restarted = make(chan error, 1)
				go func() { restarted <- s.Restart(t.Context()) }()
				c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
				defer c.Close()
				for !redis.IsLoadingError(c.Ping(t.Context()).Err()) {
					time.Sleep(time.Millisecond)
				}
			},
			heal:  func(t *testing.T, _ *redistest.Server, _ *redistest.Proxy) { require.NoError(t, <-restarted) },
			fresh: notRun, warm: notRun, freshErr: "LOADING"},
		{name: "SetLatency", proxy: true,
			inject: func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.SetLatency(time.Minute) },
			heal:   func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.SetLatency(0) },
			fresh:  notRun, warm: ranLate, freshErr: "i/o timeout"},
		{name: "HoldReplies", proxy: true,
			inject: func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.HoldReplies(time.Minute) },
			heal:   func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.HoldReplies(0) },
			fresh:  ranLate, warm: ranLate},
		{name: "DropReplies", proxy: true,
			inject: func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.DropReplies(true) },
			heal:   func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.DropReplies(false) },
			fresh:  ranLate, warm: ranLate},
		{name: "ResetConnections", proxy: true,
			inject: func(_ *testing.T, _ *redistest.Server, px *redistest.Proxy) { px.ResetConnections() },
			heal:   func(*testing.T, *redistest.Server, *redistest.Proxy) {},
			fresh:  answered, warm: either},
		{name: "Cut", proxy: true,
			inject: func(t *testing.T, _ *redistest.Server, px *redistest.Proxy) { require.NoError(t, px.Cut(true)) },
			heal:   func(t *testing.T, _ *redistest.Server, px *redistest.Proxy) { require.NoError(t, px.Cut(false)) },
			fresh:  notRun, warm: notRun, freshErr: "connection refused"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ctx := t.Context()
			s := redistest.New(t, f.opts)
			if f.setup != nil {
				f.setup(t, s)
			}
			var px *redistest.Proxy
			addr := s.Addr()
			if f.proxy {
				px = redistest.NewProxy(t, s.Addr())
				addr = px.Addr()
			}
			client := func() *redis.Client {
				// A read timeout that a loaded machine's replies meet, far
				// below the faults' minute of latency or holding.
				c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Second, MaxRetries: -1, DialerRetries: 1})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			fresh, warm := client(), client()
			require.NoError(t, warm.Ping(ctx).Err())

			f.inject(t, s, px)
			freshErr := fresh.Set(ctx, "fresh", "v", 0).Err()
			warmErr := warm.Set(ctx, "warm", "v", 0).Err()
			f.heal(t, s, px)

			direct := s.Client()
			for _, c := range []struct {
				key  string
				err  error
				want outcome
			}{{"fresh", freshErr, f.fresh}, {"warm", warmErr, f.warm}} {
				exists := func() bool { return direct.Exists(ctx, c.key).Val() == 1 }
				switch c.want {
				case answered:
					require.NoError(t, c.err, c.key)
					require.True(t, exists(), c.key)
				case ranLate:
					var ne net.Error
					require.True(t, errors.As(c.err, &ne) && ne.Timeout(), "%s: want a timeout, got %v", c.key, c.err)
					require.Eventually(t, exists, 10*time.Second, 10*time.Millisecond, "%s: the SET ran", c.key)
				case notRun:
					require.Error(t, c.err, c.key)
					require.False(t, exists(), "%s: the SET never ran (%v)", c.key, c.err)
				case either:
					require.Equal(t, c.err == nil, exists(), "%s: ran if and only if answered (%v)", c.key, c.err)
				}
			}
			if f.freshErr != "" {
				require.True(t, strings.Contains(freshErr.Error(), f.freshErr), "a new connection: want %q, got %v", f.freshErr, freshErr)
			}
		})
	}
}
