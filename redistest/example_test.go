package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
)

// A crash with AOF (appendfsync always) keeps every acknowledged write.
func Example() {
	ctx := context.Background()
	s, err := redistest.Start(ctx, redistest.Options{AOF: true, AppendFsync: "always"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	rdb := s.Client()
	_ = rdb.Set(ctx, "greeting", "hello", 0).Err()

	_ = s.Kill() // kill -9
	if err := s.Restart(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rdb.Get(ctx, "greeting").Val())
	// Output: hello
}

// A reply held back longer than the client's read timeout: the client sees
// a timeout, yet the command ran. This is the ambiguous outcome that
// idempotent retries must handle.
func ExampleProxy_HoldReplies() {
	ctx := context.Background()
	s, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	px, err := redistest.StartProxy(s.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer px.Close()

	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	// Connect first: the connection handshake's replies would be held too.
	_ = client.Ping(ctx).Err()
	px.HoldReplies(2 * time.Second)
	err = client.Incr(ctx, "counter").Err()
	var ne net.Error
	fmt.Println("client timed out:", errors.As(err, &ne) && ne.Timeout())

	// Read the counter on the server directly, not through the proxy.
	direct := s.Client()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if direct.Get(ctx, "counter").Val() == "1" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("counter on the server:", direct.Get(ctx, "counter").Val())
	// Output:
	// client timed out: true
	// counter on the server: 1
}

// After a failover the old replica takes writes and the old primary
// follows it.
func ExamplePair_Failover() {
	ctx := context.Background()
	p, err := redistest.StartPair(ctx, redistest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	_ = p.Primary.Client().Set(ctx, "k", "before", 0).Err()
	_ = p.Sync(ctx) // without it, a write not yet replicated would be lost

	if err := p.Failover(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Primary.Client().Get(ctx, "k").Val())
	_ = p.Primary.Client().Set(ctx, "k", "after", 0).Err()
	_ = p.Sync(ctx)
	fmt.Println(p.Replica.Client().Get(ctx, "k").Val())
	// Output:
	// before
	// after
}
