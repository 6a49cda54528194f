package main

import (
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/redistest"
)

// startServer serves newServer over an Inventory on rdb. It returns a
// client of the shop (sale:admin and read) and one per buyer, whose key's
// principal is the buyer.
func startServer(t *testing.T, rdb redis.UniversalClient, buyers ...string) (shop *exampletest.Client, as func(buyer string) *exampletest.Client) {
	t.Helper()
	specs := []string{"shop:" + scopeAdmin + "," + scopeRead}
	for _, b := range buyers {
		specs = append(specs, b+":"+scopeBuy)
	}
	authn, keys := exampletest.Keys(t, specs...)
	c := exampletest.NewServer(t, newServer(openInventory(t, rdb), httpx.Edge{Auth: authn, Log: slog.New(slog.DiscardHandler)}))
	return c.As(keys["shop"]), func(buyer string) *exampletest.Client {
		t.Helper()
		if keys[buyer] == "" {
			t.Fatalf("no key for %q", buyer)
		}
		return c.As(keys[buyer])
	}
}

func TestServer(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		shop, as := startServer(t, rdb, "alice", "bob", "carol", "dave", "erin", "frank")
		sku := url.PathEscape("shop-7/phone") // a slot group: the '/' travels escaped
		orders, reservations := "/skus/"+sku+"/orders", "/skus/"+sku+"/reservations"
		level := func(name string) float64 {
			t.Helper()
			return shop.Get("/skus/"+sku).Want(t, 200, "").JSON(t)[name].(float64)
		}

		// Create: 201, a repeat is replayed, other settings conflict.
		sale := `{"sku":"shop-7/phone","stock":3,"limit":2}`
		if r := shop.Do("POST", "/skus", "", sale).Want(t, 201, ""); r.Replayed() {
			t.Fatal("first create marked replayed")
		}
		if r := shop.Do("POST", "/skus", "", sale).Want(t, 201, ""); !r.Replayed() {
			t.Fatal("repeated create not marked replayed")
		}
		shop.Do("POST", "/skus", "", `{"sku":"shop-7/phone","stock":4,"limit":2}`).Want(t, 409, "conflict")
		shop.Do("POST", "/skus", "", `{"sku":"a b","stock":1}`).Want(t, 400, "invalid")
		shop.Do("POST", "/skus", "", `{"sku":"x{y}","stock":1}`).Want(t, 400, "invalid")
		shop.Do("POST", "/skus", "", `{"sku":"x","stock":-1}`).Want(t, 400, "invalid")
		shop.Do("POST", "/skus", "", `{"sku":"x","stock":1,"buckets":65}`).Want(t, 400, "invalid")
		shop.Do("POST", "/skus", "", `{"sku":`).Want(t, 400, "malformed")
		shop.Do("POST", "/skus", "", ``).Want(t, 400, "malformed")
		shop.Do("POST", "/skus", "", `{"sku":"x","stock":1,"colour":"red"}`).Want(t, 400, "malformed")
		shop.Do("POST", "/skus", "", `{"sku":"x","stock":1}{}`).Want(t, 400, "malformed")

		// Levels and unknown SKUs.
		if got := level("available"); got != 3 {
			t.Fatalf("available = %v, want 3", got)
		}
		shop.Get("/skus/nope").Want(t, 404, "sku_not_found")
		shop.Get("/skus/a%20b").Want(t, 400, "invalid")
		as("alice").Do("POST", "/skus/nope/orders", "o-x", `{"qty":1}`).Want(t, 404, "sku_not_found")

		// Buy, with the key in the header; the repeat is the same response.
		first := as("alice").Do("POST", orders, "o-1", `{"qty":1}`).Want(t, 200, "")
		if m := first.JSON(t); m["status"] != "sold" || m["order"] != "o-1" || first.Replayed() {
			t.Fatalf("first buy: %s (replayed %v)", first.Body, first.Replayed())
		}
		again := as("alice").Do("POST", orders, "o-1", `{"qty":1}`).Want(t, 200, "")
		if !again.Replayed() || again.Body != first.Body {
			t.Fatalf("repeat: replayed %v, body %s; want the first body %s", again.Replayed(), again.Body, first.Body)
		}
		as("alice").Do("POST", orders, "o-1", `{"qty":2}`).Want(t, 409, "conflict")
		// The key in the body instead; both must agree; one is needed.
		as("bob").Do("POST", orders, "", `{"id":"o-2","qty":1}`).Want(t, 200, "")
		as("bob").Do("POST", orders, "o-9", `{"id":"o-8","qty":1}`).Want(t, 400, "malformed")
		as("bob").Do("POST", orders, "", `{"qty":1}`).Want(t, 400, "malformed")
		as("bob").Do("POST", orders, "bad key", `{"qty":1}`).Want(t, 400, "invalid")
		as("bob").Do("POST", orders, "o-q", `{"qty":0}`).Want(t, 400, "invalid")
		// The buyer is the key's principal: a body naming one is refused.
		as("bob").Do("POST", orders, "o-q", `{"buyer":"bob","qty":1}`).Want(t, 400, "malformed")
		// Alice holds 1 of her 2: two more is over the limit.
		as("alice").Do("POST", orders, "o-3", `{"qty":2}`).Want(t, 422, "buyer_limit")
		if r := as("alice").Do("POST", orders, "o-3", `{"qty":2}`).Want(t, 422, "buyer_limit"); !r.Replayed() {
			t.Fatal("a repeated refusal is not marked replayed")
		}

		// Reserve the last unit, confirm it.
		held := as("carol").Do("POST", reservations, "", `{"id":"r-1","qty":1,"ttl_seconds":60}`).Want(t, 200, "").JSON(t)
		if held["status"] != "held" || held["deadline"] == nil {
			t.Fatalf("reserve: %v", held)
		}
		if level("reserved") != 1 || level("available") != 0 {
			t.Fatal("reserve did not move the unit to reserved")
		}
		// Sold out now, and a refusal stays a refusal.
		as("dave").Do("POST", orders, "o-4", `{"qty":1}`).Want(t, 422, "sold_out")
		if r := as("dave").Do("POST", orders, "o-4", `{"qty":1}`).Want(t, 422, "sold_out"); !r.Replayed() {
			t.Fatal("a repeated sold-out is not marked replayed")
		}
		confirm := reservations + "/r-1/confirm"
		if m := as("carol").Do("POST", confirm, "", `{"qty":1}`).Want(t, 200, "").JSON(t); m["status"] != "sold" {
			t.Fatalf("confirm: %v", m)
		}
		if r := as("carol").Do("POST", confirm, "r-1", `{"qty":1}`).Want(t, 200, ""); !r.Replayed() {
			t.Fatal("repeated confirm not marked replayed")
		}
		as("carol").Do("POST", confirm, "r-2", `{"qty":1}`).Want(t, 400, "malformed") // key and path differ
		as("carol").Do("POST", confirm, "", `{"id":"r-1","qty":1}`).Want(t, 400, "malformed")
		as("carol").Do("POST", reservations+"/r-1/cancel", "", `{"qty":1}`).Want(t, 409, "conflict")
		as("carol").Do("POST", reservations+"/r-404/confirm", "", `{"qty":1}`).Want(t, 404, "order_not_found")
		if level("sold") != 3 || level("reserved") != 0 {
			t.Fatal("confirm did not sell the held unit")
		}

		// Refund puts a unit back, once.
		if m := shop.Do("POST", orders+"/o-1/refund", "", `{"buyer":"alice","qty":1}`).Want(t, 200, "").JSON(t); m["status"] != "refunded" {
			t.Fatalf("refund: %v", m)
		}
		if r := shop.Do("POST", orders+"/o-1/refund", "", `{"buyer":"alice","qty":1}`).Want(t, 200, ""); !r.Replayed() {
			t.Fatal("repeated refund not marked replayed")
		}
		if level("available") != 1 || level("refunded") != 1 {
			t.Fatal("refund did not return the unit")
		}
		shop.Do("POST", orders+"/o-404/refund", "", `{"buyer":"alice","qty":1}`).Want(t, 404, "order_not_found")

		// Reserve, then cancel: the unit comes back; a later confirm is refused.
		as("erin").Do("POST", reservations, "r-2", `{"qty":1}`).Want(t, 200, "")
		if m := as("erin").Do("POST", reservations+"/r-2/cancel", "", `{"qty":1}`).Want(t, 200, "").JSON(t); m["status"] != "cancelled" {
			t.Fatalf("cancel: %v", m)
		}
		as("erin").Do("POST", reservations+"/r-2/confirm", "", `{"qty":1}`).Want(t, 422, "cancelled")
		if level("available") != 1 {
			t.Fatal("cancel did not return the unit")
		}
		as("erin").Do("POST", reservations, "r-t", `{"qty":1,"ttl_seconds":-1}`).Want(t, 400, "invalid")
		as("erin").Do("POST", reservations, "r-t", `{"qty":1,"ttl_seconds":99999999999999}`).Want(t, 400, "invalid")

		// A hold that runs out cannot be confirmed.
		r := as("frank").Do("POST", reservations, "r-3", `{"qty":1,"ttl_seconds":1}`).Want(t, 200, "").JSON(t)
		deadline, err := time.Parse(time.RFC3339Nano, r["deadline"].(string))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(deadline) + 50*time.Millisecond)
		as("frank").Do("POST", reservations+"/r-3/confirm", "", `{"qty":1}`).Want(t, 422, "hold_expired")

		// The books add up.
		a := shop.Get("/skus/"+sku+"/audit").Want(t, 200, "").JSON(t)
		if a["ok"] != true || a["supply"].(float64) != 3 {
			t.Fatalf("audit: %v", a)
		}
		shop.Get("/skus/nope/audit").Want(t, 404, "sku_not_found")
		shop.Get("/skus").Want(t, 405, "")
	})
}

