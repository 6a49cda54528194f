package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
)

// The tests below run the service as main does, on a real redis-server,
// and try what the README's "Before you expose a template" promises.

// With Redis paused (SIGSTOP) and go-redis on its defaults, every request
// is answered before the write timeout: a write whose outcome is unknown is
// 503 unknown_outcome with Retry-After and the advice to repeat with the
// same Idempotency-Key, a read 503 unavailable. Repeated once Redis is
// back, the writes are applied once.
func TestRun_serve_pausedRedis(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	// Default flags (a write timeout of 15 s, so a request deadline of
	// 12 s), and a read timeout far past them: a client that waited for it
	// would leave the requests without an answer.
	t.Setenv(redisconn.Env, "redis://"+s.Addr()+"/?read_timeout=30s")
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "checkout:payments,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout := c.As(keys["treasury"]), c.As(keys["checkout"])
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/bob","currency":"EUR"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":1000}`).Want(t, http.StatusCreated, "")
	checkout.Do("POST", acct(alice)+"/debits", "d-0", `{"amount":1}`).Want(t, http.StatusCreated, "") // loads the script

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Resume() })
	type call struct {
		who               *exampletest.Client
		method, path, key string
		body, code        string
	}
	calls := []call{
		{checkout, "POST", acct(alice) + "/debits", "d-1", `{"amount":100}`, "unknown_outcome"},
		{checkout, "POST", "/transfers", "t-1", `{"from":"shop-7/alice","to":"shop-7/bob","amount":50}`, "unknown_outcome"},
		{treasury, "POST", acct(bob) + "/credits", "c-2", `{"amount":70}`, "unknown_outcome"},
		{checkout, "GET", acct(alice), "", "", "unavailable"},
		{treasury, "GET", acct(bob) + "/entries", "", "", "unavailable"},
		// The owner's record is written first: it may be applied on
		// resume, so the open's outcome is unknown too.
		{treasury, "POST", "/accounts", "", `{"id":"shop-7/carol","currency":"EUR","owner":"checkout"}`, "unknown_outcome"},
	}
	replies := make([]exampletest.Reply, len(calls))
	var wg sync.WaitGroup
	for i, cl := range calls {
		wg.Go(func() {
			r, err := cl.who.Try(cl.method, cl.path, cl.key, cl.body)
			if err != nil {
				t.Errorf("%s %s with Redis paused: no answer: %v", cl.method, cl.path, err)
			}
			replies[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, cl := range calls {
		r := replies[i].Want(t, http.StatusServiceUnavailable, cl.code)
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", cl.method, cl.path)
		}
		if cl.code == "unknown_outcome" && !strings.Contains(r.Problem.Error, "same Idempotency-Key") {
			t.Errorf("%s %s: no advice to repeat with the same key: %s", cl.method, cl.path, r.Body)
		}
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range calls[:3] {
		cl.who.Do(cl.method, cl.path, cl.key, cl.body).Want(t, http.StatusCreated, "")
	}
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/carol","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	if b := exampletest.Decode[balance](t, checkout.Get(acct(alice)).Want(t, http.StatusOK, "")); b.Posted != 1000-1-100-50 {
		t.Fatalf("alice posted %d, want 849: the debit and the transfer applied once each", b.Posted)
	}
	if b := exampletest.Decode[balance](t, treasury.Get(acct(bob)).Want(t, http.StatusOK, "")); b.Posted != 50+70 {
		t.Fatalf("bob posted %d, want 120", b.Posted)
	}
}

// With Redis down, every route answers 503 to a key holder, and no body
// tells where Redis is or what the connection said (the client fails the
// test on any such body); the log does.
func TestRun_serve_redisDownTellsNothing(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,payments,read", "checkout:payments,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, checkout := c.As(keys["treasury"]), c.As(keys["checkout"])
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"checkout"}`).Want(t, http.StatusCreated, "")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(s.Port())
	for _, who := range []*exampletest.Client{treasury, checkout} {
		for _, r := range []exampletest.Reply{
			who.Do("POST", "/accounts", "", `{"id":"shop-7/carol","currency":"EUR"}`),
			who.Do("POST", acct(alice)+"/grants", "", `{"principal":"x"}`),
			who.Get(acct(alice)),
			who.Get(acct(alice) + "/entries"),
			who.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":1}`),
			who.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":1}`),
			who.Do("POST", "/transfers", "t-1", `{"from":"shop-7/alice","to":"shop-7/bob","amount":1}`),
			who.Do("POST", acct(alice)+"/holds", "h-1", `{"amount":1,"ttl":"1m"}`),
			who.Do("POST", acct(alice)+"/holds/h-1/capture", "", `{"amount":1}`),
			who.Do("POST", acct(alice)+"/holds/h-1/void", "", ""),
			c.Get("/readyz"),
		} {
			if r.Status != http.StatusServiceUnavailable && r.Status != http.StatusForbidden {
				t.Errorf("with Redis down: %d %s, want 503 (or 403 for a scope the key lacks)", r.Status, r.Body)
			}
			if strings.Contains(r.Body, port) {
				t.Errorf("the body tells Redis's port %s: %s", port, r.Body)
			}
		}
	}
	if !strings.Contains(svc.Log.String(), s.Addr()) {
		t.Errorf("the log does not tell the operator where Redis is:\n%s", svc.Log)
	}
}

