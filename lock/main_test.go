package lock_test

import (
	"context"
	"fmt"
	"github.com/redkit-go/redkit/lock"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"go.uber.org/goleak"
)

// shared is one redis-server for the tests that inject no fault; each test
// uses its own key prefix.
var shared *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	s, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = s
	code := m.Run()
	_ = s.Close()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction(redistest.DialProber)); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var prefixSeq atomic.Int64

// testPrefix returns a key prefix no other test uses.
func testPrefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("t%d-%s", prefixSeq.Add(1), strings.Trim(name, "-_"))
}

// sharedClient returns a client of the shared server, closed at the end of t.
func sharedClient(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: shared.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// twoClients returns two Clients with the same key prefix, as two processes
// would have, closed at the end of t.
func twoClients(t testing.TB, prefix string, opts ...lock.Option) []*lock.Client {
	opts = append([]lock.Option{lock.WithKeyPrefix(prefix)}, opts...)
	cs := []*lock.Client{mustNew(t, sharedClient(t), opts...), mustNew(t, sharedClient(t), opts...)}
	t.Cleanup(func() {
		_ = cs[0].Close()
		_ = cs[1].Close()
	})
	return cs
}

type acquirer interface {
	Acquire(context.Context) (*lock.Lease, error)
	TryAcquire(context.Context) (*lock.Lease, error)
}

// waitFor starts Acquire on m in the background (30s context) and returns
// its result channel; the lease is released before the result is sent.
func waitFor(m acquirer) <-chan error {
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := m.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	return got
}

// mustNew is lock.New for tests whose options are valid: an error fails
// the test.
func mustNew(tb testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	tb.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		tb.Fatalf("lock.New: %v", err)
	}
	return c
}

// mustRedlock is lock.NewRedlock for tests whose options are valid.
func mustRedlock(tb testing.TB, masters []redis.UniversalClient, opts ...lock.Option) *lock.Redlock {
	tb.Helper()
	rl, err := lock.NewRedlock(masters, opts...)
	if err != nil {
		tb.Fatalf("lock.NewRedlock: %v", err)
	}
	return rl
}
