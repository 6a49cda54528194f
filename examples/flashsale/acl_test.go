package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// The template runs as the user of its redis.acl (SECURITY.md), on a
// redis-server that loads that file: it starts, serves every route (the
// rate limiter's keys included) and runs its simulated sale, and the user
// may do nothing else.
func TestACL_leastPrivilege(t *testing.T) {
	srv, user := exampletest.ACLUser(t, "redis.acl")
	keys := exampletest.WithKeys(t, "shop:"+scopeAdmin+","+scopeRead, "alice:"+scopeBuy)
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "100/s")
	c := exampletest.NewClient(t, svc.URL)
	shop, alice := c.As(keys["shop"]), c.As(keys["alice"])

	c.Get("/healthz").Want(t, 200, "")
	c.Get("/readyz").Want(t, 200, "")
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":100,"limit":2}`).Want(t, 201, "")
	shop.Get("/skus/phone").Want(t, 200, "")
	alice.Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, 200, "")
	shop.Do("POST", "/skus/phone/orders/o-1/refund", "", `{"buyer":"alice","qty":1}`).Want(t, 200, "")
	alice.Do("POST", "/skus/phone/reservations", "r-1", `{"qty":1,"ttl_seconds":60}`).Want(t, 200, "")
	alice.Do("POST", "/skus/phone/reservations/r-1/confirm", "", `{"qty":1}`).Want(t, 200, "")
	alice.Do("POST", "/skus/phone/reservations", "r-2", `{"qty":1}`).Want(t, 200, "")
	alice.Do("POST", "/skus/phone/reservations/r-2/cancel", "", `{"qty":1}`).Want(t, 200, "")
	shop.Get("/skus/phone/audit").Want(t, 200, "")
	svc.RequireNoKeyLogged(t, keys)
	if n := srv.Client().Exists(t.Context(), "rate:flashsale:{alice}").Val(); n != 1 {
		t.Fatalf("no rate-limit key of alice: the limiter did not run")
	}

	report, _ := exampletest.Run(t, run, "-stock", "20", "-buyers", "60", "-concurrency", "4",
		"-abandon", "0.2", "-reserve", "0.2", "-resend", "0.2")
	if got := reportNumber(t, report, "audit"); got != "OK" {
		t.Fatalf("audit = %s\n%s", got, report)
	}

	exampletest.RequireQuoted(t, "../../SECURITY.md", "redis.acl")
	redistest.RequireLeastPrivilege(t, user, "redkit:wallet:v2:{x}:acct:x", nil)
}

// The simulated sale's journal consumer runs as the template's user too
// when it is handed entries again: a handler that failed (or a consumer
// that crashed) leaves its batch pending, and the next round claims it
// back (consume.lua's XCLAIM) instead of reading new entries.
func TestACL_journalHandedAgain(t *testing.T) {
	_, user := exampletest.ACLUser(t, "redis.acl")
	ctx := t.Context()
	inv, err := stock.New(user, stock.WithKeyPrefix(keyPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Create(ctx, "phone", 10); err != nil {
		t.Fatal(err)
	}
	c := stock.Consumer{Group: "flashsale-report", Name: "sim", SKUs: []string{"phone"}, Poll: 10 * time.Millisecond}
	failed := errors.New("the handler failed")
	err = inv.Consume(ctx, c, func(context.Context, []stock.Entry) error { return failed })
	if !errors.Is(err, failed) {
		t.Fatalf("first Consume: %v, want the handler's error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got []stock.Entry
	err = inv.Consume(cctx, c, func(_ context.Context, entries []stock.Entry) error {
		got = append(got, entries...)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(got) != 1 || got[0].Kind != stock.KindCreate {
		t.Fatalf("second Consume: %v, handed %+v; want the creation again", err, got)
	}
}