// An account belongs to the principal it was opened for: another principal
// with payments and read gets, on every route, the answer an account that
// does not exist gets, and changes nothing; a grant lets it in, and taking
// the grant back shuts it out again. Admins act on every account.
func TestRun_serve_accountOwners(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "alice-app:payments,read", "mallory:payments,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, owner, mallory := c.As(keys["treasury"]), c.As(keys["alice-app"]), c.As(keys["mallory"])

	r := treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"alice-app"}`).Want(t, http.StatusCreated, "")
	if b := exampletest.Decode[balance](t, r); b.Owner != "alice-app" {
		t.Fatalf("opened for %q, want alice-app", b.Owner)
	}
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/mallory","currency":"EUR","owner":"mallory"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"mallory"}`).Want(t, http.StatusConflict, "conflict")
	treasury.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":1000}`).Want(t, http.StatusCreated, "")
	owner.Do("POST", acct(alice)+"/holds", "h-1", `{"amount":100,"ttl":"10m"}`).Want(t, http.StatusCreated, "")

	// Every route, on alice's account and on one that does not exist: the
	// same answer, word for word.
	routes := func(account string) []exampletest.Reply {
		return []exampletest.Reply{
			mallory.Get(acct(account)),
			mallory.Get(acct(account) + "/entries"),
			mallory.Do("POST", acct(account)+"/debits", "d-1", `{"amount":100}`),
			mallory.Do("POST", "/transfers", "t-1", fmt.Sprintf(`{"from":%q,"to":"shop-7/mallory","amount":100}`, account)),
			mallory.Do("POST", acct(account)+"/holds", "h-2", `{"amount":100,"ttl":"10m"}`),
			mallory.Do("POST", acct(account)+"/holds/h-1/capture", "", `{"amount":100}`),
			mallory.Do("POST", acct(account)+"/holds/h-1/void", "", ""),
		}
	}
	theirs, nobodys := routes(alice), routes("shop-7/nobody")
	for i, r := range theirs {
		r.Want(t, http.StatusNotFound, "account_not_found")
		if r.Body != nobodys[i].Body {
			t.Errorf("route %d: another's account answers %s, one that does not exist %s", i, r.Body, nobodys[i].Body)
		}
	}
	mallory.Do("POST", acct(alice)+"/credits", "c-2", `{"amount":1}`).Want(t, http.StatusForbidden, "forbidden")
	mallory.Do("POST", acct(alice)+"/grants", "", `{"principal":"mallory"}`).Want(t, http.StatusForbidden, "forbidden")
	b := exampletest.Decode[balance](t, owner.Get(acct(alice)).Want(t, http.StatusOK, ""))
	if b.Posted != 1000 || b.Held != 100 {
		t.Fatalf("alice's account %+v: want 1000 posted, 100 held, as before mallory's attempts", b)
	}
	// The hold is the owner's to capture.
	owner.Do("POST", acct(alice)+"/holds/h-1/capture", "", `{"amount":100}`).Want(t, http.StatusOK, "")

	// A grant lets mallory in; taking it back shuts mallory out again.
	g := exampletest.Decode[access](t, treasury.Do("POST", acct(alice)+"/grants", "", `{"principal":"mallory"}`).Want(t, http.StatusOK, ""))
	if g.Owner != "alice-app" || len(g.Grants) != 1 || g.Grants[0] != "mallory" {
		t.Fatalf("after the grant: %+v", g)
	}
	mallory.Get(acct(alice)).Want(t, http.StatusOK, "")
	mallory.Do("POST", acct(alice)+"/debits", "d-3", `{"amount":10}`).Want(t, http.StatusCreated, "")
	treasury.Do("DELETE", acct(alice)+"/grants/mallory", "", "").Want(t, http.StatusOK, "")
	mallory.Get(acct(alice)).Want(t, http.StatusNotFound, "account_not_found")
	mallory.Do("POST", acct(alice)+"/debits", "d-4", `{"amount":10}`).Want(t, http.StatusNotFound, "account_not_found")

	// Admins read every account.
	if b := exampletest.Decode[balance](t, treasury.Get(acct(alice)).Want(t, http.StatusOK, "")); b.Posted != 890 || b.Owner != "alice-app" {
		t.Fatalf("alice's account %+v: want 1000-100-10 = 890 posted", b)
	}
	// A transfer may pay into another's account.
	owner.Do("POST", "/transfers", "t-2", `{"from":"shop-7/alice","to":"shop-7/mallory","amount":5}`).Want(t, http.StatusCreated, "")
}

