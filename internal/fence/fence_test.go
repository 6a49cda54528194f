package fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Check accepts a token at least the highest seen and records it; a lower
// one is ErrStale and changes nothing; an out-of-range one is ErrInvalid
// before any I/O.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.New(t, redistest.Options{}).Client()
	key := fence.Key("", "g", "job")
	if key != "redkit:fence:v1:{g}:job" {
		t.Fatalf("key %q", key)
	}
	p := retry.DefaultPolicy().For(rdb)
	for _, step := range []struct {
		token uint64
		stale bool
		seen  string
	}{{5, false, "5"}, {5, false, "5"}, {4, true, "5"}, {9, false, "9"}, {1, true, "9"}} {
		err := fence.Check(ctx, rdb, p, key, step.token)
		if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
			t.Fatalf("token %d: err %v, want stale=%v", step.token, err, step.stale)
		}
		if got := rdb.Get(ctx, key).Val(); got != step.seen {
			t.Fatalf("token %d: recorded %q, want %q", step.token, got, step.seen)
		}
	}
	nowhere := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer nowhere.Close()
	for _, bad := range []uint64{0, valid.MaxAmount + 1} {
		if err := fence.Check(ctx, nowhere, p, key, bad); !errors.Is(err, valid.ErrInvalid) {
			t.Fatalf("token %d: %v, want ErrInvalid before any I/O", bad, err)
		}
	}
}

// The Lua chunk refuses what Validate refuses, so a script given a token
// that bypassed Go's checks writes nothing.
func TestLua_refusesMalformedTokens(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.New(t, redistest.Options{}).Client()
	probe := redis.NewScript(fence.Lua + "\nif redkit_fence(KEYS[1], ARGV[1]) then return 1 end return 0")
	for _, tok := range []string{"0", "-1", "1.5", "9007199254740992", "99999999999999999", "x", ""} {
		n, err := probe.Run(ctx, rdb, []string{"f"}, tok).Int()
		if err != nil || n != 0 {
			t.Fatalf("token %q: %d %v, want refused", tok, n, err)
		}
	}
	if rdb.Exists(ctx, "f").Val() != 0 {
		t.Fatal("a refused token was recorded")
	}
	if err := fence.Validate("a b", 1); !errors.Is(err, valid.ErrInvalid) {
		t.Fatalf("bad lock name: %v", err)
	}
	if err := fence.Validate("job", 1); err != nil {
		t.Fatal(err)
	}
}
