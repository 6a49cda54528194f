package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/redistest"
)

// The template runs as the user of its redis.acl (SECURITY.md), on a
// redis-server that loads that file: it starts, leases a node, serves
// every route (with a rate limit, so the limiter's keys too), and the user
// may do nothing else.
func TestACL_leastPrivilege(t *testing.T) {
	srv, user := exampletest.ACLUser(t, "redis.acl")
	keys := exampletest.WithKeys(t, "checkout:"+scopeIDs)
	svc := exampletest.Serve(t, run, "-addr", "127.0.0.1:0", "-rate-limit", "1000/s", "-lease-ttl", "2s")
	c := exampletest.NewClient(t, svc.URL)
	checkout := c.As(keys["checkout"])

	c.Get("/healthz").Want(t, 200, "")
	c.Get("/readyz").Want(t, 200, "")
	mustIDs(t, checkout.Get("/id/snowflake?n=10").Want(t, 200, ""))
	mustIDs(t, checkout.Get("/id/segment/orders?n=10").Want(t, 200, ""))
	mustIDs(t, checkout.Get("/id/sequence/invoices").Want(t, 200, ""))
	first := exampletest.Decode[statusBody](t, checkout.Get("/status").Want(t, 200, "")).Snowflake
	// A renewal as the user (every third of the 2s TTL).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		now := exampletest.Decode[statusBody](t, checkout.Get("/status").Want(t, 200, "")).Snowflake
		if now.LeaseError != "" {
			t.Fatalf("renewal: %s", now.LeaseError)
		}
		if now.LeaseRenewed.After(*first.LeaseRenewed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal in 30s of a lease with a 2s TTL: %+v", now)
		}
	}
	svc.RequireNoKeyLogged(t, keys)
	if log := svc.Log.String(); !strings.Contains(log, "idservice: stopped") || strings.Contains(log, "idservice: release") {
		t.Fatalf("no clean stop, or the node lease was not released:\n%s", log)
	}
	if n := srv.Client().Exists(t.Context(), "rate:idservice:{checkout}").Val(); n != 1 {
		t.Fatalf("no rate-limit key of checkout: the limiter did not run")
	}

	exampletest.RequireQuoted(t, "../../SECURITY.md", "redis.acl")
	redistest.RequireLeastPrivilege(t, user, "redkit:stock:v1:{x}:sku:x", nil)
}
