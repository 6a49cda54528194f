package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/wallet"
)

// The HTTP service. An account ID with a '/' (a slot group, "shop-7/alice")
// goes into a path escaped, as "shop-7%2Falice"; so does a hold ID.
//
//	POST /accounts                                open an account   {"id","currency","overdraft","owner"}  201
//	POST /accounts/{id}/grants                    grant access      {"principal"}                   200
//	DELETE /accounts/{id}/grants/{principal}      take it back                                      200
//	GET  /accounts/{id}                           balance                                           200
//	GET  /accounts/{id}/entries?cursor=&limit=    statement, oldest first, limit 1..1000 (100)      200
//	POST /accounts/{id}/credits                   credit            {"amount","currency","memo"}    201
//	POST /accounts/{id}/debits                    debit             {"amount","currency","memo"}    201
//	POST /transfers                               transfer          {"from","to","amount","memo"}   201
//	POST /accounts/{id}/holds                     hold              {"amount","ttl":"15m","memo"}   201
//	POST /accounts/{id}/holds/{hold}/capture      capture (part)    {"amount"}                      200
//	POST /accounts/{id}/holds/{hold}/void         release the hold                                  200
//
// Accounts have owners. An account belongs to the principal it was opened
// for: "owner" in the body, by default the principal that opens it (opening
// needs accounts:admin, since an overdraft is credit). An admin may grant
// other principals access to an account, as its owner has, and take it
// back. A principal without accounts:admin moves money only out of
// accounts it owns or was granted (debit, hold, capture, void, the source
// of a transfer) and reads only those; any other account is answered as
// one that does not exist (404 account_not_found), so nobody learns which
// accounts of others exist. The destination of a transfer may be any
// account. Admins act on every account.
//
// The Idempotency-Key header of a credit, debit or transfer is its
// transaction ID, and that of a hold is the hold's ID ("id" in the body works
// too; when both are given they must agree), 1-111 bytes
// (httpx.MaxKeyLen). A key belongs to the principal that sends it: two
// principals using the same key never meet, and a hold is captured or
// voided by the principal that placed it (httpx.ScopedID). Keys are
// remembered for the ledger's idempotency window (24h) and are unique per
// principal and slot group (of the account, or of the source of a
// transfer): use UUIDs or other unique keys. Sending a request again with
// the same key and body returns the first response again, with
// Idempotent-Replayed: true, and changes nothing; a refusal stays refused
// under its key. The same key with another body is a 409 naming the first
// field that differs. A capture or void is idempotent by the hold it names.
// A statement shows the key of the caller's own transactions only.
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
// key lacks the route's scope); 404 unknown account (or another's) or
// hold; 409 key reused with another body (with "field"), or an open naming
// another owner than the account has; 422 refused (insufficient_funds,
// currency_mismatch, account_closed, hold_expired); 429 rate_limited (more
// payments per second than -rate-limit, with Retry-After); 503
// unknown_outcome (the reply from Redis was lost, or did not come in time:
// send the same request again with the same Idempotency-Key to learn what
// happened; Retry-After says when), unavailable (Redis did not answer in
// time and nothing was done) or overloaded (more requests in flight than
// -max-in-flight).

type server struct {
	led    *wallet.Ledger
	owners *owners
}

// Scopes of the wallet's API keys: each route needs one.
const (
	scopeAdmin    = "accounts:admin" // open accounts, grant access, credit: creating money; every account
	scopePayments = "payments"       // debit, hold, capture, void, transfer out of the caller's accounts
	scopeRead     = "read"           // balances and statements of the caller's accounts
)

// scopes lists every scope, for the keys file and the generated admin key.
var scopes = []string{scopeAdmin, scopePayments, scopeRead}

// newServer returns the service's routes over led, with the accounts'
// owners kept in rdb (led's Redis). Payments count against the caller's
// rate limit (edge.Limit).
func newServer(led *wallet.Ledger, rdb redis.UniversalClient, edge httpx.Edge) http.Handler {
	s := &server{led: led, owners: &owners{rdb: rdb}}
	mux := httpx.NewMux("wallet", edge, statusError)
	mux.Handle("POST /accounts", scopeAdmin, s.open)
	mux.Handle("POST /accounts/{id}/grants", scopeAdmin, s.grant)
	mux.Handle("DELETE /accounts/{id}/grants/{principal}", scopeAdmin, s.revoke)
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
	Owner     string `json:"owner,omitempty"`     // the principal it is opened for; default the caller
}

type grantRequest struct {
	Principal string `json:"principal"`
}

// access is who may act on an account besides the admins.
type access struct {
	Account string   `json:"account"`
	Owner   string   `json:"owner"`
	Grants  []string `json:"grants"`
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
	Owner     string `json:"owner,omitempty"` // on an open and a balance
}

