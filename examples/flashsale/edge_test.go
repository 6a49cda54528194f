package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
)

// The tests below run the service as main does, over real sockets, and look
// at it from outside: what a client without a key, with the wrong scope,
// with a slow body or with too many requests gets.

// noKeys clears the environment variables that give keys.
func noKeys(t *testing.T) {
	t.Setenv(app.KeysEnv, "")
	t.Setenv(app.KeysFileEnv, "")
}

// With no keys configured, -serve on a loopback address makes an admin key
// and prints it once; every route refuses a request without it.
func TestRun_serve_generatedKey(t *testing.T) {
	noKeys(t)
	t.Setenv(redisconn.Env, "")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	if svc.AdminKey == "" {
		t.Fatalf("no admin key printed:\n%s", svc.Log)
	}
	anon := exampletest.NewClient(t, svc.URL)
	for _, r := range []exampletest.Reply{
		anon.Do("POST", "/skus", "", `{"sku":"phone","stock":1}`),
		anon.Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`),
		anon.Get("/skus/phone"),
		anon.As("rk_not-a-key").Do("POST", "/skus", "", `{"sku":"phone","stock":1}`),
		anon.As(svc.AdminKey + "x").Get("/skus/phone"),
	} {
		r.Want(t, http.StatusUnauthorized, "unauthenticated")
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate: %v", r.Header)
		}
	}
	admin := anon.As(svc.AdminKey)
	admin.Get("/skus/phone").Want(t, http.StatusNotFound, "sku_not_found") // nothing was created
	admin.Do("POST", "/skus", "", `{"sku":"phone","stock":1}`).Want(t, http.StatusCreated, "")
	if m := admin.Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, 200, "").JSON(t); m["buyer"] != "admin" {
		t.Fatalf("the admin key's order is bought by %v, want admin", m["buyer"])
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svc.Log.String(), svc.AdminKey); n != 1 {
		t.Fatalf("the admin key appears %d times on stderr, want once (the banner):\n%s", n, svc.Log)
	}
}

// Without keys, -serve on any address but loopback refuses to start and
// says how to give keys.
func TestRun_serve_refusesExposedWithoutKeys(t *testing.T) {
	noKeys(t)
	t.Setenv(redisconn.Env, "")
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "example.com:0"} {
		var stderr bytes.Buffer
		err := run(t.Context(), []string{"-serve", addr}, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "refusing to serve") || !strings.Contains(err.Error(), "-keys") {
			t.Errorf("-serve %s: %v, want a refusal that says how to give keys", addr, err)
		}
		if strings.Contains(stderr.String(), "Bearer") {
			t.Errorf("-serve %s printed a key:\n%s", addr, &stderr)
		}
	}
}

// Each route needs its scope; the buyer is the key's principal, so one
// principal cannot pass a limit of 1 by naming other buyers; no key shows
// up in the log.
func TestRun_serve_scopes(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy", "bob:buy", "auditor:read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	if svc.AdminKey != "" {
		t.Fatal("a key was generated although keys were given")
	}
	c := exampletest.NewClient(t, svc.URL)
	shop, alice, bob, auditor := c.As(keys["shop"]), c.As(keys["alice"]), c.As(keys["bob"]), c.As(keys["auditor"])

	alice.Do("POST", "/skus", "", `{"sku":"phone","stock":5,"limit":1}`).Want(t, http.StatusForbidden, "forbidden")
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":5,"limit":1}`).Want(t, http.StatusCreated, "")
	shop.Do("POST", "/skus/phone/orders", "s-1", `{"qty":1}`).Want(t, http.StatusForbidden, "forbidden")
	auditor.Do("POST", "/skus/phone/orders", "x-1", `{"qty":1}`).Want(t, http.StatusForbidden, "forbidden")
	alice.Get("/skus/phone").Want(t, http.StatusForbidden, "forbidden")
	auditor.Get("/skus/phone").Want(t, http.StatusOK, "")

	if m := alice.Do("POST", "/skus/phone/orders", "a-1", `{"qty":1}`).Want(t, 200, "").JSON(t); m["buyer"] != "alice" {
		t.Fatalf("alice's order is bought by %v", m["buyer"])
	}
	// Naming another buyer is no way around the limit: the field does not
	// exist, and without it the order is alice's.
	for i, body := range []string{`{"buyer":"bob","qty":1}`, `{"buyer":"carol","qty":1}`} {
		alice.Do("POST", "/skus/phone/orders", "a-x"+strconv.Itoa(i), body).Want(t, http.StatusBadRequest, "malformed")
	}
	alice.Do("POST", "/skus/phone/orders", "a-2", `{"qty":1}`).Want(t, http.StatusUnprocessableEntity, "buyer_limit")
	alice.Do("POST", "/skus/phone/reservations", "a-3", `{"qty":1}`).Want(t, http.StatusUnprocessableEntity, "buyer_limit")
	bob.Do("POST", "/skus/phone/orders", "b-1", `{"qty":1}`).Want(t, 200, "")
	// A reservation is confirmed by its buyer only: to anyone else its ID
	// names no order of theirs.
	bob.Do("POST", "/skus/phone/orders", "b-2", `{"qty":1}`).Want(t, http.StatusUnprocessableEntity, "buyer_limit")
	shop.Do("POST", "/skus/phone/orders/b-1/refund", "", `{"buyer":"bob","qty":1}`).Want(t, 200, "")
	bob.Do("POST", "/skus/phone/reservations", "b-3", `{"qty":1}`).Want(t, 200, "")
	alice.Do("POST", "/skus/phone/reservations/b-3/confirm", "", `{"qty":1}`).Want(t, http.StatusNotFound, "order_not_found")
	bob.Do("POST", "/skus/phone/reservations/b-3/confirm", "", `{"qty":1}`).Want(t, 200, "")

	lv := auditor.Get("/skus/phone").Want(t, 200, "").JSON(t)
	if lv["sold"] != 3.0 || lv["refunded"] != 1.0 {
		t.Fatalf("levels %v: want alice's 1 and bob's 2 sold, one refunded", lv)
	}
	svc.RequireNoKeyLogged(t, keys)
}

