package idgen_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/idgen"
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

func ExampleNewSequence() {
	ctx := context.Background()
	rdb, stop := exampleRedis()
	defer stop()

	seq, err := idgen.NewSequence(rdb, "fence-demo")
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		id, err := seq.Next(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(id)
	}
	// Output:
	// 1
	// 2
	// 3
}

func ExampleNewSegment() {
	ctx := context.Background()
	rdb, stop := exampleRedis()
	defer stop()

	seg, err := idgen.NewSegment(rdb, "order-no", idgen.WithMinStep(1000))
	if err != nil {
		panic(err)
	}
	defer seg.Close()
	a, _ := seg.Next(ctx) // fetches the range 1..1000
	b, _ := seg.Next(ctx) // served from memory
	fmt.Println(a, b, seg.Runway() >= 998)
	// Output: 1 2 true
}

func ExampleNewLeasedSnowflake() {
	ctx := context.Background()
	rdb, stop := exampleRedis()
	defer stop()

	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "checkout")
	if err != nil {
		panic(err)
	}
	defer sf.Close()
	id, err := sf.Next(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("node in the ID:", id.SnowflakeNode() == sf.Node())
	// Output: node in the ID: true
}

func ExampleID_MarshalJSON() {
	b, _ := json.Marshal(map[string]idgen.ID{"id": 1234567890123456789})
	fmt.Println(string(b))
	var v struct{ ID idgen.ID }
	_ = json.Unmarshal([]byte(`{"ID": 42}`), &v) // unquoted numbers are accepted too
	fmt.Println(v.ID, idgen.ID(42).Base32())
	// Output:
	// {"id":"1234567890123456789"}
	// 42 000000000001A
}
