package main

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/stock"
)

// The HTTP service. A SKU name with a '/' (a slot group, "shop-7/phone")
// goes into a path escaped, as "shop-7%2Fphone".
//
//	scope       route                                       what               body                        status
//	sale:admin  POST /skus                                  create a sale      {"sku","stock","limit","buckets"}   201
//	sale:admin  POST /skus/{sku}/orders/{id}/refund         refund a sale      {"buyer","qty"}             200
//	read        GET  /skus/{sku}                            levels                                         200
//	read        GET  /skus/{sku}/audit                      audit of the books                             200
//	buy         POST /skus/{sku}/orders                     buy                {"id","qty"}                200
//	buy         POST /skus/{sku}/reservations               reserve            {"id","qty","ttl_seconds"}  200
//	buy         POST /skus/{sku}/reservations/{id}/confirm  sell the held units {"qty"}                    200
//	buy         POST /skus/{sku}/reservations/{id}/cancel   give them back     {"qty"}                     200
//
// Every route needs an API key ("Authorization: Bearer ...") with the scope
// in the first column; GET /healthz and GET /readyz need none (package app).
// The buyer of an order, reservation, confirm or cancel is the principal the
// key belongs to, never a field of the body: the per-buyer limit is a limit
// per key holder, and nobody buys past it by naming someone else. Only a
// refund, which the shop makes (sale:admin), names the buyer it refunds.
// Orders and reservations count against the principal's rate limit.
//
// An order's ID is its idempotency key: "id" in the body or the
// Idempotency-Key header, 1-111 bytes (httpx.MaxKeyLen). It belongs to the
// buyer who sends it: two buyers using the same ID place two orders, and
// nothing one learns about an ID (taken, refused, held) is about another's
// order (the store keeps each buyer's IDs apart, httpx.ScopedID). Sending a
// request again with the same key returns the first answer (success or
// refusal) with Idempotent-Replayed: true and changes nothing; the same key
// with another quantity is a 409. Confirm and cancel name the caller's own
// order, and a refund the order of the buyer it names, as it was placed
// (quantity): the service keeps no state of its own, Redis has it all.
//
// Errors are JSON problems (httpx.Problem): 400 malformed request or name,
// 401 unauthenticated (no or unknown key), 403 forbidden (the key lacks the
// route's scope), 404 unknown SKU or order, 409 key reused with another
// body, 422 refused (sold_out, buyer_limit, closed, hold_expired,
// cancelled), 429 rate_limited (more orders per second than -rate-limit,
// with Retry-After), 503 unknown_outcome (the reply from Redis was lost:
// send the same request again with the same Idempotency-Key to learn what
// happened; Retry-After says when) or overloaded (more requests in flight
// than -max-in-flight).

// defaultHoldTTL is how long a reservation holds units when the request
// does not say.
const defaultHoldTTL = 5 * time.Minute

type server struct {
	inv *stock.Inventory
}

// Scopes of the sale's API keys: each route needs one.
const (
	scopeAdmin = "sale:admin" // create sales, refund
	scopeBuy   = "buy"        // orders and reservations, as the key's principal
	scopeRead  = "read"       // levels and audits
)

// scopes lists every scope, for the keys file and the generated admin key.
var scopes = []string{scopeAdmin, scopeBuy, scopeRead}

// newServer returns the service's routes over inv. Orders and
// reservations count against the buyer's rate limit (edge.Limit).
func newServer(inv *stock.Inventory, edge httpx.Edge) http.Handler {
	s := &server{inv: inv}
	mux := httpx.NewMux("flashsale", edge, statusError)
	mux.Handle("POST /skus", scopeAdmin, s.createSale)
	mux.Handle("GET /skus/{sku}", scopeRead, s.levels)
	mux.Handle("GET /skus/{sku}/audit", scopeRead, s.audit)
	mux.HandleMetered("POST /skus/{sku}/orders", scopeBuy, s.buy)
	mux.Handle("POST /skus/{sku}/orders/{id}/refund", scopeAdmin, s.refund)
	mux.HandleMetered("POST /skus/{sku}/reservations", scopeBuy, s.reserve)
	mux.HandleMetered("POST /skus/{sku}/reservations/{id}/confirm", scopeBuy, s.confirm)
	mux.HandleMetered("POST /skus/{sku}/reservations/{id}/cancel", scopeBuy, s.cancel)
	return mux
}

type saleRequest struct {
	SKU     string `json:"sku"`
	Stock   int64  `json:"stock"`
	Limit   int64  `json:"limit,omitempty"`   // units per buyer; 0: no limit
	Buckets int    `json:"buckets,omitempty"` // split a hot SKU; 0 or 1: one bucket
}

