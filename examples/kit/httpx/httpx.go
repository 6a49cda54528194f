// Package httpx holds the JSON and error conventions the example services
// share: 400 for a malformed request, 401 without a valid credential, 403
// without the route's scope, 404 for an unknown resource, 409 for an
// idempotency key reused with a different body, 422 for a business refusal,
// 429 past the caller's rate limit, 503 (with Retry-After) when the service
// is overloaded, Redis does not answer in time or an outcome is unknown,
// 200/201 for success, with the first response replayed for a repeated key.
//
// An error body tells the client what it can act on and nothing about the
// service's insides: a 5xx never carries the text of its cause (a Redis
// address, a Redis error reply, a file path); the Mux logs that for the
// operator.
package httpx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

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
	// Message is what the client is told (Problem.Error). When empty, a
	// 4xx tells Err's text and a 5xx only its status's name: the cause of
	// a 5xx is for the log.
	Message string
	Err     error
	// RetryAfter, for a 429 or 503, is when to try again; it is sent as
	// Retry-After in whole seconds, at least 1.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// public returns what the client is told.
func (e *StatusError) public() string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Status >= 500:
		return http.StatusText(e.Status)
	}
	return OnePrefix(e.Err.Error())
}

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

// ErrorStatus gives the errors that match Err (errors.Is) an HTTP status,
// a problem code and the Message the client is told (StatusError.Message:
// empty, a 4xx tells the error's text, a 5xx only its status's name).
type ErrorStatus struct {
	Err     error
	Status  int
	Code    string
	Message string
}

// StatusOf returns err as a *StatusError with the status, code and message
// of the first entry of table that err matches, or err unchanged when it
// matches none.
func StatusOf(err error, table []ErrorStatus) error {
	for _, e := range table {
		if errors.Is(err, e.Err) {
			return &StatusError{Status: e.Status, Code: e.Code, Message: e.Message, Err: err}
		}
	}
	return err
}

// UnknownOutcomeMessage is what a client is told about a write whose
// outcome is unknown.
const UnknownOutcomeMessage = "outcome unknown: the write may or may not have been applied; send the same request again " +
	"with the same " + IdempotencyKeyHeader + " after Retry-After to learn what happened (it is applied at most once)"

// UnavailableMessage is what a client is told when Redis did not answer in
// time and nothing the request asked for is known to have happened.
const UnavailableMessage = "temporarily unavailable: try again after Retry-After " +
	"(a write sent again with the same " + IdempotencyKeyHeader + " is applied at most once)"

// UnknownOutcome returns the 503 for an operation whose outcome is unknown
// (the library's ErrUnknownOutcome: the reply from Redis was lost, or did
// not come before the request's deadline, and the retries ran out). The
// client learns what happened by sending the same request again with the
// same Idempotency-Key.
func UnknownOutcome(err error) error {
	return &StatusError{Status: http.StatusServiceUnavailable, Code: "unknown_outcome", Message: UnknownOutcomeMessage, Err: err}
}

// Unavailable returns the 503 for a request that Redis did not answer in
// time, when nothing it asked for may have been applied: a read, or a write
// the library knows it never sent.
func Unavailable(err error) error {
	return &StatusError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: UnavailableMessage, Err: err}
}

// WriteError writes err as a Problem. A *StatusError gives its status and
// code (a 429 or 503 also gets Retry-After, 1 s unless it says more; a 401
// gets WWW-Authenticate) and its public text (see StatusError.Message);
// anything else is a 500 whose text is not shown to the client.
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
	}
	p := ProblemOf(err)
	WriteJSON(w, p.Status, p)
}

