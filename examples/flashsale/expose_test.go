package main

import (
	"bufio"
	"fmt"
	"net"
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

// With Redis paused (SIGSTOP), every request is answered before the write
// timeout: an order or a reservation, whose outcome is unknown, 503
// unknown_outcome with Retry-After and the advice to repeat with the same
// Idempotency-Key; a read 503 unavailable. Repeated once Redis is back,
// each order is applied once.
func TestRun_serve_pausedRedis(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	// Default flags (a write timeout of 15 s, so a request deadline of
	// 12 s), and a read timeout far past them: a client that waited for it
	// would leave the requests without an answer.
	t.Setenv(redisconn.Env, "redis://"+s.Addr()+"/?read_timeout=30s")
	keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	shop, alice := c.As(keys["shop"]), c.As(keys["alice"])
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":10}`).Want(t, http.StatusCreated, "")
	alice.Do("POST", "/skus/phone/orders", "o-0", `{"qty":1}`).Want(t, http.StatusOK, "")       // loads the script
	alice.Do("POST", "/skus/phone/reservations", "r-0", `{"qty":1}`).Want(t, http.StatusOK, "") // and this one

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
		{alice, "POST", "/skus/phone/orders", "o-1", `{"qty":2}`, "unknown_outcome"},
		{alice, "POST", "/skus/phone/reservations", "r-1", `{"qty":1}`, "unknown_outcome"},
		{shop, "GET", "/skus/phone", "", "", "unavailable"},
		{shop, "GET", "/skus/phone/audit", "", "", "unavailable"},
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
	for _, cl := range calls[:2] {
		cl.who.Do(cl.method, cl.path, cl.key, cl.body).Want(t, http.StatusOK, "")
	}
	lv := shop.Get("/skus/phone").Want(t, http.StatusOK, "").JSON(t)
	if lv["sold"] != 3.0 || lv["reserved"] != 2.0 {
		t.Fatalf("levels %v: want 1+2 sold and 1+1 reserved, each order applied once", lv)
	}
}

// An order ID belongs to the buyer who sends it: another buyer using the
// same ID places an order of its own, never learns that the ID is taken or
// what the first order was, and cannot claim an ID before its owner uses
// it.
func TestRun_serve_orderIDsPerBuyer(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	keys := exampletest.WithKeys(t, "shop:sale:admin,read", "alice:buy", "bob:buy")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	shop, alice, bob := c.As(keys["shop"]), c.As(keys["alice"]), c.As(keys["bob"])
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":10}`).Want(t, http.StatusCreated, "")

	a := alice.Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, http.StatusOK, "")
	// The same ID, another quantity and kind: bob's own order, not a
	// conflict that would tell him alice's ID is taken, and how.
	b := bob.Do("POST", "/skus/phone/reservations", "o-1", `{"qty":2}`).Want(t, http.StatusOK, "")
	if a.Replayed() || b.Replayed() || b.JSON(t)["buyer"] != "bob" || b.JSON(t)["order"] != "o-1" {
		t.Fatalf("bob's o-1: %s", b.Body)
	}
	// Each repeat is its buyer's own.
	if r := alice.Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, http.StatusOK, ""); !r.Replayed() || r.Body != a.Body {
		t.Fatalf("alice's repeat: %s", r.Body)
	}
	bob.Do("POST", "/skus/phone/orders", "o-1", `{"qty":2}`).Want(t, http.StatusConflict, "conflict") // his o-1 is a reservation
	// Bob cannot settle alice's order by its ID: to him it names nothing.
	alice.Do("POST", "/skus/phone/reservations", "r-1", `{"qty":1}`).Want(t, http.StatusOK, "")
	bob.Do("POST", "/skus/phone/reservations/r-1/confirm", "", `{"qty":1}`).Want(t, http.StatusNotFound, "order_not_found")
	if r := bob.Do("POST", "/skus/phone/reservations/r-1/cancel", "", `{"qty":1}`); r.Status == http.StatusConflict || r.Status == http.StatusOK && r.JSON(t)["buyer"] != "bob" {
		t.Fatalf("bob's cancel of r-1 met alice's order: %d %s", r.Status, r.Body)
	}
	alice.Do("POST", "/skus/phone/reservations/r-1/confirm", "", `{"qty":1}`).Want(t, http.StatusOK, "")
	// Nor claim an ID before alice uses it.
	bob.Do("POST", "/skus/phone/orders", "next", `{"qty":1}`).Want(t, http.StatusOK, "")
	if r := alice.Do("POST", "/skus/phone/orders", "next", `{"qty":3}`).Want(t, http.StatusOK, ""); r.Replayed() {
		t.Fatal("alice's first order under an ID bob used is answered as a replay")
	}
	lv := shop.Get("/skus/phone").Want(t, http.StatusOK, "").JSON(t)
	if lv["sold"] != 6.0 || lv["reserved"] != 2.0 {
		t.Fatalf("levels %v: want 1+1+1+3 sold and bob's 2 reserved", lv)
	}
}

