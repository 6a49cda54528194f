package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/redkit-go/redkit/examples/internal/httpx"
	"github.com/redkit-go/redkit/stock"
)

// The HTTP service. A SKU name with a '/' (a slot group, "shop-7/phone")
// goes into a path escaped, as "shop-7%2Fphone".
//
//	POST /skus                                  create a sale      {"sku","stock","limit","buckets"}   201
//	GET  /skus/{sku}                            levels                                                 200
//	GET  /skus/{sku}/audit                      audit of the books                                     200
//	POST /skus/{sku}/orders                     buy                {"id","buyer","qty"}                200
//	POST /skus/{sku}/orders/{id}/refund         refund a sale      {"buyer","qty"}                     200
//	POST /skus/{sku}/reservations               reserve            {"id","buyer","qty","ttl_seconds"}  200
//	POST /skus/{sku}/reservations/{id}/confirm  sell the held units {"buyer","qty"}                    200
//	POST /skus/{sku}/reservations/{id}/cancel   give them back     {"buyer","qty"}                     200
//
// An order's ID is its idempotency key: "id" in the body or the
// Idempotency-Key header. Sending a request again with the same key returns
// the first answer (success or refusal) with Idempotent-Replayed: true and
// changes nothing; the same key with another buyer or quantity is a 409.
// Confirm, cancel and refund take the order as it was placed (buyer and
// quantity): the service keeps no state of its own, Redis has it all.
//
// Errors are JSON problems (httpx.Problem): 400 malformed request or name,
// 404 unknown SKU or order, 409 key reused with another body, 422 refused
// (sold_out, buyer_limit, closed, hold_expired, cancelled), 503
// unknown_outcome (the reply from Redis was lost: send the same request again
// with the same key to learn what happened).

// defaultHoldTTL is how long a reservation holds units when the request
// does not say.
const defaultHoldTTL = 5 * time.Minute

type server struct {
	inv *stock.Inventory
}

// newServer returns the service's routes over inv.
func newServer(inv *stock.Inventory, log *slog.Logger) http.Handler {
	s := &server{inv: inv}
	mux := httpx.NewMux("flashsale", log, statusError)
	mux.Handle("POST /skus", s.createSale)
	mux.Handle("GET /skus/{sku}", s.levels)
	mux.Handle("GET /skus/{sku}/audit", s.audit)
	mux.Handle("POST /skus/{sku}/orders", s.buy)
	mux.Handle("POST /skus/{sku}/orders/{id}/refund", s.refund)
	mux.Handle("POST /skus/{sku}/reservations", s.reserve)
	mux.Handle("POST /skus/{sku}/reservations/{id}/confirm", s.confirm)
	mux.Handle("POST /skus/{sku}/reservations/{id}/cancel", s.cancel)
	return mux
}

type saleRequest struct {
	SKU     string `json:"sku"`
	Stock   int64  `json:"stock"`
	Limit   int64  `json:"limit,omitempty"`   // units per buyer; 0: no limit
	Buckets int    `json:"buckets,omitempty"` // split a hot SKU; 0 or 1: one bucket
}

// orderRequest places an order; ID may come from the Idempotency-Key header
// instead.
type orderRequest struct {
	ID    string `json:"id,omitempty"`
	Buyer string `json:"buyer"`
	Qty   int64  `json:"qty"`
}

type reserveRequest struct {
	orderRequest
	TTLSeconds int64 `json:"ttl_seconds,omitempty"` // default 300, at least 1
}

// heldRequest names an order placed before; its ID is in the path.
type heldRequest struct {
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
	res, err := s.inv.Deduct(r.Context(), o)
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
	res, err := s.inv.Reserve(r.Context(), o, ttl)
	return reply(w, o, "held", res, err)
}

func (s *server) confirm(w http.ResponseWriter, r *http.Request) error {
	return settle(w, r, "sold", s.inv.Confirm)
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) error {
	return settle(w, r, "cancelled", s.inv.Cancel)
}

func (s *server) refund(w http.ResponseWriter, r *http.Request) error {
	return settle(w, r, "refunded", s.inv.Refund)
}

// settle applies op (Confirm, Cancel or Refund) to the order named in the
// path and replies with status.
func settle(w http.ResponseWriter, r *http.Request, status string,
	op func(context.Context, stock.Order, ...stock.CallOption) (stock.Result, error)) error {
	o, err := readHeld(r)
	if err != nil {
		return err
	}
	res, err := op(r.Context(), o)
	return reply(w, o, status, res, err)
}

// readOrder reads a new order into req (an *orderRequest or a type that
// embeds one) and takes its ID from the body or the Idempotency-Key header.
func readOrder(r *http.Request, req interface{ order() *orderRequest }) (stock.Order, error) {
	body := req.order()
	id, err := httpx.ReadOperation(r, req, &body.ID)
	if err != nil {
		return stock.Order{}, err
	}
	return stock.Order{ID: id, Buyer: body.Buyer, Items: []stock.Item{{SKU: r.PathValue("sku"), Qty: body.Qty}}}, nil
}

func (o *orderRequest) order() *orderRequest { return o }

// readHeld reads the order named in the path; an Idempotency-Key, if sent,
// must be the same ID.
func readHeld(r *http.Request) (stock.Order, error) {
	var req heldRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return stock.Order{}, err
	}
	id, err := httpx.OperationID(r, r.PathValue("id"))
	if err != nil {
		return stock.Order{}, err
	}
	return stock.Order{ID: id, Buyer: req.Buyer, Items: []stock.Item{{SKU: r.PathValue("sku"), Qty: req.Qty}}}, nil
}

// reply writes the outcome of an order operation. A replayed decision,
// success or refusal, carries Idempotent-Replayed: true.
func reply(w http.ResponseWriter, o stock.Order, status string, res stock.Result, err error) error {
	if res.Replayed {
		w.Header().Set(httpx.ReplayedHeader, "true")
	}
	if err != nil {
		return err
	}
	sku := o.Items[0].SKU
	body := orderResponse{Order: o.ID, SKU: sku, Buyer: o.Buyer, Qty: o.Items[0].Qty, Status: status}
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

// statusError gives err the status DESIGN §9 gives it, or returns it
// unchanged when it is unexpected (a 500).
func statusError(err error) error {
	var conflict *stock.ConflictError
	switch {
	case errors.As(err, &conflict) && conflict.Field == "state":
		return httpx.Errorf(http.StatusConflict, "conflict", "%s: not possible for an order that is %s", conflict.ID, conflict.State)
	case errors.As(err, &conflict):
		return httpx.Errorf(http.StatusConflict, "conflict", "%s: %s differs from the first request with this ID", conflict.ID, conflict.Field)
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
	{Err: stock.ErrNotFound, Status: http.StatusNotFound, Code: "not_found"},
	{Err: stock.ErrSoldOut, Status: http.StatusUnprocessableEntity, Code: "sold_out"},
	{Err: stock.ErrBuyerLimit, Status: http.StatusUnprocessableEntity, Code: "buyer_limit"},
	{Err: stock.ErrClosed, Status: http.StatusUnprocessableEntity, Code: "closed"},
	{Err: stock.ErrHoldExpired, Status: http.StatusUnprocessableEntity, Code: "hold_expired"},
	{Err: stock.ErrCancelled, Status: http.StatusUnprocessableEntity, Code: "cancelled"},
}