// orderRequest places an order for the caller; ID may come from the
// Idempotency-Key header instead. There is no buyer field: the buyer is the
// authenticated principal, and a body naming one is refused as malformed.
type orderRequest struct {
	ID  string `json:"id,omitempty"`
	Qty int64  `json:"qty"`
}

type reserveRequest struct {
	orderRequest
	TTLSeconds int64 `json:"ttl_seconds,omitempty"` // default 300, at least 1
}

// heldRequest names the caller's order placed before; its ID is in the
// path.
type heldRequest struct {
	Qty int64 `json:"qty"`
}

// refundRequest names an order placed before by Buyer; the shop refunds it.
type refundRequest struct {
	Buyer string `json:"buyer"`
	Qty   int64  `json:"qty"`
}

type orderResponse struct {
	Order  string `json:"order"`
	SKU    string `json:"sku"`
	Buyer  string `json:"buyer"`
	Qty    int64  `json:"qty"`
	Status string `json:"status"` // sold, held, cancelled, refunded
	// Deadline is when a hold runs out, on the Redis server's clock.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Levels are the SKU's levels right after the order was first applied
	// (of the buyer's bucket, for a SKU split into buckets).
	Levels *levels `json:"levels,omitempty"`
}

type levels struct {
	Available int64 `json:"available"`
	Reserved  int64 `json:"reserved"`
	Sold      int64 `json:"sold"`
	Refunded  int64 `json:"refunded"`
}

func levelsOf(l stock.Levels) levels {
	return levels{Available: l.Available, Reserved: l.Reserved, Sold: l.Sold, Refunded: l.Refunded}
}

func (s *server) createSale(w http.ResponseWriter, r *http.Request) error {
	var req saleRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	// Create is idempotent by SKU: a repeat with the same settings changes
	// nothing. Whether the SKU was there before only decides the header.
	_, err := s.inv.Level(r.Context(), req.SKU)
	existed := err == nil
	if err := s.inv.Create(r.Context(), req.SKU, req.Stock,
		stock.WithBuyerLimit(req.Limit), stock.WithBuckets(req.Buckets)); err != nil {
		return err
	}
	httpx.WriteResult(w, http.StatusCreated, existed, req)
	return nil
}

func (s *server) levels(w http.ResponseWriter, r *http.Request) error {
	sku := r.PathValue("sku")
	lv, err := s.inv.Level(r.Context(), sku)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		SKU string `json:"sku"`
		levels
	}{sku, levelsOf(lv)})
	return nil
}

func (s *server) audit(w http.ResponseWriter, r *http.Request) error {
	a, err := s.inv.Audit(r.Context(), r.PathValue("sku"))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		SKU        string   `json:"sku"`
		OK         bool     `json:"ok"`
		Supply     int64    `json:"supply"` // initial + restocked - written off
		Initial    int64    `json:"initial"`
		Restocked  int64    `json:"restocked"`
		WrittenOff int64    `json:"written_off"`
		InFlight   int64    `json:"in_flight"` // moving between buckets
		Levels     levels   `json:"levels"`
		Entries    int      `json:"entries"` // journal entries replayed
		Problems   []string `json:"problems"`
	}{a.SKU, a.OK(), a.Supply, a.Initial, a.Restocked, a.WrittenOff, a.InFlight, levelsOf(a.Levels), a.Entries,
		append([]string{}, a.Problems...)})
	return nil
}

func (s *server) buy(w http.ResponseWriter, r *http.Request) error {
	o, err := readOrder(r, &orderRequest{})
	if err != nil {
		return err
	}
	res, err := s.inv.Deduct(r.Context(), o.Order)
	return reply(w, o, "sold", res, err)
}

func (s *server) reserve(w http.ResponseWriter, r *http.Request) error {
	var req reserveRequest
	o, err := readOrder(r, &req)
	if err != nil {
		return err
	}
	ttl := defaultHoldTTL
	switch {
	case req.TTLSeconds > int64(math.MaxInt64/time.Second):
		return httpx.Errorf(http.StatusBadRequest, "invalid", "ttl_seconds %d is too large", req.TTLSeconds)
	case req.TTLSeconds != 0:
		ttl = time.Duration(req.TTLSeconds) * time.Second // the range is checked by Reserve
	}
	res, err := s.inv.Reserve(r.Context(), o.Order, ttl)
	return reply(w, o, "held", res, err)
}

func (s *server) confirm(w http.ResponseWriter, r *http.Request) error {
	return settle(w, r, "sold", s.inv.Confirm)
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) error {
	return settle(w, r, "cancelled", s.inv.Cancel)
}

func (s *server) refund(w http.ResponseWriter, r *http.Request) error {
	var req refundRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	if err := httpx.CheckName("buyer", req.Buyer); err != nil {
		return err
	}
	o, err := heldOrder(r, req.Buyer, req.Qty)
	if err != nil {
		return err
	}
	res, err := s.inv.Refund(r.Context(), o.Order)
	return reply(w, o, "refunded", res, err)
}