// An idempotency key belongs to the principal that sends it: two
// principals with the same key make two transactions, and neither learns
// anything of the other's; a statement shows the caller's own keys only.
func TestRun_serve_keysPerPrincipal(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,read", "alice-app:payments,read", "bob-app:payments,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, a, b := c.As(keys["treasury"]), c.As(keys["alice-app"]), c.As(keys["bob-app"])
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","owner":"alice-app"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/bob","currency":"EUR","owner":"bob-app"}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(alice)+"/grants", "", `{"principal":"bob-app"}`).Want(t, http.StatusOK, "")
	treasury.Do("POST", acct(alice)+"/credits", "k-1", `{"amount":1000}`).Want(t, http.StatusCreated, "")
	treasury.Do("POST", acct(bob)+"/credits", "k-0", `{"amount":1000}`).Want(t, http.StatusCreated, "")

	// The same key on one account (bob-app was granted alice's), with
	// other amounts: two debits, neither a replay nor a conflict.
	first := a.Do("POST", acct(alice)+"/debits", "k-1", `{"amount":100}`).Want(t, http.StatusCreated, "")
	second := b.Do("POST", acct(alice)+"/debits", "k-1", `{"amount":7}`).Want(t, http.StatusCreated, "")
	if first.Replayed() || second.Replayed() {
		t.Fatal("a debit under another principal's key was answered as a replay")
	}
	b.Do("POST", acct(bob)+"/debits", "k-1", `{"amount":1}`).Want(t, http.StatusConflict, "conflict") // bob-app's own k-1
	if r := a.Do("POST", acct(alice)+"/debits", "k-1", `{"amount":100}`).Want(t, http.StatusCreated, ""); !r.Replayed() {
		t.Fatal("alice-app's repeat is not its replay")
	}
	// Holds: bob-app cannot capture alice-app's hold by its key.
	a.Do("POST", acct(alice)+"/holds", "h-1", `{"amount":10,"ttl":"10m"}`).Want(t, http.StatusCreated, "")
	b.Do("POST", acct(alice)+"/holds/h-1/capture", "", `{"amount":10}`).Want(t, http.StatusNotFound, "hold_not_found")
	b.Do("POST", acct(alice)+"/holds", "h-1", `{"amount":20,"ttl":"10m"}`).Want(t, http.StatusCreated, "")

	if got := exampletest.Decode[balance](t, a.Get(acct(alice)).Want(t, http.StatusOK, "")); got.Posted != 893 || got.Held != 30 {
		t.Fatalf("alice's account %+v: want 1000-100-7 = 893 posted and both holds", got)
	}
	st := exampletest.Decode[statement](t, a.Get(acct(alice)+"/entries").Want(t, http.StatusOK, ""))
	var shown []string
	for _, e := range st.Entries {
		if e.TxID != "" {
			shown = append(shown, e.Kind+" "+e.TxID)
		}
	}
	if strings.Join(shown, ",") != "debit k-1,hold h-1" {
		t.Fatalf("alice-app's statement shows the keys %q, want its own only: debit k-1, hold h-1", shown)
	}
}

// What clients send (Host, paths, IDs, headers, methods) never becomes a
// series: 1,000 requests with distinct ones leave /metrics as it was, and
// /metrics, which needs metrics:read, names no Redis address.
func TestRun_serve_boundedSeries(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "")
	keys := exampletest.WithKeys(t, "treasury:accounts:admin,payments,read", "scraper:metrics:read")
	// No recovery worker: its runs would add their series whenever they
	// come, clients or not.
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0", "-recover-every", "0")
	c := exampletest.NewClient(t, svc.URL)
	treasury, scraper := c.As(keys["treasury"]), c.As(keys["scraper"])
	treasury.Get("/metrics").Want(t, http.StatusForbidden, "forbidden")
	c.Get("/metrics").Want(t, http.StatusUnauthorized, "unauthenticated")
	treasury.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, http.StatusCreated, "")

	exampletest.RequireBoundedSeries(t, treasury, scraper, func(c *exampletest.Client, i int) error {
		id := fmt.Sprintf("shop-%d/acct-%d", i, i)
		var err error
		switch i % 4 {
		case 0:
			_, err = c.Try("GET", acct(id), "", "")
		case 1:
			_, err = c.Try("POST", acct(id)+"/debits", fmt.Sprint("d-", i), `{"amount":1}`)
		case 2:
			_, err = c.Try("POST", acct(alice)+"/credits", fmt.Sprint("c-", i), `{"amount":1}`)
		case 3:
			_, err = c.Try("GET", acct(alice)+"/entries?limit=1&cursor="+strconv.Itoa(i), "", "")
		}
		return err
	})
	if _, body := scraper.MetricSeries(); strings.Contains(body, s.Addr()) || strings.Contains(body, strconv.Itoa(s.Port())) {
		t.Errorf("GET /metrics tells where Redis is (%s)", s.Addr())
	}
}