func balanceOf(account string, b wallet.Balance) balance {
	return balance{Account: account, Currency: b.Currency, Posted: b.Posted, Held: b.Held,
		Available: b.Available, Overdraft: b.Overdraft, Closed: b.Closed}
}

// txResponse is the answer to every write. A replay carries the same body:
// the balances right after the transaction was first applied.
type txResponse struct {
	ID        string     `json:"id"`   // transaction or hold ID: the caller's key
	Kind      string     `json:"kind"` // credit, debit, transfer, hold, capture, void
	Amount    int64      `json:"amount,omitempty"`
	Balance   balance    `json:"balance"` // of the account, or the source of a transfer
	EntryID   string     `json:"entry_id"`
	To        *balance   `json:"to,omitempty"` // the destination of a transfer
	ToEntryID string     `json:"to_entry_id,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"` // a hold's expiry, on the Redis server's clock
	Time      time.Time  `json:"time"`              // when it was applied, on the Redis server's clock
}

func txResponseOf(key, kind, account string, amount int64, res wallet.Result) txResponse {
	body := txResponse{ID: key, Kind: kind, Amount: amount, Balance: balanceOf(account, res.Balance),
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
	ID        string    `json:"id"`              // usable as a cursor
	TxID      string    `json:"tx_id,omitempty"` // the caller's key; absent for another's transaction
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
	if req.Owner == "" {
		req.Owner = httpx.Principal(r).ID
	}
	if err := errors.Join(httpx.CheckName("id", req.ID), httpx.CheckName("owner", req.Owner)); err != nil {
		return err
	}
	ctx := r.Context()
	// The owner first: an account is never open without one. Opening is
	// idempotent: the same settings and owner again change nothing.
	owner, err := s.owners.claim(ctx, req.ID, req.Owner)
	if err != nil {
		return err
	}
	if owner != req.Owner {
		return &httpx.StatusError{Status: http.StatusConflict, Code: "conflict", Field: "owner", Err: errOwnerConflict}
	}
	if err := s.led.Open(ctx, req.ID, wallet.WithCurrency(req.Currency), wallet.WithOverdraft(req.Overdraft)); err != nil {
		return err
	}
	b, err := s.led.Balance(ctx, req.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/accounts/"+url.PathEscape(req.ID))
	body := balanceOf(req.ID, b)
	body.Owner = owner
	httpx.WriteJSON(w, http.StatusCreated, body)
	return nil
}

func (s *server) grant(w http.ResponseWriter, r *http.Request) error {
	var req grantRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	return s.setGrant(w, r, req.Principal, true)
}

func (s *server) revoke(w http.ResponseWriter, r *http.Request) error {
	return s.setGrant(w, r, r.PathValue("principal"), false)
}

// setGrant gives principal access to the account of the path (on) or takes
// it away, and answers who has access now.
func (s *server) setGrant(w http.ResponseWriter, r *http.Request, principal string, on bool) error {
	account, ctx := r.PathValue("id"), r.Context()
	if err := errors.Join(httpx.CheckName("account", account), httpx.CheckName("principal", principal)); err != nil {
		return err
	}
	if _, err := s.led.Balance(ctx, account); err != nil {
		return err
	}
	if err := s.owners.grant(ctx, account, principal, on); err != nil {
		return err
	}
	owner, grants, err := s.owners.owner(ctx, account)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, access{Account: account, Owner: owner, Grants: append([]string{}, grants...)})
	return nil
}

func (s *server) balance(w http.ResponseWriter, r *http.Request) error {
	account := r.PathValue("id")
	owner, err := s.access(r, account, true)
	if err != nil {
		return err
	}
	b, err := s.led.Balance(r.Context(), account)
	if err != nil {
		return err
	}
	body := balanceOf(account, b)
	body.Owner = owner
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *server) entries(w http.ResponseWriter, r *http.Request) error {
	account, q := r.PathValue("id"), r.URL.Query()
	if err := s.mayAct(r, account); err != nil {
		return err
	}
	caller := httpx.Principal(r).ID
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
		key, _ := httpx.KeyOf(caller, e.TxID)
		body.Entries = append(body.Entries, entry{ID: e.ID, TxID: key, Kind: e.Kind, Delta: e.Delta,
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

// readOperation reads a keyed write's body into v (ReadOperation) and
// returns its key and the ID the ledger knows it by, scoped by the caller
// (httpx.ScopedID).
func readOperation(r *http.Request, v any, bodyID *string) (key, id string, err error) {
	if key, err = httpx.ReadOperation(r, v, bodyID); err != nil {
		return "", "", err
	}
	id, err = httpx.ScopedID(httpx.Principal(r).ID, key)
	return key, id, err
}

func (s *server) post(w http.ResponseWriter, r *http.Request, kind string,
	apply func(ctx context.Context, tx wallet.Tx, opts ...wallet.CallOption) (wallet.Result, error)) error {
	var req postingRequest
	key, id, err := readOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	tx := wallet.Tx{ID: id, Account: r.PathValue("id"), Amount: req.Amount, Currency: req.Currency, Memo: req.Memo}
	if err := s.mayAct(r, tx.Account); err != nil {
		return err
	}
	res, err := apply(r.Context(), tx)
	if err != nil {
		return httpx.Unscope(err, id, key)
	}
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, txResponseOf(key, kind, tx.Account, tx.Amount, res))
	return nil
}

func (s *server) transfer(w http.ResponseWriter, r *http.Request) error {
	var req transferRequest
	key, id, err := readOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	if err := s.mayAct(r, req.From); err != nil {
		return err
	}
	res, err := s.led.Transfer(r.Context(), wallet.Transfer{ID: id, From: req.From, To: req.To, Amount: req.Amount, Memo: req.Memo})
	if err != nil {
		return httpx.Unscope(err, id, key)
	}
	body := txResponseOf(key, "transfer", req.From, req.Amount, res)
	to := balanceOf(req.To, res.To)
	body.To, body.ToEntryID = &to, res.ToEntryID
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, body)
	return nil
}

func (s *server) hold(w http.ResponseWriter, r *http.Request) error {
	var req holdRequest
	key, id, err := readOperation(r, &req, &req.ID)
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil {
		return httpx.Errorf(http.StatusBadRequest, "malformed", "ttl %q: want a duration such as \"90s\" or \"15m\"", req.TTL)
	}
	account := r.PathValue("id")
	if err := s.mayAct(r, account); err != nil {
		return err
	}
	res, err := s.led.Hold(r.Context(), wallet.HoldReq{ID: id, Account: account, Amount: req.Amount, TTL: ttl, Memo: req.Memo})
	if err != nil {
		return httpx.Unscope(err, id, key)
	}
	httpx.WriteResult(w, http.StatusCreated, res.Replayed, txResponseOf(key, wallet.KindHold, account, req.Amount, res))
	return nil
}

// heldHold returns the account and the caller's hold the path names: the
// hold's key and its ID in the ledger.
func (s *server) heldHold(r *http.Request) (account, key, id string, err error) {
	account, key = r.PathValue("id"), r.PathValue("hold")
	if id, err = httpx.ScopedID(httpx.Principal(r).ID, key); err != nil {
		return "", "", "", err
	}
	return account, key, id, s.mayAct(r, account)
}

func (s *server) capture(w http.ResponseWriter, r *http.Request) error {
	var req captureRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		return err
	}
	account, key, id, err := s.heldHold(r)
	if err != nil {
		return err
	}
	res, err := s.led.Capture(r.Context(), account, id, req.Amount)
	if err != nil {
		return httpx.Unscope(err, id, key)
	}
	httpx.WriteResult(w, http.StatusOK, res.Replayed, txResponseOf(key, wallet.KindCapture, account, req.Amount, res))
	return nil
}

func (s *server) void(w http.ResponseWriter, r *http.Request) error {
	account, key, id, err := s.heldHold(r)
	if err != nil {
		return err
	}
	res, err := s.led.Void(r.Context(), account, id)
	if err != nil {
		return httpx.Unscope(err, id, key)
	}
	httpx.WriteResult(w, http.StatusOK, res.Replayed, txResponseOf(key, wallet.KindVoid, account, 0, res))
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
	// The same text whether the account does not exist or is another's.
	{Err: wallet.ErrAccountNotFound, Status: http.StatusNotFound, Code: "account_not_found", Message: "account not found"},
	{Err: wallet.ErrHoldNotFound, Status: http.StatusNotFound, Code: "hold_not_found"},
	{Err: wallet.ErrInsufficientFunds, Status: http.StatusUnprocessableEntity, Code: "insufficient_funds"},
	{Err: wallet.ErrCurrencyMismatch, Status: http.StatusUnprocessableEntity, Code: "currency_mismatch"},
	{Err: wallet.ErrAccountClosed, Status: http.StatusUnprocessableEntity, Code: "account_closed"},
	{Err: wallet.ErrHoldExpired, Status: http.StatusUnprocessableEntity, Code: "hold_expired"},
	// Refusals of a transfer across slot groups, stored under its ID.
	{Err: wallet.ErrDestinationFull, Status: http.StatusUnprocessableEntity, Code: "destination_full"},
	{Err: wallet.ErrTransferExpired, Status: http.StatusUnprocessableEntity, Code: "transfer_expired"},
}