// settle applies op (Confirm or Cancel) to the caller's order named in the
// path and replies with status.
func settle(w http.ResponseWriter, r *http.Request, status string,
	op func(context.Context, stock.Order, ...stock.CallOption) (stock.Result, error)) error {
	var req heldRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	o, err := heldOrder(r, httpx.Principal(r).ID, req.Qty)
	if err != nil {
		return err
	}
	res, err := op(r.Context(), o.Order)
	return reply(w, o, status, res, err)
}

// order is an order as the store knows it (its ID scoped by its buyer,
// httpx.ScopedID) with the ID its buyer gave.
type order struct {
	stock.Order
	key string
}

// newOrder is the order key of buyer for qty units of the request's SKU.
func newOrder(r *http.Request, buyer, key string, qty int64) (order, error) {
	id, err := httpx.ScopedID(buyer, key)
	if err != nil {
		return order{}, err
	}
	return order{Order: stock.Order{ID: id, Buyer: buyer, Items: []stock.Item{{SKU: r.PathValue("sku"), Qty: qty}}}, key: key}, nil
}

// readOrder reads a new order of the caller into req (an *orderRequest or a
// type that embeds one) and takes its ID from the body or the
// Idempotency-Key header.
func readOrder(r *http.Request, req interface{ order() *orderRequest }) (order, error) {
	body := req.order()
	key, err := httpx.ReadOperation(r, req, &body.ID)
	if err != nil {
		return order{}, err
	}
	return newOrder(r, httpx.Principal(r).ID, key, body.Qty)
}

func (o *orderRequest) order() *orderRequest { return o }

// heldOrder is the order named in the path, placed by buyer; an
// Idempotency-Key, if sent, must be the same ID.
func heldOrder(r *http.Request, buyer string, qty int64) (order, error) {
	key, err := httpx.OperationID(r, r.PathValue("id"))
	if err != nil {
		return order{}, err
	}
	return newOrder(r, buyer, key, qty)
}

// reply writes the outcome of an order operation. A replayed decision,
// success or refusal, carries Idempotent-Replayed: true. An error tells the
// order's ID as its buyer gave it.
func reply(w http.ResponseWriter, o order, status string, res stock.Result, err error) error {
	if res.Replayed {
		w.Header().Set(httpx.ReplayedHeader, "true")
	}
	if err != nil {
		return httpx.Unscope(err, o.ID, o.key)
	}
	sku := o.Items[0].SKU
	body := orderResponse{Order: o.key, SKU: sku, Buyer: o.Buyer, Qty: o.Items[0].Qty, Status: status}
	if !res.Deadline.IsZero() && status == "held" {
		d := res.Deadline.UTC()
		body.Deadline = &d
	}
	if lv, ok := res.Levels[sku]; ok {
		l := levelsOf(lv)
		body.Levels = &l
	}
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

// statusError gives err the status ARCHITECTURE.md §10 gives it, or returns it
// unchanged when it is unexpected (a 500).
func statusError(err error) error {
	var conflict *stock.ConflictError
	switch {
	case errors.As(err, &conflict) && conflict.Field == "state":
		return httpx.Errorf(http.StatusConflict, "conflict", "not possible for an order that is %s", conflict.State)
	case errors.As(err, &conflict):
		return httpx.Errorf(http.StatusConflict, "conflict", "%s differs from the first request with this ID", conflict.Field)
	case errors.Is(err, stock.ErrUnknownOutcome):
		return httpx.UnknownOutcome(err)
	}
	return httpx.StatusOf(err, errorStatuses)
}

// errorStatuses are the statuses of the stock module's errors; the 422s
// are business refusals.
var errorStatuses = []httpx.ErrorStatus{
	{Err: stock.ErrInvalid, Status: http.StatusBadRequest, Code: "invalid"},
	{Err: stock.ErrCrossGroup, Status: http.StatusBadRequest, Code: "invalid"},
	{Err: stock.ErrSKUNotFound, Status: http.StatusNotFound, Code: "sku_not_found"},
	{Err: stock.ErrOrderNotFound, Status: http.StatusNotFound, Code: "order_not_found"},
	{Err: stock.ErrSoldOut, Status: http.StatusUnprocessableEntity, Code: "sold_out"},
	{Err: stock.ErrBuyerLimit, Status: http.StatusUnprocessableEntity, Code: "buyer_limit"},
	{Err: stock.ErrSKUClosed, Status: http.StatusUnprocessableEntity, Code: "closed"},
	{Err: stock.ErrHoldExpired, Status: http.StatusUnprocessableEntity, Code: "hold_expired"},
	{Err: stock.ErrCancelled, Status: http.StatusUnprocessableEntity, Code: "cancelled"},
}
