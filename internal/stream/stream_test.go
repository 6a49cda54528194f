package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/stream"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Page walks a stream page by page: each cursor is the last ID of its page,
// a page that ends at the newest entry (full or not) gives no cursor, and
// exists reports the record beside the stream.
func TestPage(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.New(t, redistest.Options{}).Client()
	p := retry.DefaultPolicy().For(rdb)
	var ids []string
	for range 4 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"k", "v"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rdb.Set(ctx, "rec", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor, pages := "", 0
	for {
		msgs, next, exists, err := stream.Page(ctx, rdb, p, "s", cursor, 2, "rec")
		if err != nil || !exists {
			t.Fatalf("page %d: exists %v, err %v", pages, exists, err)
		}
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		pages++
		if next == "" {
			break
		}
		if next != msgs[len(msgs)-1].ID {
			t.Fatalf("cursor %q is not the page's last ID %q", next, msgs[len(msgs)-1].ID)
		}
		cursor = next
	}
	if pages != 2 || len(got) != 4 || got[0] != ids[0] || got[3] != ids[3] {
		t.Fatalf("%d pages of %v, want 2 pages of %v", pages, got, ids)
	}
	msgs, next, exists, err := stream.Page(ctx, rdb, p, "none", "", 10, "none")
	if err != nil || exists || len(msgs) != 0 || next != "" {
		t.Fatalf("missing record and stream: %v %q %v %v", msgs, next, exists, err)
	}
	// exists is any of the keys: here the stream itself.
	if _, _, exists, err := stream.Page(ctx, rdb, p, "s", ids[3], 10, "none", "s"); err != nil || !exists {
		t.Fatalf("the stream as a key: exists %v, err %v", exists, err)
	}
	// Every cursor valid.Page lets through, Redis reads: the largest ms.
	if msgs, _, _, err := stream.Page(ctx, rdb, p, "s", "18446744073709551615-0", 10, "rec"); err != nil || len(msgs) != 0 {
		t.Fatalf("cursor at the largest ms: %d entries, err %v", len(msgs), err)
	}
}

// A malformed cursor or a limit out of 1..MaxPage is ErrInvalid before any
// I/O: the client here reaches no server.
func TestPage_refusesBadRequest(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	p := retry.DefaultPolicy().For(rdb)
	for _, c := range []struct {
		cursor string
		limit  int
	}{{"", 0}, {"", valid.MaxPage + 1}, {"not-an-id", 1}, {"", -1}, {"18446744073709551616-0", 1},
		{"18446744073709551615-18446744073709551615", 1}} {
		_, _, _, err := stream.Page(context.Background(), rdb, p, "s", c.cursor, c.limit, "rec")
		if !errors.Is(err, valid.ErrInvalid) {
			t.Fatalf("cursor %q limit %d: %v, want ErrInvalid", c.cursor, c.limit, err)
		}
	}
}

// A read that failed is sent again as the policy allows: while a slow
// script holds the server (BUSY), one attempt fails and five, their
// backoffs outlasting the script, get the page.
func TestPage_readsAgainAfterAFailure(t *testing.T) {
	ctx := context.Background()
	srv := redistest.New(t, redistest.Options{Config: []string{"busy-reply-threshold 20"}})
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"k", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, attempts := range []int{1, 5} {
		p := retry.DefaultPolicy()
		p.SetAttempts(attempts, 100*time.Millisecond, 200*time.Millisecond) // waits of 50..200ms
		done, err := srv.Busy(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		msgs, _, _, err := stream.Page(ctx, rdb, p.For(rdb), "s", "", 10, "rec")
		if busyErr := <-done; busyErr != nil {
			t.Fatal(busyErr)
		}
		switch {
		case attempts == 1 && err == nil:
			t.Fatal("one attempt: the page arrived while the server was busy")
		case attempts > 1 && (err != nil || len(msgs) != 1):
			t.Fatalf("%d attempts: %d entries, err %v; want the page read again", attempts, len(msgs), err)
		}
	}
}

// Range reads a page and the anchor field after it: "" while the hash or
// the field is missing, its value once set.
func TestRange(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.New(t, redistest.Options{}).Client()
	p := retry.DefaultPolicy().For(rdb)
	var ids []string
	for range 3 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "{r}s", Values: []any{"k", "v"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	msgs, anchor, err := stream.Range(ctx, rdb, p, "{r}s", "-", ids[1], 10, "{r}h", "ck")
	if err != nil || anchor != "" || len(msgs) != 2 || msgs[1].ID != ids[1] {
		t.Fatalf("no anchor yet: %v %q %v", msgs, anchor, err)
	}
	if err := rdb.HSet(ctx, "{r}h", "ck", ids[2]).Err(); err != nil {
		t.Fatal(err)
	}
	msgs, anchor, err = stream.Range(ctx, rdb, p, "{r}s", "("+ids[0], "+", 1, "{r}h", "ck")
	if err != nil || anchor != ids[2] || len(msgs) != 1 || msgs[0].ID != ids[1] {
		t.Fatalf("anchored: %v %q %v", msgs, anchor, err)
	}
}