// -new-key prints a key and its stored line; the line in a -keys file lets
// the key in, and the key itself is not in the file.
func TestRun_newKey(t *testing.T) {
	noKeys(t)
	t.Setenv(redisconn.Env, "")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-new-key", "alice:buy,read"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)^API key.*?\n  (rk_\S+)\n.*\n  (sha256:\S+ alice buy,read)\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("-new-key printed:\n%s", &out)
	}
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(m[2]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-keys", file)
	if svc.AdminKey != "" {
		t.Fatal("a key was generated although a keys file was given")
	}
	exampletest.NewClient(t, svc.URL).As(m[1]).Get("/skus/phone").Want(t, http.StatusNotFound, "sku_not_found")

	for _, spec := range []string{"alice", "alice:fly", "a b:buy", "alice:"} {
		if err := run(t.Context(), []string{"-new-key", spec}, io.Discard, io.Discard); !errors.Is(err, app.ErrUsage) {
			t.Errorf("-new-key %q: %v, want ErrUsage", spec, err)
		}
	}
}

// A client that trickles its body is cut off once the read timeout is
// over, instead of holding its connection for as long as it likes.
func TestRun_serve_slowBodyCut(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	keys := exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-read-timeout", "500ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const bodyLen = 200 // at one byte per 50 ms, 10 s: far past the read timeout
	if _, err := io.WriteString(conn, "POST /skus HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keys["shop"]+
		"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(bodyLen)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- line
	}()
	sent := 0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
trickle:
	for ; sent < bodyLen; sent++ {
		select {
		case line := <-answered:
			t.Logf("cut after %d of %d body bytes: %q", sent, bodyLen, line)
			break trickle
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				t.Logf("cut after %d of %d body bytes: %v", sent, bodyLen, err)
				break trickle
			}
		}
	}
	if sent == bodyLen {
		t.Fatalf("the whole body was trickled in without the server cutting the connection")
	}
}

