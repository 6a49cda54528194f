package main

import (
	"net/http"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
)

// Creating money needs accounts:admin, moving it payments, looking at it
// read; without a key nothing is done at all.
func TestRun_serve_scopes(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "checkout:payments", "support:read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout, support := c.As(keys["treasury"]), c.As(keys["checkout"]), c.As(keys["support"])

	c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, http.StatusUnauthorized, "unauthenticated")
	for _, who := range []*exampletest.Client{checkout, support} {
		who.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, http.StatusForbidden, "forbidden")
	}
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/bob","currency":"EUR"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/grants", "", `{"principal":"support"}`).Want(t, http.StatusOK, "")

	// Anyone who reaches the port used to be able to create money.
	credit := acct(alice) + "/credits"
	c.Do("POST", credit, "free-money", `{"amount":1000000}`).Want(t, http.StatusUnauthorized, "unauthenticated")
	c.As("rk_guess").Do("POST", credit, "free-money", `{"amount":1000000}`).Want(t, http.StatusUnauthorized, "unauthenticated")
	checkout.Do("POST", credit, "free-money", `{"amount":1000000}`).Want(t, http.StatusForbidden, "forbidden")
	support.Do("POST", credit, "free-money", `{"amount":1000000}`).Want(t, http.StatusForbidden, "forbidden")
	treasury.Do("POST", credit, "topup-1", `{"amount":1000}`).Want(t, http.StatusCreated, "")

	support.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":100}`).Want(t, http.StatusForbidden, "forbidden")
	treasury.Do("POST", "/transfers", "t-1", `{"from":"shop-7/alice","to":"shop-7/bob","amount":100}`).Want(t, http.StatusForbidden, "forbidden")
	checkout.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":100}`).Want(t, http.StatusCreated, "")
	checkout.Do("POST", "/transfers", "t-1", `{"from":"shop-7/alice","to":"shop-7/bob","amount":100}`).Want(t, http.StatusCreated, "")
	checkout.Do("POST", acct(alice)+"/holds", "h-1", `{"amount":100,"ttl":"1m"}`).Want(t, http.StatusCreated, "")
	checkout.Do("POST", acct(alice)+"/holds/h-1/void", "", "").Want(t, http.StatusOK, "")
	checkout.Get(acct(alice)).Want(t, http.StatusForbidden, "forbidden")

	b := exampletest.Decode[balance](t, support.Get(acct(alice)).Want(t, http.StatusOK, ""))
	if b.Posted != 800 || b.Held != 0 {
		t.Fatalf("alice: %+v, want 1000 credited, 100 debited, 100 sent to bob", b)
	}
	support.Get(acct(alice)+"/entries").Want(t, http.StatusOK, "")
	svc.RequireNoKeyLogged(t, keys)
}

// Payments count against the principal's rate limit; the 429 comes before
// any Redis work of the payment, so the debit did not happen.
func TestRun_serve_rateLimit(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "checkout:payments", "refunds:payments")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "1/h")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout := c.As(keys["treasury"]), c.As(keys["checkout"])
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/grants", "", `{"principal":"refunds"}`).Want(t, http.StatusOK, "")
	treasury.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":1000}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/credits", "c-2", `{"amount":1000}`).Want(t, http.StatusCreated, "") // not metered
	checkout.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":100}`).Want(t, http.StatusCreated, "")
	r := checkout.Do("POST", acct(alice)+"/debits", "d-2", `{"amount":100}`).Want(t, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.Header)
	}
	c.As(keys["refunds"]).Do("POST", acct(alice)+"/debits", "d-3", `{"amount":100}`).Want(t, http.StatusCreated, "")
	if b := exampletest.Decode[balance](t, treasury.Get(acct(alice)).Want(t, 200, "")); b.Posted != 1800 {
		t.Fatalf("posted %d, want 1800: the refused debit must not run", b.Posted)
	}
}

// TestRun_serve_unknownOutcome runs the service as main does, on go-redis's
// default retries, through a proxy that drops every reply: the debit runs in
// Redis, the reply never comes, and the client is told 503 with
// Retry-After to send the same request again with the same
// Idempotency-Key, which then returns the debit's result, applied once.
func TestRun_serve_unknownOutcome(t *testing.T) {
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "checkout:payments")
	// No rate limit: its call to Redis would be the first to lose its
	// reply, and this test is about the debit's.
	svc, px := exampletest.ServeBehindProxy(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout := c.As(keys["treasury"]), c.As(keys["checkout"])
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":999}`).Want(t, http.StatusCreated, "")
	checkout.Do("POST", acct(alice)+"/debits", "d-0", `{"amount":1}`).Want(t, http.StatusCreated, "") // loads the script

	again := exampletest.LoseReply(t, px, func() exampletest.Reply {
		return checkout.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":300}`)
	}).Want(t, http.StatusCreated, "")
	if !again.Replayed() {
		t.Fatal("the debit ran before its reply was lost, but the repeat is not marked replayed")
	}
	if b := exampletest.Decode[txResponse](t, again).Balance; b.Posted != 698 {
		t.Fatalf("posted %d after the repeat, want 999-1-300 = 698 (the debit applied once)", b.Posted)
	}
}