// transient reports whether err says that Redis did not answer (in time, or
// at all) rather than that something is wrong with the request or the
// service: the context ended, the connection failed, the pool had no
// connection, or Redis replied that it cannot serve now (LOADING, BUSY, a
// failover under way, out of memory).
func transient(err error) bool {
	var ne net.Error
	var re redis.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed), errors.As(err, &ne):
		return true
	case errors.As(err, &re):
		code, _, _ := strings.Cut(re.Error(), " ")
		return slices.Contains([]string{"LOADING", "BUSY", "MASTERDOWN", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS", "OOM"}, code)
	}
	return false
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

// OperationID returns the operation ID of a write as the client gave it:
// the Idempotency-Key header, or else fromBody. When both are given they
// must agree. An empty result is a 400. The ID the store knows is
// ScopedID's, which keeps the IDs of principals apart.
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

// An ID a principal gives (an Idempotency-Key, an order ID) means
// something only within that principal, as Stripe's keys do within an
// account: two principals sending the same key never meet, and what one
// learns about an ID (taken, refused, its kind) is only ever about its own.
// The store knows the key as ScopedID's result, the key behind a tag of
// the principal: tagLen hex digits of a SHA-256 of its name and a '.'.
const tagLen = 16

// MaxKeyLen is the longest key a principal may give: the 128 bytes of an ID
// in redkit, less the principal's tag.
const MaxKeyLen = 128 - tagLen - 1

// ScopedID returns the ID under which the store knows principal's key. A key
// is 1 to MaxKeyLen bytes of A-Z a-z 0-9 . _ - : with at most one '/' that
// neither starts nor ends it (redkit's rule for IDs); any other is a 400.
func ScopedID(principal, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return principalTag(principal) + "." + key, nil
}

// KeyOf returns the key principal gave for id, a result of ScopedID, and
// false when id is not one of principal's.
func KeyOf(principal, id string) (key string, ok bool) {
	tag := principalTag(principal)
	if len(id) <= len(tag)+1 || id[:len(tag)] != tag || id[len(tag)] != '.' {
		return "", false
	}
	return id[len(tag)+1:], true
}

func principalTag(principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return hex.EncodeToString(sum[:])[:tagLen]
}

func checkKey(key string) error {
	if !validID(key, MaxKeyLen) {
		return Errorf(http.StatusBadRequest, "invalid", "operation ID %q: want 1-%d bytes of A-Z a-z 0-9 . _ - : "+
			"with at most one '/', neither first nor last", key, MaxKeyLen)
	}
	return nil
}

// CheckName returns a 400 naming field unless s is a name redkit accepts:
// 1-128 bytes of A-Z a-z 0-9 . _ - : with at most one '/', neither first
// nor last. A service checks a name itself before it builds a key of its
// own from it.
func CheckName(field, s string) error {
	if !validID(s, 128) {
		return Errorf(http.StatusBadRequest, "invalid", "%s %q: want 1-128 bytes of A-Z a-z 0-9 . _ - : "+
			"with at most one '/', neither first nor last", field, s)
	}
	return nil
}

func validID(s string, most int) bool {
	if len(s) == 0 || len(s) > most || s[0] == '/' || s[len(s)-1] == '/' || strings.Count(s, "/") > 1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("._-:/", b) >= 0) {
			return false
		}
	}
	return true
}

// Unscope returns err told with key where its text has id, the scoped ID of
// key (ScopedID): a client reads about its key, not about the store's ID.
// errors.Is and errors.As see err as it was.
func Unscope(err error, id, key string) error {
	if err == nil {
		return nil
	}
	return &unscoped{err: err, id: id, key: key}
}

type unscoped struct {
	err     error
	id, key string
}

func (e *unscoped) Error() string { return strings.ReplaceAll(e.err.Error(), e.id, e.key) }
func (e *unscoped) Unwrap() error { return e.err }

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
		SetRoute(r.Context(), pattern)
		if err := m.serve(w, r, scope, metered, h); err != nil {
			m.fail(w, r, pattern, err)
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

// Resolve returns err as a *StatusError: as it is when it is one already,
// else as status (a service's mapping of its errors) gives it, else a 503
// unavailable when Redis did not answer (in time: ctx, the request's, has
// ended; or at all). An error none of these claims is returned unchanged:
// something unexpected, a 500.
func Resolve(ctx context.Context, err error, status func(error) error) error {
	var se *StatusError
	if errors.As(err, &se) {
		return err
	}
	if err = status(err); errors.As(err, &se) {
		return err
	}
	if ctx.Err() != nil || transient(err) {
		return Unavailable(err)
	}
	return err
}

// ProblemOf returns the Problem that WriteError writes for err, for a body
// that reports an error among other things (a status page).
func ProblemOf(err error) Problem {
	var se *StatusError
	if !errors.As(err, &se) {
		return Problem{Status: 500, Code: "internal", Error: "internal error"}
	}
	return Problem{Status: se.Status, Code: se.Code, Error: se.public(), Field: se.Field}
}

// fail answers err, resolved (Resolve) with the service's status function.
// A read (GET, HEAD) whose library call ended in an unknown outcome (a
// balance releases expired holds as it reads) is answered 503 unavailable:
// the client asked for nothing to be done. Every 5xx is logged with its
// cause, which its body does not show.
func (m *Mux) fail(w http.ResponseWriter, r *http.Request, route string, err error) {
	var se *StatusError
	err = Resolve(r.Context(), err, m.status)
	if errors.As(err, &se) && se.Code == "unknown_outcome" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		err = Unavailable(se.Err)
	}
	switch {
	case !errors.As(err, &se):
		m.edge.Log.Error(m.name+": request failed", "route", route, "err", err)
	case se.Status >= 500:
		m.edge.Log.Warn(m.name+": request failed", "route", route, "status", se.Status, "code", se.Code, "err", se.Err)
	}
	WriteError(w, err)
}

// Principal returns the authenticated principal of a request a Mux
// routed.
func Principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

type routeKey struct{}

// route is where SetRoute records the route that serves a request.
type route struct{ pattern string }

// TrackRoute returns ctx with room for the route that serves its request
// (SetRoute), and a function that returns the route's pattern once the
// request is served: "" when no route matched. Telemetry names requests by
// it, a bounded set, where the path would be anything a client sends.
func TrackRoute(ctx context.Context) (context.Context, func() string) {
	rt := new(route)
	return context.WithValue(ctx, routeKey{}, rt), func() string { return rt.pattern }
}

// SetRoute records pattern, as registered ("POST /accounts/{id}/debits"),
// as the route serving the request of ctx, for TrackRoute. The Mux calls
// it for its routes; it does nothing for a ctx from no TrackRoute.
func SetRoute(ctx context.Context, pattern string) {
	if rt, ok := ctx.Value(routeKey{}).(*route); ok {
		rt.pattern = pattern
	}
}