// Request headers are bounded: 32 KiB of them is refused before any
// handler runs.
func TestRun_serve_headerLimit(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	keys := exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, svc.URL+"/skus/phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keys["shop"])
	req.Header.Set("X-Padding", strings.Repeat("x", 32<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("32 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// Past -max-in-flight, a request is answered 503 with Retry-After at once
// instead of queueing behind requests that wait on Redis.
func TestRun_serve_inFlightBound(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	// A long read timeout keeps the requests whose replies are dropped
	// waiting, in flight, until the test lets them go.
	t.Setenv(redisconn.Env, "redis://"+px.Addr()+"/?read_timeout=60s")
	keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy", "bob:buy", "carol:buy")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-max-in-flight", "2", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	c.As(keys["shop"]).Do("POST", "/skus", "", `{"sku":"phone","stock":10}`).Want(t, http.StatusCreated, "")
	c.As(keys["carol"]).Do("POST", "/skus/phone/orders", "c-0", `{"qty":1}`).Want(t, 200, "") // loads the script

	px.DropReplies(true)
	var wg sync.WaitGroup
	for _, who := range []string{"alice", "bob"} {
		wg.Go(func() { _, _ = c.As(keys[who]).Try("POST", "/skus/phone/orders", who+"-1", `{"qty":1}`) })
	}
	// Both requests are in flight, waiting for replies that never come.
	for c.Get("/healthz").Want(t, http.StatusOK, "").JSON(t)["in_flight"] != 2.0 {
		time.Sleep(10 * time.Millisecond)
	}
	r := c.As(keys["carol"]).Do("POST", "/skus/phone/orders", "c-1", `{"qty":1}`).Want(t, http.StatusServiceUnavailable, "overloaded")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After: %v", r.Header)
	}
	// Health is outside the bound: an orchestrator still gets its answer.
	c.Get("/healthz").Want(t, http.StatusOK, "")

	px.DropReplies(false)
	px.ResetConnections() // the waiting requests fail over to new connections and finish
	wg.Wait()
	c.As(keys["carol"]).Do("POST", "/skus/phone/orders", "c-1", `{"qty":1}`).Want(t, 200, "")
}

// Buys count against the buyer's rate limit, kept in Redis (the embedded
// one too): past it, 429 with Retry-After; other buyers are not held back.
func TestRun_serve_rateLimit(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv(redisconn.Env, redisURL)
		keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy", "bob:buy")
		svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "2/h")
		c := exampletest.NewClient(t, svc.URL)
		alice, bob := c.As(keys["alice"]), c.As(keys["bob"])
		c.As(keys["shop"]).Do("POST", "/skus", "", `{"sku":"phone","stock":10}`).Want(t, http.StatusCreated, "")
		alice.Do("POST", "/skus/phone/orders", "a-1", `{"qty":1}`).Want(t, 200, "")
		alice.Do("POST", "/skus/phone/reservations", "a-2", `{"qty":1}`).Want(t, 200, "")
		r := alice.Do("POST", "/skus/phone/orders", "a-3", `{"qty":1}`).Want(t, http.StatusTooManyRequests, "rate_limited")
		if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
			t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
		}
		bob.Do("POST", "/skus/phone/orders", "b-1", `{"qty":1}`).Want(t, 200, "")
		// Reads are not metered.
		c.As(keys["shop"]).Get("/skus/phone").Want(t, 200, "")
		if got := c.As(keys["shop"]).Get("/skus/phone").JSON(t)["sold"]; got != 2.0 {
			t.Fatalf("sold %v, want 2: the refused order must not run", got)
		}
	})
}

// /readyz is 503 while Redis does not answer and 200 again once it does;
// /healthz answers all along. Neither needs a key.
func TestRun_serve_readyz(t *testing.T) {
	s := redistest.New(t, redistest.Options{AOF: true})
	t.Setenv(redisconn.Env, "redis://"+s.Addr()+"/?read_timeout=500ms")
	exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	c := exampletest.NewClient(t, svc.URL)
	c.Get("/readyz").Want(t, http.StatusOK, "")
	c.Get("/healthz").Want(t, http.StatusOK, "")

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	r := c.Get("/readyz").Want(t, http.StatusServiceUnavailable, "not_ready")
	if strings.Contains(r.Body, s.Addr()) {
		t.Errorf("/readyz tells anyone where Redis is: %s", r.Body)
	}
	c.Get("/healthz").Want(t, http.StatusOK, "")
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	for c.Get("/readyz").Status != http.StatusOK {
		time.Sleep(50 * time.Millisecond)
	}
}

// A critical finding of the module's Check (keys may be evicted) keeps
// /readyz at 503 and says which setting.
func TestRun_serve_readyzCriticalSetting(t *testing.T) {
	s := redistest.New(t, redistest.Options{AOF: true, MaxmemoryPolicy: "allkeys-lru"})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	r := exampletest.NewClient(t, svc.URL).Get("/readyz").Want(t, http.StatusServiceUnavailable, "not_ready")
	if !strings.Contains(r.Problem.Error, "maxmemory-policy") {
		t.Fatalf("/readyz does not name the setting: %s", r.Body)
	}
}

// TestRun_serve_unknownOutcome runs the service as main does, on go-redis's
// default retries, through a proxy that drops every reply: the order runs
// in Redis, the reply never comes, and the buyer is told 503 with
// Retry-After to send the same request again with the same
// Idempotency-Key, which then returns the order, sold once.
func TestRun_serve_unknownOutcome(t *testing.T) {
	keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy")
	// No rate limit: its call to Redis would be the first to lose its
	// reply, and this test is about the order's.
	svc, px := exampletest.ServeBehindProxy(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	shop, alice := c.As(keys["shop"]), c.As(keys["alice"])
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":5}`).Want(t, http.StatusCreated, "")
	alice.Do("POST", "/skus/phone/orders", "o-0", `{"qty":1}`).Want(t, 200, "") // loads the script

	again := exampletest.LoseReply(t, px, func() exampletest.Reply {
		return alice.Do("POST", "/skus/phone/orders", "o-1", `{"qty":3}`)
	}).Want(t, 200, "")
	if !again.Replayed() {
		t.Fatal("the order ran before its reply was lost, but the repeat is not marked replayed")
	}
	if got := shop.Get("/skus/phone").Want(t, 200, "").JSON(t)["sold"]; got != 4.0 {
		t.Fatalf("sold %v, want 1+3: the order applied once", got)
	}
}