// A SKU split into buckets serves orders the same way.
func TestServer_buckets(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		var buyers []string
		for i := range 60 {
			buyers = append(buyers, "buyer-"+strconv.Itoa(i))
		}
		shop, as := startServer(t, rdb, buyers...)
		shop.Do("POST", "/skus", "", `{"sku":"hot","stock":40,"limit":1,"buckets":4}`).Want(t, 201, "")
		sold := 0
		for i, b := range buyers {
			r := as(b).Do("POST", "/skus/hot/orders", "b-"+strconv.Itoa(i), `{"qty":1}`)
			switch r.Status {
			case 200:
				sold++
			case 422:
				r.Want(t, 422, "sold_out")
			default:
				t.Fatalf("order %d: %d %s", i, r.Status, r.Body)
			}
		}
		a := shop.Get("/skus/hot/audit").Want(t, 200, "").JSON(t)
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
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	shop, as := startServer(t, rdb, "alice", "bob")
	shop.Do("POST", "/skus", "", `{"sku":"phone","stock":5}`).Want(t, 201, "")
	// One order first, so the script is loaded: the lost reply below is then
	// that of an order that ran, not of a NOSCRIPT error.
	as("bob").Do("POST", "/skus/phone/orders", "o-0", `{"qty":1}`).Want(t, 200, "")

	px.DropReplies(true)
	r := as("alice").Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, 503, "unknown_outcome")
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.JSON(t)["error"].(string), httpx.IdempotencyKeyHeader) {
		t.Fatalf("503 without Retry-After or advice: %v %s", r.Header, r.Body)
	}
	px.DropReplies(false)
	r = as("alice").Do("POST", "/skus/phone/orders", "o-1", `{"qty":1}`).Want(t, 200, "")
	if !r.Replayed() {
		t.Fatal("the order ran before its reply was lost, but the retry is not marked replayed")
	}
	if got := shop.Get("/skus/phone").Want(t, 200, "").JSON(t)["sold"]; got != 2.0 {
		t.Fatalf("sold %v, want 2: each order must apply once", got)
	}
}
