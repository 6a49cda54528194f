package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// exampleRedis starts a throwaway redis-server for an example; stop shuts it
// down. In a program, rdb is any go-redis client of your Redis.
func exampleRedis() (rdb *redis.Client, stop func() error) {
	srv, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		panic(err)
	}
	return srv.Client(), srv.Close
}

// exampleLocks is exampleRedis with a lock Client on it; stop closes both.
func exampleLocks() (locks *lock.Client, rdb *redis.Client, stop func()) {
	rdb, stopRedis := exampleRedis()
	locks, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	return locks, rdb, func() {
		_ = locks.Close()
		_ = stopRedis()
	}
}

func Example() {
	ctx := context.Background()
	rdb, stop := exampleRedis()
	defer stop()

	locks, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	m := locks.Mutex("payout:merchant-42", lock.WithTTL(10*time.Second))

	lease, err := m.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("token:", lease.Fence().Token)

	_, err = m.TryAcquire(ctx)
	fmt.Println("second owner:", errors.Is(err, lock.ErrNotAcquired))

	fmt.Println("release:", lease.Release(ctx))
	fmt.Println("lease ended:", context.Cause(lease.Context()))

	lease, err = m.TryAcquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("token:", lease.Fence().Token)
	_ = lease.Release(ctx)
	// Output:
	// token: 1
	// second owner: true
	// release: <nil>
	// lease ended: lock: lease released
	// token: 2
}

func ExampleClient_Do() {
	ctx := context.Background()
	locks, _, stop := exampleLocks()
	defer stop()

	err := locks.Do(ctx, "reports/nightly", func(ctx context.Context, l *lock.Lease) error {
		// ctx ends if the lease is lost; the watchdog renews it meanwhile.
		fmt.Println("building the report under token", l.Fence().Token)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// building the report under token 1
	// done: <nil>
}

// A resource kept in Redis checks the fence in the same script as its write,
// so a holder whose lease passed to someone else cannot overwrite newer data.
func ExampleFenceLua() {
	ctx := context.Background()
	locks, rdb, stop := exampleLocks()
	defer stop()

	write := redis.NewScript(lock.FenceLua + `
if not redkit_fence(KEYS[1], ARGV[1]) then return redis.error_reply('STALE fence') end
redis.call('SET', KEYS[2], ARGV[2])
return 1`)
	fenceKey := lock.FenceKey("", "doc-7", "editor") // in the document's slot
	docKey := "docs:{doc-7}:body"

	m := locks.Mutex("editor", lock.WithTTL(50*time.Millisecond), lock.WithWatchdog(false))
	old, _ := m.Acquire(ctx)
	<-old.Done()             // old holder stalls past its TTL...
	cur, _ := m.Acquire(ctx) // ...and someone else takes over
	fmt.Println(write.Run(ctx, rdb, []string{fenceKey, docKey}, cur.Fence().Token, "new").Err())
	fmt.Println(write.Run(ctx, rdb, []string{fenceKey, docKey}, old.Fence().Token, "stale").Err())
	fmt.Println(rdb.Get(ctx, docKey).Val())
	_ = cur.Release(ctx)
	// Output:
	// <nil>
	// STALE fence
	// new
}

func ExampleCheckFence() {
	ctx := context.Background()
	rdb, stop := exampleRedis()
	defer stop()
	key := lock.FenceKey("", "ledger-db", "payout:merchant-42")

	fmt.Println(lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "payout:merchant-42", Token: 8}))
	fmt.Println(lock.CheckFence(ctx, rdb, key, lock.Fence{Name: "payout:merchant-42", Token: 7}))
	// Output:
	// <nil>
	// lock: stale fence token
}
