package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/redkit-go/redkit/internal/retry"
)

func ExampleDo() {
	// Build keys and arguments, including the nonce, once; every attempt
	// sends them unchanged.
	args := []any{"order-1", retry.Nonce()}
	err := retry.Do(context.Background(), retry.DefaultPolicy(), func(ctx context.Context, attempt int) error {
		_ = args      // rdb.EvalSha(ctx, sha, keys, args...).Err() in real code
		return io.EOF // the reply never came: the write may have happened
	})
	fmt.Println(errors.Is(err, retry.ErrUnknownOutcome))
	// Output: true
}
