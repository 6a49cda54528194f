package script_test

import (
	"context"
	"fmt"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/redistest"
)

func ExamplePipeline() {
	ctx := context.Background()
	s, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	rdb := s.Client()

	add := script.New("return redis.call('INCRBY', KEYS[1], ARGV[1])")
	cmds := script.Pipeline(ctx, rdb, []script.Call{ // NOSCRIPT, loaded, resent
		{Script: add, Keys: []string{"{g}:a"}, Args: []any{2}},
		{Script: add, Keys: []string{"{g}:a"}, Args: []any{3}},
	})
	for _, cmd := range cmds {
		fmt.Println(cmd.Val(), cmd.Err())
	}
	// Output:
	// 2 <nil>
	// 5 <nil>
}
