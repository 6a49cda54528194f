// Package httpx holds the JSON and error conventions the example services
// share: 400 for a malformed request, 401 without a valid credential, 403
// without the route's scope, 404 for an unknown resource, 409 for an
// idempotency key reused with a different body, 422 for a business refusal,
// 429 past the caller's rate limit, 503 (with Retry-After) when the service
// is overloaded or an outcome is unknown, 200/201 for success, with the
// first response replayed for a repeated key.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redkit-go/redkit/examples/kit/auth"
)

// MaxBody is the largest request body a handler reads.
const MaxBody = 64 << 10

// IdempotencyKeyHeader is the request header carrying the caller's
// operation ID, as in Stripe's API.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set to "true" on a response that repeats the first
// response to the same idempotency key.
const ReplayedHeader = "Idempotent-Replayed"

// Problem is the body of every error response.
type Problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`  // stable, machine-readable: "sold_out", "conflict", ...
	Error  string `json:"error"` // for people
	// Field names the field that differs from the first request with the
	// same idempotency key, in a 409 that says.
	Field string `json:"field,omitempty"`
}

// StatusError is an error that knows its HTTP status and code, and for a
// 409, the field that differs (Problem.Field).
type StatusError struct {
	Status int
	Code   string
	Field  string
	Err    error
	// RetryAfter, for a 429 or 503, is when to try again; it is sent as
	// Retry-After in whole seconds, at least 1.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Errorf returns a *StatusError.
func Errorf(status int, code, format string, args ...any) error {
	return &StatusError{Status: status, Code: code, Err: fmt.Errorf(format, args...)}
}

// ReadJSON decodes the request body into v: one JSON value, no unknown
// fields, at most MaxBody bytes. Errors are 400s.
func ReadJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return Errorf(http.StatusBadRequest, "malformed", "empty body: want a JSON object")
		}
		return Errorf(http.StatusBadRequest, "malformed", "body: %v", err)
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "malformed", "body: more than one JSON value")
	}
	return nil
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteResult writes a successful result, marking a replay: the caller's
// earlier request with the same key had already done the work, and this is
// its response again.
func WriteResult(w http.ResponseWriter, status int, replayed bool, v any) {
	if replayed {
		w.Header().Set(ReplayedHeader, "true")
	}
	WriteJSON(w, status, v)
}

// ErrorStatus gives the errors that match Err (errors.Is) an HTTP status
// and a problem code.
type ErrorStatus struct {
	Err    error
	Status int
	Code   string
}

// StatusOf returns err as a *StatusError with the status and code of the
// first entry of table that err matches, or err unchanged when it matches
// none.
func StatusOf(err error, table []ErrorStatus) error {
	for _, e := range table {
		if errors.Is(err, e.Err) {
			return &StatusError{Status: e.Status, Code: e.Code, Err: err}
		}
	}
	return err
}

// UnknownOutcome returns the 503 for an operation whose outcome is unknown
// (the library's ErrUnknownOutcome: the reply from Redis was lost and the
// retries ran out). The client learns what happened by sending the same
// request again with the same Idempotency-Key.
func UnknownOutcome(err error) error {
	return &StatusError{Status: http.StatusServiceUnavailable, Code: "unknown_outcome",
		Err: fmt.Errorf("outcome unknown, send the same request again with the same %s: %w", IdempotencyKeyHeader, err)}
}

// WriteError writes err as a Problem. A *StatusError gives its status and
// code (a 429 or 503 also gets Retry-After, 1 s unless it says more; a 401
// gets WWW-Authenticate); anything else is a 500 whose text is not shown to
// the client.
func WriteError(w http.ResponseWriter, err error) {
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			secs := max(1, int64((se.RetryAfter+time.Second-1)/time.Second))
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
		}
		WriteJSON(w, se.Status, Problem{Status: se.Status, Code: se.Code, Error: OnePrefix(se.Err.Error()), Field: se.Field})
		return
	}
	WriteJSON(w, http.StatusInternalServerError, Problem{Status: 500, Code: "internal", Error: "internal error"})
}

// modulePrefixes are the prefixes redkit's errors start with. A module
// wraps its own sentinel errors, which carry the prefix too, so a message
// reads "stock: level phone: stock: not found".
var modulePrefixes = []string{"stock: ", "wallet: ", "idgen: ", "lock: "}

// OnePrefix returns msg with every repetition of a module prefix after its
// first occurrence removed: "stock: level phone: stock: not found" becomes
// "stock: level phone: not found".
func OnePrefix(msg string) string {
	for _, p := range modulePrefixes {
		i := strings.Index(msg, p)
		if i < 0 {
			continue
		}
		head, tail := msg[:i+len(p)], msg[i+len(p):]
		msg = head + strings.ReplaceAll(tail, p, "")
	}
	return msg
}

// ReadOperation reads the body of a write into v, as ReadJSON does, and
// returns its operation ID: OperationID with *bodyID, the ID field of v.
func ReadOperation(r *http.Request, v any, bodyID *string) (string, error) {
	if err := ReadJSON(r, v); err != nil {
		return "", err
	}
	return OperationID(r, *bodyID)
}

// OperationID returns the operation ID of a write: the Idempotency-Key
// header, or else fromBody. When both are given they must agree. An empty
// result is a 400.
func OperationID(r *http.Request, fromBody string) (string, error) {
	h := strings.TrimSpace(r.Header.Get(IdempotencyKeyHeader))
	switch {
	case h != "" && fromBody != "" && h != fromBody:
		return "", Errorf(http.StatusBadRequest, "malformed", "%s %q and body ID %q differ", IdempotencyKeyHeader, h, fromBody)
	case h != "":
		return h, nil
	case fromBody != "":
		return fromBody, nil
	}
	return "", Errorf(http.StatusBadRequest, "malformed", "missing operation ID: send an %s header or an id in the body", IdempotencyKeyHeader)
}

// Edge is what every route of a service shares at the HTTP edge: who is
// calling (Auth, the one seam to replace with another scheme), how often a
// principal may call the metered routes (Limit), and where unexpected
// errors are logged.
type Edge struct {
	Auth  auth.Authenticator
	Limit Limiter // nil: no rate limit
	Log   *slog.Logger
}

// Limiter counts a principal's requests to the metered routes.
type Limiter interface {
	// Allow counts one request of principal. It returns a *StatusError
	// (429 with RetryAfter) when the principal is over its limit.
	Allow(ctx context.Context, principal string) error
}

// Mux routes requests, as an http.ServeMux does, to handlers that return
// their error instead of writing it. Every route names the scope a caller
// needs: the Edge's Authenticator finds the principal (401 without one),
// the principal must have the scope (403), and the handler finds it in the
// request's context (auth.PrincipalFrom). The error a handler returns goes
// through the service's status function, which gives it its HTTP status and
// problem code (a *StatusError), and WriteError writes it. An error that
// comes out without a status is unexpected: it is logged and answered with
// a 500.
type Mux struct {
	mux    http.ServeMux
	name   string
	edge   Edge
	status func(error) error
}

var _ http.Handler = (*Mux)(nil)

// NewMux returns a Mux for the service called name (the prefix of its log
// lines). status maps an error to a *StatusError, or returns it unchanged
// when it is unexpected; it never sees an error that is a *StatusError
// already. edge.Auth is required.
func NewMux(name string, edge Edge, status func(error) error) *Mux {
	if edge.Auth == nil {
		panic("httpx: NewMux without an Authenticator")
	}
	if edge.Log == nil {
		edge.Log = slog.New(slog.DiscardHandler)
	}
	return &Mux{name: name, edge: edge, status: status}
}

// Handle registers h for pattern, an http.ServeMux pattern, for callers
// with scope.
func (m *Mux) Handle(pattern, scope string, h func(http.ResponseWriter, *http.Request) error) {
	m.handle(pattern, scope, false, h)
}

// HandleMetered is Handle for a route whose calls count against the
// caller's rate limit (buys, payments): they cost Redis work and are what
// a runaway or hostile client would repeat.
func (m *Mux) HandleMetered(pattern, scope string, h func(http.ResponseWriter, *http.Request) error) {
	m.handle(pattern, scope, true, h)
}

func (m *Mux) handle(pattern, scope string, metered bool, h func(http.ResponseWriter, *http.Request) error) {
	m.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := m.serve(w, r, scope, metered, h); err != nil {
			m.fail(w, r, err)
		}
	})
}

func (m *Mux) serve(w http.ResponseWriter, r *http.Request, scope string, metered bool, h func(http.ResponseWriter, *http.Request) error) error {
	p, err := m.edge.Auth.Authenticate(r)
	if err != nil {
		// The text is the Authenticator's, which never holds the
		// credential; what it says is why the credential was refused.
		return &StatusError{Status: http.StatusUnauthorized, Code: "unauthenticated", Err: err}
	}
	if !p.Has(scope) {
		return Errorf(http.StatusForbidden, "forbidden", "this route needs the %q scope", scope)
	}
	if metered && m.edge.Limit != nil {
		if err := m.edge.Limit.Allow(r.Context(), p.ID); err != nil {
			return err
		}
	}
	return h(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
}

func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

func (m *Mux) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *StatusError
	if !errors.As(err, &se) {
		err = m.status(err)
		if !errors.As(err, &se) {
			m.edge.Log.Error(m.name+": request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	WriteError(w, err)
}

// Principal returns the authenticated principal of a request a Mux
// routed.
func Principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}
