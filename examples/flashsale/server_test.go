package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/examples/internal/httpx"
	"github.com/redkit-go/redkit/redistest"
)

// client calls the service; each call returns the status, the headers and
// the raw body.
type client struct {
	t    *testing.T
	base string
}

type response struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into a map.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r response) replayed() bool { return r.header.Get(httpx.ReplayedHeader) == "true" }

func (c client) do(method, path, key, body string) response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(httpx.IdempotencyKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// expect checks a response's status and, for errors, its problem code.
func (c client) expect(r response, status int, code string) response {
	c.t.Helper()
	if r.status != status {
		c.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.json(c.t)["code"]; got != code {
			c.t.Fatalf("problem code %v, want %s; body %s", got, code, r.body)
		}
	}
	return r
}

func startServer(t *testing.T, url string) client {
	_, inv := openInventory(t, url)
	ts := httptest.NewServer(newServer(inv, discardLogger()))
	t.Cleanup(ts.Close)
	return client{t: t, base: ts.URL}
}

func TestServer(t *testing.T) {
	eachBackend(t, func(t *testing.T, redisURL string) {
		c := startServer(t, redisURL)
		sku := url.PathEscape("shop-7/phone") // a slot group: the '/' travels escaped
		orders, reservations := "/skus/"+sku+"/orders", "/skus/"+sku+"/reservations"
		level := func(name string) float64 {
			t.Helper()
			return c.expect(c.do("GET", "/skus/"+sku, "", ""), 200, "").json(t)[name].(float64)
		}

		// Create: 201, a repeat is replayed, other settings conflict.
		sale := `{"sku":"shop-7/phone","stock":3,"limit":2}`
		if r := c.expect(c.do("POST", "/skus", "", sale), 201, ""); r.replayed() {
			t.Fatal("first create marked replayed")
		}
		if r := c.expect(c.do("POST", "/skus", "", sale), 201, ""); !r.replayed() {
			t.Fatal("repeated create not marked replayed")
		}
		c.expect(c.do("POST", "/skus", "", `{"sku":"shop-7/phone","stock":4,"limit":2}`), 409, "conflict")
		c.expect(c.do("POST", "/skus", "", `{"sku":"a b","stock":1}`), 400, "invalid")
		c.expect(c.do("POST", "/skus", "", `{"sku":"x{y}","stock":1}`), 400, "invalid")
		c.expect(c.do("POST", "/skus", "", `{"sku":"x","stock":-1}`), 400, "invalid")
		c.expect(c.do("POST", "/skus", "", `{"sku":"x","stock":1,"buckets":65}`), 400, "invalid")
		c.expect(c.do("POST", "/skus", "", `{"sku":`), 400, "malformed")
		c.expect(c.do("POST", "/skus", "", ``), 400, "malformed")
		c.expect(c.do("POST", "/skus", "", `{"sku":"x","stock":1,"colour":"red"}`), 400, "malformed")
		c.expect(c.do("POST", "/skus", "", `{"sku":"x","stock":1}{}`), 400, "malformed")

		// Levels and unknown SKUs.
		if got := level("available"); got != 3 {
			t.Fatalf("available = %v, want 3", got)
		}
		c.expect(c.do("GET", "/skus/nope", "", ""), 404, "not_found")
		c.expect(c.do("GET", "/skus/a%20b", "", ""), 400, "invalid")
		c.expect(c.do("POST", "/skus/nope/orders", "o-x", `{"buyer":"alice","qty":1}`), 404, "not_found")

		// Buy, with the key in the header; the repeat is the same response.
		first := c.expect(c.do("POST", orders, "o-1", `{"buyer":"alice","qty":1}`), 200, "")
		if m := first.json(t); m["status"] != "sold" || m["order"] != "o-1" || first.replayed() {
			t.Fatalf("first buy: %s (replayed %v)", first.body, first.replayed())
		}
		again := c.expect(c.do("POST", orders, "o-1", `{"buyer":"alice","qty":1}`), 200, "")
		if !again.replayed() || again.body != first.body {
			t.Fatalf("repeat: replayed %v, body %s; want the first body %s", again.replayed(), again.body, first.body)
		}
		c.expect(c.do("POST", orders, "o-1", `{"buyer":"alice","qty":2}`), 409, "conflict")
		c.expect(c.do("POST", orders, "o-1", `{"buyer":"bob","qty":1}`), 409, "conflict")
		// The key in the body instead; both must agree; one is needed.
		c.expect(c.do("POST", orders, "", `{"id":"o-2","buyer":"bob","qty":1}`), 200, "")
		c.expect(c.do("POST", orders, "o-9", `{"id":"o-8","buyer":"bob","qty":1}`), 400, "malformed")
		c.expect(c.do("POST", orders, "", `{"buyer":"bob","qty":1}`), 400, "malformed")
		c.expect(c.do("POST", orders, "bad key", `{"buyer":"bob","qty":1}`), 400, "invalid")
		c.expect(c.do("POST", orders, "o-q", `{"buyer":"bob","qty":0}`), 400, "invalid")
		c.expect(c.do("POST", orders, "o-q", `{"buyer":"","qty":1}`), 400, "invalid")
		// Alice holds 1 of her 2: two more is over the limit.
		c.expect(c.do("POST", orders, "o-3", `{"buyer":"alice","qty":2}`), 422, "buyer_limit")
		if r := c.expect(c.do("POST", orders, "o-3", `{"buyer":"alice","qty":2}`), 422, "buyer_limit"); !r.replayed() {
			t.Fatal("a repeated refusal is not marked replayed")
		}

		// Reserve the last unit, confirm it.
		held := c.expect(c.do("POST", reservations, "", `{"id":"r-1","buyer":"carol","qty":1,"ttl_seconds":60}`), 200, "").json(t)
		if held["status"] != "held" || held["deadline"] == nil {
			t.Fatalf("reserve: %v", held)
		}
		if level("reserved") != 1 || level("available") != 0 {
			t.Fatal("reserve did not move the unit to reserved")
		}
		// Sold out now, and a refusal stays a refusal.
		c.expect(c.do("POST", orders, "o-4", `{"buyer":"dave","qty":1}`), 422, "sold_out")
		if r := c.expect(c.do("POST", orders, "o-4", `{"buyer":"dave","qty":1}`), 422, "sold_out"); !r.replayed() {
			t.Fatal("a repeated sold-out is not marked replayed")
		}
		confirm := reservations + "/r-1/confirm"
		if m := c.expect(c.do("POST", confirm, "", `{"buyer":"carol","qty":1}`), 200, "").json(t); m["status"] != "sold" {
			t.Fatalf("confirm: %v", m)
		}
		if r := c.expect(c.do("POST", confirm, "r-1", `{"buyer":"carol","qty":1}`), 200, ""); !r.replayed() {
			t.Fatal("repeated confirm not marked replayed")
		}
		c.expect(c.do("POST", confirm, "r-2", `{"buyer":"carol","qty":1}`), 400, "malformed") // key and path differ
		c.expect(c.do("POST", confirm, "", `{"id":"r-1","buyer":"carol","qty":1}`), 400, "malformed")
		c.expect(c.do("POST", reservations+"/r-1/cancel", "", `{"buyer":"carol","qty":1}`), 409, "conflict")
		c.expect(c.do("POST", reservations+"/r-404/confirm", "", `{"buyer":"carol","qty":1}`), 404, "not_found")
		if level("sold") != 3 || level("reserved") != 0 {
			t.Fatal("confirm did not sell the held unit")
		}

		// Refund puts a unit back, once.
		if m := c.expect(c.do("POST", orders+"/o-1/refund", "", `{"buyer":"alice","qty":1}`), 200, "").json(t); m["status"] != "refunded" {
			t.Fatalf("refund: %v", m)
		}
		if r := c.expect(c.do("POST", orders+"/o-1/refund", "", `{"buyer":"alice","qty":1}`), 200, ""); !r.replayed() {
			t.Fatal("repeated refund not marked replayed")
		}
		if level("available") != 1 || level("refunded") != 1 {
			t.Fatal("refund did not return the unit")
		}
		c.expect(c.do("POST", orders+"/o-404/refund", "", `{"buyer":"alice","qty":1}`), 404, "not_found")

		// Reserve, then cancel: the unit comes back; a later confirm is refused.
		c.expect(c.do("POST", reservations, "r-2", `{"buyer":"erin","qty":1}`), 200, "")
		if m := c.expect(c.do("POST", reservations+"/r-2/cancel", "", `{"buyer":"erin","qty":1}`), 200, "").json(t); m["status"] != "cancelled" {
			t.Fatalf("cancel: %v", m)
		}
		c.expect(c.do("POST", reservations+"/r-2/confirm", "", `{"buyer":"erin","qty":1}`), 422, "cancelled")
		if level("available") != 1 {
			t.Fatal("cancel did not return the unit")
		}
		c.expect(c.do("POST", reservations, "r-t", `{"buyer":"erin","qty":1,"ttl_seconds":-1}`), 400, "invalid")
		c.expect(c.do("POST", reservations, "r-t", `{"buyer":"erin","qty":1,"ttl_seconds":99999999999999}`), 400, "invalid")

		// A hold that runs out cannot be confirmed.
		r := c.expect(c.do("POST", reservations, "r-3", `{"buyer":"frank","qty":1,"ttl_seconds":1}`), 200, "").json(t)
		deadline, err := time.Parse(time.RFC3339Nano, r["deadline"].(string))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(deadline) + 50*time.Millisecond)
		c.expect(c.do("POST", reservations+"/r-3/confirm", "", `{"buyer":"frank","qty":1}`), 422, "hold_expired")

		// The books add up.
		a := c.expect(c.do("GET", "/skus/"+sku+"/audit", "", ""), 200, "").json(t)
		if a["ok"] != true || a["supply"].(float64) != 3 {
			t.Fatalf("audit: %v", a)
		}
		c.expect(c.do("GET", "/skus/nope/audit", "", ""), 404, "not_found")
		c.expect(c.do("GET", "/skus", "", ""), 405, "")
	})
}

