package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/wallet"
)

// The HTTP service. An account ID with a '/' (a slot group, "shop-7/alice")
// goes into a path escaped, as "shop-7%2Falice"; so does a hold ID.
//
//	POST /accounts                                open an account   {"id","currency","overdraft"}   201
//	GET  /accounts/{id}                           balance                                           200
//	GET  /accounts/{id}/entries?cursor=&limit=    statement, oldest first, limit 1..1000 (100)      200
//	POST /accounts/{id}/credits                   credit            {"amount","currency","memo"}    201
//	POST /accounts/{id}/debits                    debit             {"amount","currency","memo"}    201
//	POST /transfers                               transfer          {"from","to","amount","memo"}   201
//	POST /accounts/{id}/holds                     hold              {"amount","ttl":"15m","memo"}   201
//	POST /accounts/{id}/holds/{hold}/capture      capture (part)    {"amount"}                      200
//	POST /accounts/{id}/holds/{hold}/void         release the hold                                  200
//
// The Idempotency-Key header of a credit, debit or transfer is its
// transaction ID, and that of a hold is the hold's ID ("id" in the body works
// too; when both are given they must agree). Keys are remembered for the
// ledger's idempotency window (24h) and are unique per slot group (of the
// account, or of the source of a transfer): use UUIDs or other globally
// unique keys. Sending a request again with the same key and body returns
// the first response again, with Idempotent-Replayed: true, and changes
// nothing; a refusal stays refused under its key. The same key with another
// body is a 409 naming the first field that differs. A capture or void is
// idempotent by the hold it names.
//
// A transfer between slot groups runs in steps (see the wallet package);
// when the same key arrives while an earlier request is still running it,
// the second request finishes the transfer too and both return the same
// response, the later one marked as replayed. The ledger has no "still in
// flight" state to refuse it with, and none is needed: every step is
// idempotent.
//
// Every route needs an API key ("Authorization: Bearer ...") with a scope:
// accounts:admin to open and credit accounts, payments to debit, hold,
// capture, void and transfer, read for balances and statements. GET
// /healthz and GET /readyz need none (package app).
//
// Errors are JSON problems (httpx.Problem): 400 malformed request, invalid
// ID or amount; 401 unauthenticated (no or unknown key); 403 forbidden (the
// key lacks the route's scope); 404 unknown account or hold; 409 key reused
// with another body (with "field"); 422 refused (insufficient_funds,
// currency_mismatch, account_closed, hold_expired); 429 rate_limited (more
// payments per second than -rate-limit, with Retry-After); 503
// unknown_outcome (the reply from Redis was lost: send the same request
// again with the same Idempotency-Key to learn what happened; Retry-After
// says when) or overloaded (more requests in flight than -max-in-flight).

type server struct {
	led *wallet.Ledger
}

// Scopes of the wallet's API keys: each route needs one.
const (
	scopeAdmin    = "accounts:admin" // open accounts, credit them: creating money
	scopePayments = "payments"       // debit, hold, capture, void, transfer: moving it
	scopeRead     = "read"           // balances and statements
)

// scopes lists every scope, for the keys file and the generated admin key.
var scopes = []string{scopeAdmin, scopePayments, scopeRead}

// newServer returns the service's routes over led. Payments count against
// the caller's rate limit (edge.Limit).
func newServer(led *wallet.Ledger, edge httpx.Edge) http.Handler {
	s := &server{led: led}
	mux := httpx.NewMux("wallet", edge, statusError)
	mux.Handle("POST /accounts", scopeAdmin, s.open)
	mux.Handle("GET /accounts/{id}", scopeRead, s.balance)
	mux.Handle("GET /accounts/{id}/entries", scopeRead, s.entries)
	mux.Handle("POST /accounts/{id}/credits", scopeAdmin, s.credit)
	mux.HandleMetered("POST /accounts/{id}/debits", scopePayments, s.debit)
	mux.HandleMetered("POST /transfers", scopePayments, s.transfer)
	mux.HandleMetered("POST /accounts/{id}/holds", scopePayments, s.hold)
	mux.HandleMetered("POST /accounts/{id}/holds/{hold}/capture", scopePayments, s.capture)
	mux.HandleMetered("POST /accounts/{id}/holds/{hold}/void", scopePayments, s.void)
	return mux
}

type openRequest struct {
	ID        string `json:"id"`
	Currency  string `json:"currency"`
	Overdraft int64  `json:"overdraft,omitempty"` // minor units below zero the account may go
}

// postingRequest is a credit or a debit; ID may come from the
// Idempotency-Key header instead.
type postingRequest struct {
	ID       string `json:"id,omitempty"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency,omitempty"` // when given, must be the account's
	Memo     string `json:"memo,omitempty"`
}

