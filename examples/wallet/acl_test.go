package main

import (
	"strings"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/redistest"
)

// The template runs as the user of its redis.acl (SECURITY.md), on a
// redis-server that loads that file: it starts, serves every route (the
// rate limiter's keys and a transfer across slot groups included) and runs
// its load test, and the user may do nothing else.
func TestACL_leastPrivilege(t *testing.T) {
	srv, user := exampletest.ACLUser(t, "redis.acl")
	keys := exampletest.WithKeys(t, "treasury:"+scopeAdmin+","+scopeRead, "checkout:"+scopePayments)
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-recover-every", "1s")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout := c.As(keys["treasury"]), c.As(keys["checkout"])

	c.Get("/healthz").Want(t, 200, "")
	c.Get("/readyz").Want(t, 200, "")
	treasury.Do("POST", "/accounts", "", `{"id":"alice","currency":"CNY","owner":"checkout"}`).Want(t, 201, "")
	treasury.Do("POST", "/accounts", "", `{"id":"bob","currency":"CNY"}`).Want(t, 201, "")
	treasury.Do("POST", "/accounts", "", `{"id":"alice/till","currency":"CNY"}`).Want(t, 201, "")
	treasury.Do("POST", "/accounts/alice%2Ftill/grants", "", `{"principal":"checkout"}`).Want(t, 200, "")
	treasury.Do("DELETE", "/accounts/alice%2Ftill/grants/checkout", "", "").Want(t, 200, "")
	treasury.Get("/accounts/alice").Want(t, 200, "")
	treasury.Do("POST", "/accounts/alice/credits", "c-1", `{"amount":5000}`).Want(t, 201, "")
	checkout.Do("POST", "/accounts/alice/debits", "d-1", `{"amount":1999}`).Want(t, 201, "")
	checkout.Do("POST", "/transfers", "t-1", `{"from":"alice","to":"bob","amount":500}`).Want(t, 201, "")
	checkout.Do("POST", "/transfers", "t-2", `{"from":"alice","to":"alice/till","amount":100}`).Want(t, 201, "")
	checkout.Do("POST", "/accounts/alice/holds", "h-1", `{"amount":300,"ttl":"15m"}`).Want(t, 201, "")
	checkout.Do("POST", "/accounts/alice/holds/h-1/capture", "", `{"amount":200}`).Want(t, 200, "")
	checkout.Do("POST", "/accounts/alice/holds", "h-2", `{"amount":100,"ttl":"15m"}`).Want(t, 201, "")
	checkout.Do("POST", "/accounts/alice/holds/h-2/void", "", "").Want(t, 200, "")
	treasury.Get("/accounts/alice/entries?limit=100").Want(t, 200, "")
	b := exampletest.Decode[balance](t, treasury.Get("/accounts/alice").Want(t, 200, ""))
	if b.Posted != 5000-1999-500-100-200 || b.Held != 0 {
		t.Fatalf("alice: %+v", b)
	}
	svc.RequireNoKeyLogged(t, keys)
	if n := srv.Client().Exists(t.Context(), "rate:wallet:{checkout}").Val(); n != 1 {
		t.Fatalf("no rate-limit key of checkout: the limiter did not run")
	}

	report, _ := exampletest.Run(t, run, "-duration", "300ms", "-workers", "2", "-accounts", "6", "-groups", "2")
	for _, want := range []string{"Verify                                6 of 6 accounts OK\n", "\nOK\n"} {
		if !strings.Contains(report, want) {
			t.Fatalf("report lacks %q:\n%s", want, report)
		}
	}

	exampletest.RequireQuoted(t, "../../SECURITY.md", "redis.acl")
	redistest.RequireLeastPrivilege(t, user, "redkit:stock:v1:{x}:sku:x", nil)
}