// A SKU split into buckets serves orders the same way.
func TestServer_buckets(t *testing.T) {
	eachBackend(t, func(t *testing.T, redisURL string) {
		c := startServer(t, redisURL)
		c.expect(c.do("POST", "/skus", "", `{"sku":"hot","stock":40,"limit":1,"buckets":4}`), 201, "")
		sold := 0
		for i := range 60 {
			key, body := "b-"+strconv.Itoa(i), `{"buyer":"buyer-`+strconv.Itoa(i)+`","qty":1}`
			r := c.do("POST", "/skus/hot/orders", key, body)
			switch r.status {
			case 200:
				sold++
			case 422:
				c.expect(r, 422, "sold_out")
			default:
				t.Fatalf("order %d: %d %s", i, r.status, r.body)
			}
		}
		a := c.expect(c.do("GET", "/skus/hot/audit", "", ""), 200, "").json(t)
		if sold != 40 || a["ok"] != true || a["levels"].(map[string]any)["sold"].(float64) != 40 {
			t.Fatalf("sold %d of 40; audit %v", sold, a)
		}
	})
}

// When Redis's reply is lost, the client is told to send the same request
// again, and doing so tells it what happened.
func TestServer_unknownOutcome(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	c := startServer(t, "redis://"+px.Addr()+"/?read_timeout=200ms&max_retries=-1")
	c.expect(c.do("POST", "/skus", "", `{"sku":"phone","stock":5}`), 201, "")
	// One order first, so the script is loaded: the lost reply below is then
	// that of an order that ran, not of a NOSCRIPT error.
	c.expect(c.do("POST", "/skus/phone/orders", "o-0", `{"buyer":"bob","qty":1}`), 200, "")

	px.DropReplies(true)
	r := c.expect(c.do("POST", "/skus/phone/orders", "o-1", `{"buyer":"alice","qty":1}`), 503, "unknown_outcome")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.json(t)["error"].(string), httpx.IdempotencyKeyHeader) {
		t.Fatalf("503 without Retry-After or advice: %v %s", r.header, r.body)
	}
	px.DropReplies(false)
	r = c.expect(c.do("POST", "/skus/phone/orders", "o-1", `{"buyer":"alice","qty":1}`), 200, "")
	if !r.replayed() {
		t.Fatal("the order ran before its reply was lost, but the retry is not marked replayed")
	}
	if got := c.expect(c.do("GET", "/skus/phone", "", ""), 200, "").json(t)["sold"]; got != 2.0 {
		t.Fatalf("sold %v, want 2: each order must apply once", got)
	}
}