type transferRequest struct {
	ID     string `json:"id,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	Memo   string `json:"memo,omitempty"`
}

type holdRequest struct {
	ID     string `json:"id,omitempty"`
	Amount int64  `json:"amount"`
	TTL    string `json:"ttl"` // a Go duration, 1s..168h: "90s", "15m"
	Memo   string `json:"memo,omitempty"`
}

type captureRequest struct {
	Amount int64 `json:"amount"` // 1..the held amount; the rest is released
}

type balance struct {
	Account   string `json:"account"`
	Currency  string `json:"currency"`
	Posted    int64  `json:"posted"`
	Held      int64  `json:"held"`
	Available int64  `json:"available"` // posted - held; may go down to -overdraft
	Overdraft int64  `json:"overdraft"`
	Closed    bool   `json:"closed,omitempty"`
}

func balanceOf(account string, b wallet.Balance) balance {
	return balance{Account: account, Currency: b.Currency, Posted: b.Posted, Held: b.Held,
		Available: b.Available, Overdraft: b.Overdraft, Closed: b.Closed}
}

// txResponse is the answer to every write. A replay carries the same body:
// the balances right after the transaction was first applied.
type txResponse struct {
	ID        string     `json:"id"`   // transaction or hold ID
	Kind      string     `json:"kind"` // credit, debit, transfer, hold, capture, void
	Amount    int64      `json:"amount,omitempty"`
	Balance   balance    `json:"balance"` // of the account, or the source of a transfer
	EntryID   string     `json:"entry_id"`
	To        *balance   `json:"to,omitempty"` // the destination of a transfer
	ToEntryID string     `json:"to_entry_id,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"` // a hold's expiry, on the Redis server's clock
	Time      time.Time  `json:"time"`              // when it was applied, on the Redis server's clock
}

func txResponseOf(kind, account string, amount int64, res wallet.Result) txResponse {
	body := txResponse{ID: res.TxID, Kind: kind, Amount: amount, Balance: balanceOf(account, res.Balance),
		EntryID: res.EntryID, Time: res.Time.UTC()}
	if !res.Expires.IsZero() {
		exp := res.Expires.UTC()
		body.Expires = &exp
	}
	return body
}

type statement struct {
	Account    string  `json:"account"`
	Entries    []entry `json:"entries"`
	NextCursor string  `json:"next_cursor,omitempty"` // absent on the last page
}

type entry struct {
	ID        string    `json:"id"` // usable as a cursor
	TxID      string    `json:"tx_id,omitempty"`
	Kind      string    `json:"kind"`
	Delta     int64     `json:"delta"`      // change of posted
	HeldDelta int64     `json:"held_delta"` // change of held
	Posted    int64     `json:"posted"`     // after the entry
	Held      int64     `json:"held"`
	Peer      string    `json:"peer,omitempty"`
	Memo      string    `json:"memo,omitempty"`
	Time      time.Time `json:"time"`
}

func (s *server) open(w http.ResponseWriter, r *http.Request) error {
	var req openRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	// Opening is idempotent: the same settings again change nothing.
	if err := s.led.Open(ctx, req.ID, wallet.WithCurrency(req.Currency), wallet.WithOverdraft(req.Overdraft)); err != nil {
		return err
	}
	b, err := s.led.Balance(ctx, req.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/accounts/"+url.PathEscape(req.ID))
	httpx.WriteJSON(w, http.StatusCreated, balanceOf(req.ID, b))
	return nil
}

func (s *server) balance(w http.ResponseWriter, r *http.Request) error {
	account := r.PathValue("id")
	b, err := s.led.Balance(r.Context(), account)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, balanceOf(account, b))
	return nil
}

func (s *server) entries(w http.ResponseWriter, r *http.Request) error {
	account, q := r.PathValue("id"), r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return httpx.Errorf(http.StatusBadRequest, "malformed", "limit %q: want 1..%d", v, wallet.MaxPage)
		}
		limit = n
	}
	es, next, err := s.led.Entries(r.Context(), account, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	body := statement{Account: account, Entries: make([]entry, 0, len(es)), NextCursor: next}
	for _, e := range es {
		body.Entries = append(body.Entries, entry{ID: e.ID, TxID: e.TxID, Kind: e.Kind, Delta: e.Delta,
			HeldDelta: e.HeldDelta, Posted: e.Posted, Held: e.Held, Peer: e.Peer, Memo: e.Memo, Time: e.Time.UTC()})
	}
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *server) credit(w http.ResponseWriter, r *http.Request) error {
	return s.post(w, r, wallet.KindCredit, s.led.Credit)
}

func (s *server) debit(w http.ResponseWriter, r *http.Request) error {
	return s.post(w, r, wallet.KindDebit, s.led.Debit)
}

func (s *server) post(w http.ResponseWriter, r *http.Request, kind string,
	apply func(ctx context.Context, tx wallet.Tx, opts ...wallet.CallOption) (wallet.Result, error)) error {
	var req postingRequest
	id, err := httpx.ReadOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	tx := wallet.Tx{ID: id, Account: r.PathValue("id"), Amount: req.Amount, Currency: req.Currency, Memo: req.Memo}
	res, err := apply(r.Context(), tx)
	if err != nil {
		return err
	}
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, txResponseOf(kind, tx.Account, tx.Amount, res))
	return nil
}

func (s *server) transfer(w http.ResponseWriter, r *http.Request) error {
	var req transferRequest
	id, err := httpx.ReadOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	res, err := s.led.Transfer(r.Context(), wallet.Transfer{ID: id, From: req.From, To: req.To, Amount: req.Amount, Memo: req.Memo})
	if err != nil {
		return err
	}
	body := txResponseOf("transfer", req.From, req.Amount, res)
	to := balanceOf(req.To, res.To)
	body.To, body.ToEntryID = &to, res.ToEntryID
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, body)
	return nil
}

func (s *server) hold(w http.ResponseWriter, r *http.Request) error {
	var req holdRequest
	id, err := httpx.ReadOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil {
		return httpx.Errorf(http.StatusBadRequest, "malformed", "ttl %q: want a duration such as \"90s\" or \"15m\"", req.TTL)
	}
	account := r.PathValue("id")
	res, err := s.led.Hold(r.Context(), wallet.HoldReq{ID: id, Account: account, Amount: req.Amount, TTL: ttl, Memo: req.Memo})
	if err != nil {
		return err
	}
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, txResponseOf(wallet.KindHold, account, req.Amount, res))
	return nil
}

func (s *server) capture(w http.ResponseWriter, r *http.Request) error {
	var req captureRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	account := r.PathValue("id")
	res, err := s.led.Capture(r.Context(), account, r.PathValue("hold"), req.Amount)
	if err != nil {
		return err
	}
	httpx.WriteResult(w, http.StatusOK, res.Replayed, txResponseOf(wallet.KindCapture, account, req.Amount, res))
	return nil
}

func (s *server) void(w http.ResponseWriter, r *http.Request) error {
	account := r.PathValue("id")
	res, err := s.led.Void(r.Context(), account, r.PathValue("hold"))
	if err != nil {
		return err
	}
	httpx.WriteResult(w, http.StatusOK, res.Replayed, txResponseOf(wallet.KindVoid, account, 0, res))
	return nil
}

// statusError gives err the status ARCHITECTURE.md §10 gives it, or returns it
// unchanged when it is unexpected (a 500).
func statusError(err error) error {
	var ce *wallet.ConflictError
	switch {
	case errors.As(err, &ce):
		return &httpx.StatusError{Status: http.StatusConflict, Code: "conflict", Field: ce.Field, Err: err}
	case errors.Is(err, wallet.ErrUnknownOutcome):
		return httpx.UnknownOutcome(err)
	}
	return httpx.StatusOf(err, errorStatuses)
}

// errorStatuses are the statuses of the wallet module's errors; the 422s
// are business refusals.
var errorStatuses = []httpx.ErrorStatus{
	{Err: wallet.ErrInvalid, Status: http.StatusBadRequest, Code: "invalid"},
	{Err: wallet.ErrAccountNotFound, Status: http.StatusNotFound, Code: "account_not_found"},
	{Err: wallet.ErrHoldNotFound, Status: http.StatusNotFound, Code: "hold_not_found"},
	{Err: wallet.ErrInsufficientFunds, Status: http.StatusUnprocessableEntity, Code: "insufficient_funds"},
	{Err: wallet.ErrCurrencyMismatch, Status: http.StatusUnprocessableEntity, Code: "currency_mismatch"},
	{Err: wallet.ErrAccountClosed, Status: http.StatusUnprocessableEntity, Code: "account_closed"},
	{Err: wallet.ErrHoldExpired, Status: http.StatusUnprocessableEntity, Code: "hold_expired"},
	// Refusals of a transfer across slot groups, stored under its ID.
	{Err: wallet.ErrDestinationFull, Status: http.StatusUnprocessableEntity, Code: "destination_full"},
	{Err: wallet.ErrTransferExpired, Status: http.StatusUnprocessableEntity, Code: "transfer_expired"},
}