// "Request headers are limited to 16 KiB" means 16 KiB: a request whose
// request line and headers are 16,384 bytes is served, one byte more is
// 431, and so are 17 and 19 KiB (net/http alone adds 4,096 bytes of slack
// to its limit). A request pipelined behind another is held to the limit
// as net/http parsed it, and to 20 KiB as sent (the README says why).
func TestRun_serve_headerLimitExact(t *testing.T) {
	t.Setenv(redisconn.Env, "")
	exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	addr := strings.TrimPrefix(svc.URL, "http://")
	// send writes a request of exactly size bytes up to and including the
	// blank line after the headers, and returns the status it gets.
	send := func(size int) int {
		t.Helper()
		head := "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
		pad := size - len(head) - len("\r\n\r\n")
		req := head + strings.Repeat("p", pad) + "\r\n\r\n"
		if len(req) != size {
			t.Fatalf("built %d bytes, want %d", len(req), size)
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%d bytes of headers: %v", size, err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for size, want := range map[int]int{
		1024: http.StatusOK, 16 << 10: http.StatusOK,
		16<<10 + 1: http.StatusRequestHeaderFieldsTooLarge, 17 << 10: http.StatusRequestHeaderFieldsTooLarge,
		19 << 10: http.StatusRequestHeaderFieldsTooLarge, 32 << 10: http.StatusRequestHeaderFieldsTooLarge,
	} {
		if got := send(size); got != want {
			t.Errorf("%d bytes of request line and headers: %d, want %d", size, got, want)
		}
	}
	// A request read from bytes the server had buffered already (sent
	// right behind another on the same connection) is held to the limit
	// too.
	second := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", 17<<10) + "\r\n\r\n"
	pipelined := func(second string) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for i, want := range []int{http.StatusOK, http.StatusRequestHeaderFieldsTooLarge} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("pipelined request %d of %d bytes: %v", i+1, len(second), err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("pipelined request %d of %d bytes: %d, want %d", i+1, len(second), resp.StatusCode, want)
			}
		}
	}
	pipelined(second)
	// The bound the README states for such a request whose header values
	// are padded with spaces (which the check cannot see): past 20 KiB as
	// sent it is refused whatever it holds.
	pipelined("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat(" ", 6000) + strings.Repeat("p", 14600) + "\r\n\r\n")
}

// /readyz, which needs no key, says which setting is wrong but not where
// Redis is; the log tells the operator both.
func TestRun_serve_readyzNamesNoAddress(t *testing.T) {
	s := redistest.New(t, redistest.Options{MaxmemoryPolicy: "allkeys-lru"})
	t.Setenv(redisconn.Env, "redis://"+s.Addr())
	exampletest.WithKeys(t, "shop:sale:admin,read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
	r := exampletest.NewClient(t, svc.URL).Get("/readyz").Want(t, http.StatusServiceUnavailable, "not_ready")
	if !strings.Contains(r.Problem.Error, "maxmemory-policy") || !strings.Contains(r.Problem.Error, "appendonly") {
		t.Errorf("/readyz does not name the settings: %s", r.Body)
	}
	if strings.Contains(r.Body, strconv.Itoa(s.Port())) {
		t.Errorf("/readyz tells anyone Redis's port %d: %s", s.Port(), r.Body)
	}
	if !strings.Contains(svc.Log.String(), s.Addr()) {
		t.Errorf("the log does not tell the operator which server:\n%s", svc.Log)
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
	keys := exampletest.WithKeys(t, "shop:sale:admin,read,buy", "scraper:metrics:read")
	svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0", "-rate-limit", "0")
	c := exampletest.NewClient(t, svc.URL)
	shop, scraper := c.As(keys["shop"]), c.As(keys["scraper"])
	shop.Get("/metrics").Want(t, http.StatusForbidden, "forbidden")
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":5}`).Want(t, http.StatusCreated, "")

	exampletest.RequireBoundedSeries(t, shop, scraper, func(c *exampletest.Client, i int) error {
		var err error
		switch i % 4 {
		case 0:
			_, err = c.Try("GET", fmt.Sprintf("/skus/sku-%d", i), "", "")
		case 1:
			_, err = c.Try("POST", fmt.Sprintf("/skus/shop-%d%%2Fsku-%d/orders", i, i), fmt.Sprint("x-", i), `{"qty":1}`)
		case 2:
			_, err = c.Try("POST", "/skus/phone/orders", fmt.Sprint("o-", i), `{"qty":1}`)
		case 3:
			_, err = c.Try("POST", fmt.Sprintf("/skus/phone/orders/o-%d/refund", i), "", `{"buyer":"nobody","qty":1}`)
		}
		return err
	})
	if _, body := scraper.MetricSeries(); strings.Contains(body, strconv.Itoa(s.Port())) {
		t.Errorf("GET /metrics tells where Redis is (%s)", s.Addr())
	}
}
