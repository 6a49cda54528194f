package book_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The verdict reports what the reconciler finds: clean after the sink
// caught up, and a drift, printed with the account, once Redis holds a
// balance its journal does not explain (a write lost to the book's view).
func TestFinishWallet_verdict(t *testing.T) {
	ctx := t.Context()
	pg := pgtest.New(t)
	rs := redistest.New(t, redistest.Options{})
	rdb := rs.Client()
	led, err := wallet.New(rdb, wallet.WithKeyPrefix("bk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	accounts := []string{"bk/a", "bk/b"}
	for _, a := range accounts {
		if err := led.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			t.Fatal(err)
		}
		if _, err := led.Credit(ctx, wallet.Tx{ID: "c-" + a, Account: a, Amount: 40}); err != nil {
			t.Fatal(err)
		}
	}
	finish := func() *book.Verdict {
		t.Helper()
		b, err := book.Open(ctx, pg.URL(), "bk", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		b.SinkWallet(ctx, led, accounts)
		v, err := b.FinishWallet(context.WithoutCancel(ctx), led, accounts)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := finish()
	var out bytes.Buffer
	v.Print(&out)
	if !v.OK() || v.Redis[0] != 80 || v.Book[0] != 80 || v.Entries != 4 || !strings.Contains(out.String(), "reconciler: OK") {
		t.Fatalf("verdict %+v:\n%s", v, &out)
	}

	// The posted balance changes in Redis with no journal entry.
	ks, err := rdb.Keys(ctx, "bk:*acct:bk/a").Result()
	if err != nil || len(ks) != 1 {
		t.Fatalf("account key: %v %v", ks, err)
	}
	if err := rdb.HIncrBy(ctx, ks[0], "posted", 5).Err(); err != nil {
		t.Fatal(err)
	}
	v = finish()
	out.Reset()
	v.Print(&out)
	if v.OK() || len(v.Drifts) != 1 || v.Drifts[0].Key != "bk/a" || v.Redis[0] != 85 || v.Book[0] != 80 ||
		!strings.Contains(out.String(), "reconciler: DRIFT on 1 key") || !strings.Contains(out.String(), "bk/a: Redis [45 0], book [40 0]") {
		t.Fatalf("verdict %+v:\n%s", v, &out)
	}
}
