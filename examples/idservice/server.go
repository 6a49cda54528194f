package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/idgen"
)

// The HTTP service. IDs are JSON strings (JavaScript numbers lose precision
// above 2^53) with their 13-character base32 form, whose lexical order is
// numeric order.
//
//	GET /id/snowflake[?n=]        {"id":"1866...","base32":"..."}, or with n (1..1000) {"ids":[...]}
//	GET /id/segment/{name}[?n=]   the same, from the Segment of that name (n 1..1000)
//	GET /id/sequence/{name}[?n=]  the same, from the Sequence of that name (n 1..100: a round trip each)
//	GET /status                   node lease, health and each name's runway; 503 when unhealthy
//
// A name is 1–128 bytes of A-Z a-z 0-9 . _ - : with at most one '/', whose
// first part is the Redis Cluster hash tag ("shop-7/invoice"); it may be
// written as is in the path. A Segment and a Sequence of one name draw from
// one counter: their values never collide. Each name gets its generator on
// first use; at most -max-names of them, after which new names are refused
// (422 name_limit). The names come from clients, so none becomes a metric
// attribute: the Segments share one redkit.idgen.runway series, the lowest
// runway of them all, which the dashboard's ID runway panel
// (grafana/redkit.json) shows; GET /status gives each name's runway.
//
// Guarantees, from idgen: Snowflake IDs are unique across every instance
// sharing the -service name and increasing within one instance; segment
// values are unique across instances and increasing within one; sequence
// values are strictly increasing across all of them. So each batch is in
// increasing order, and so are the IDs one client gets from one instance
// request after request.
//
// Every route needs an API key ("Authorization: Bearer ...") with the ids
// scope; GET /healthz and GET /readyz need none (package app).
//
// Errors are JSON problems (httpx.Problem): 400 bad name or n, 401
// unauthenticated, 403 forbidden (a key without ids), 422 name_limit
// or exhausted (a counter reached 2^53-1), 503 unavailable (Redis unreachable
// and the segment's runway spent), lease_lost (the node lease could not be
// renewed in time; it recovers by itself), clock_behind or closed.

// Batch bounds.
const (
	maxBatch         = 1000
	maxSequenceBatch = 100
)

// config is what newGenerators needs.
type config struct {
	Service  string // Snowflake service name: the node table leased from
	MaxNames int    // most segment and sequence names
	LeaseTTL time.Duration
	Options  []idgen.Option // telemetry; added to every generator's options
}

// generators holds the service's ID generators: one leased Snowflake and a
// Segment and a Sequence per name, created on first use.
type generators struct {
	rdb redis.UniversalClient
	cfg config
	sf  *idgen.Snowflake

	last atomic.Int64 // highest Snowflake ID issued by this process

	mu        sync.Mutex
	segments  map[string]*idgen.Segment
	sequences map[string]*idgen.Sequence
	closed    bool
}

// newGenerators leases a Snowflake node for cfg.Service.
func newGenerators(ctx context.Context, rdb redis.UniversalClient, cfg config) (*generators, error) {
	opts := append([]idgen.Option{idgen.WithLeaseTTL(cfg.LeaseTTL)}, cfg.Options...)
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, cfg.Service, opts...)
	if err != nil {
		return nil, fmt.Errorf("snowflake node lease: %w", err)
	}
	return &generators{rdb: rdb, cfg: cfg, sf: sf,
		segments: make(map[string]*idgen.Segment), sequences: make(map[string]*idgen.Sequence)}, nil
}

// Close stops every Segment's background fetch and releases the node lease.
func (g *generators) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	var errs []error
	for _, s := range g.segments {
		errs = append(errs, s.Close())
	}
	return errors.Join(append(errs, g.sf.Close())...)
}

// errNameLimit refuses a new name once MaxNames are served.
var errNameLimit = errors.New("idservice: too many names")

// segment returns the Segment of name. Its runway joins the one
// redkit.idgen.runway series of every Segment here (no idgen.WithSegmentLabel):
// a name is whatever a client put in the path, and a label per name would
// let any key holder add up to MaxNames series to every scrape.
func (g *generators) segment(name string) (*idgen.Segment, error) {
	return lookup(g, g.segments, name, func() (*idgen.Segment, error) {
		return idgen.NewSegment(g.rdb, name, g.cfg.Options...)
	})
}

func (g *generators) sequence(name string) (*idgen.Sequence, error) {
	return lookup(g, g.sequences, name, func() (*idgen.Sequence, error) {
		return idgen.NewSequence(g.rdb, name, g.cfg.Options...)
	})
}

// lookup returns m[name], creating it with create (which validates the
// name) while fewer than MaxNames generators exist.
func lookup[T any](g *generators, m map[string]*T, name string, create func() (*T, error)) (*T, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, idgen.ErrClosed
	}
	if gen, ok := m[name]; ok {
		return gen, nil
	}
	gen, err := create() // a bad name is a 400 even when no name is left
	if err != nil {
		return nil, err
	}
	if len(g.segments)+len(g.sequences) >= g.cfg.MaxNames {
		if c, ok := any(gen).(io.Closer); ok {
			_ = c.Close() // nothing started yet: a Segment fetches on first use
		}
		return nil, fmt.Errorf("%w: this service serves at most %d names", errNameLimit, g.cfg.MaxNames)
	}
	m[name] = gen
	return gen, nil
}

// nextSnowflake issues a Snowflake ID and keeps track of the highest.
func (g *generators) nextSnowflake(ctx context.Context) (idgen.ID, error) {
	id, err := g.sf.Next(ctx)
	if err != nil {
		return id, err
	}
	for {
		last := g.last.Load()
		if int64(id) <= last || g.last.CompareAndSwap(last, int64(id)) {
			return id, nil
		}
	}
}

// generatorFunc adapts a function to idgen.Generator.
type generatorFunc func(ctx context.Context) (idgen.ID, error)

func (f generatorFunc) Next(ctx context.Context) (idgen.ID, error) { return f(ctx) }

type idBody struct {
	ID     idgen.ID `json:"id"` // a decimal string
	Base32 string   `json:"base32"`
}

type batchBody struct {
	IDs []idBody `json:"ids"`
}

type statusBody struct {
	Snowflake snowflakeStatus `json:"snowflake"`
	Segments  []segmentStatus `json:"segments"`
	Sequences []string        `json:"sequences"`
	Names     int             `json:"names"`
	MaxNames  int             `json:"max_names"`
}

type snowflakeStatus struct {
	Service  string `json:"service"`
	Node     int64  `json:"node"`      // -1 while no node is leased
	LeaseTTL string `json:"lease_ttl"` // renewed every third of it
	// LeaseUntil is when IDs stop (lease_lost) unless a renewal gets
	// through first; LeaseRenewed when the last one that did was sent.
	LeaseUntil   *time.Time `json:"lease_until,omitempty"`
	LeaseRenewed *time.Time `json:"lease_renewed,omitempty"`
	// HighWater is the node's high-water mark in Redis: no ID of the node
	// has a later time, and a process that takes the node next issues IDs
	// only after it.
	HighWater *time.Time `json:"high_water,omitempty"`
	// LeaseError says why the last renewal failed, until one succeeds.
	LeaseError string `json:"lease_error,omitempty"`
	// Healthy is true when an ID could be issued just now (status draws
	// one); Error says why not.
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
	// LastID is the highest ID this process issued, and LastIDTime its
	// timestamp: the next ID is above it.
	LastID     *idgen.ID  `json:"last_id,omitempty"`
	LastIDTime *time.Time `json:"last_id_time,omitempty"`
}

// publicError is what a client is told about err: its problem code and
// text.
func publicError(ctx context.Context, err error) string {
	p := httpx.ProblemOf(httpx.Resolve(ctx, err, statusError))
	return p.Code + ": " + p.Error
}

type segmentStatus struct {
	Name   string `json:"name"`
	Runway int64  `json:"runway"` // values it can hand out without Redis
}

// status reports the generators; ok is false when no Snowflake ID can be
// issued. An error is told as its problem code and public text (what an
// error response would say), never as the text of its cause, which may
// name Redis's address; log, when not nil, gets the causes.
func (g *generators) status(ctx context.Context, log *slog.Logger) (st statusBody, ok bool) {
	_, err := g.nextSnowflake(ctx)
	lease := g.sf.Lease()
	st.Snowflake = snowflakeStatus{Service: lease.Service, Node: lease.Node, LeaseTTL: lease.TTL.String(),
		LeaseUntil: utc(lease.Until), LeaseRenewed: utc(lease.Renewed), HighWater: utc(lease.HighWater), Healthy: err == nil}
	if lease.Err != nil {
		st.Snowflake.LeaseError = publicError(ctx, lease.Err)
	}
	if err != nil {
		st.Snowflake.Error = publicError(ctx, err)
	}
	if log != nil && (err != nil || lease.Err != nil) {
		log.Warn("idservice: status", "err", err, "lease_err", lease.Err)
	}
	if last := idgen.ID(g.last.Load()); last > 0 {
		st.Snowflake.LastID, st.Snowflake.LastIDTime = &last, utc(last.SnowflakeTime())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st.Segments, st.Sequences = []segmentStatus{}, []string{}
	for name, s := range g.segments {
		st.Segments = append(st.Segments, segmentStatus{Name: name, Runway: s.Runway()})
	}
	for name := range g.sequences {
		st.Sequences = append(st.Sequences, name)
	}
	slices.SortFunc(st.Segments, func(a, b segmentStatus) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(st.Sequences)
	st.Names, st.MaxNames = len(g.segments)+len(g.sequences), g.cfg.MaxNames
	return st, err == nil
}

// scopeIDs is the one scope of the service's API keys: every route needs
// it.
const scopeIDs = "ids"

// scopes lists every scope, for the keys file and the generated admin key.
var scopes = []string{scopeIDs}

// newServer returns the service's routes over g. Issuing IDs counts against
// the caller's rate limit (edge.Limit), off unless -rate-limit is given.
func newServer(g *generators, edge httpx.Edge) http.Handler {
	log := edge.Log
	mux := httpx.NewMux("idservice", edge, statusError)
	mux.HandleMetered("GET /id/snowflake", scopeIDs, func(w http.ResponseWriter, r *http.Request) error {
		return issue(w, r, generatorFunc(g.nextSnowflake), maxBatch)
	})
	mux.HandleMetered("GET /id/segment/{name...}", scopeIDs, func(w http.ResponseWriter, r *http.Request) error {
		seg, err := g.segment(r.PathValue("name"))
		if err != nil {
			return err
		}
		return issue(w, r, seg, maxBatch)
	})
	mux.HandleMetered("GET /id/sequence/{name...}", scopeIDs, func(w http.ResponseWriter, r *http.Request) error {
		seq, err := g.sequence(r.PathValue("name"))
		if err != nil {
			return err
		}
		return issue(w, r, seq, maxSequenceBatch)
	})
	mux.Handle("GET /status", scopeIDs, func(w http.ResponseWriter, r *http.Request) error {
		st, ok := g.status(r.Context(), log)
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		httpx.WriteJSON(w, code, st)
		return nil
	})
	return mux
}

// issue writes one ID, or ?n= of them in increasing order.
func issue(w http.ResponseWriter, r *http.Request, gen idgen.Generator, most int) error {
	q := r.URL.Query()
	if !q.Has("n") {
		id, err := gen.Next(r.Context())
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, idBody{id, id.Base32()})
		return nil
	}
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n < 1 || n > most {
		return httpx.Errorf(http.StatusBadRequest, "malformed", "n %q: want 1..%d", q.Get("n"), most)
	}
	body := batchBody{IDs: make([]idBody, n)}
	for i := range body.IDs {
		id, err := gen.Next(r.Context())
		if err != nil {
			return err
		}
		body.IDs[i] = idBody{id, id.Base32()}
	}
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

// statusError gives err the status ARCHITECTURE.md §10 gives it, or returns it
// unchanged when it is unexpected (a 500).
func statusError(err error) error { return httpx.StatusOf(err, errorStatuses) }

// errorStatuses are the statuses of idgen's errors and of the name limit.
// A 503 tells its own text: its cause may name Redis's address.
var errorStatuses = []httpx.ErrorStatus{
	{Err: idgen.ErrInvalid, Status: http.StatusBadRequest, Code: "invalid"},
	{Err: errNameLimit, Status: http.StatusUnprocessableEntity, Code: "name_limit"},
	{Err: idgen.ErrExhausted, Status: http.StatusUnprocessableEntity, Code: "exhausted"},
	{Err: idgen.ErrUnavailable, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: httpx.UnavailableMessage},
	{Err: idgen.ErrLeaseLost, Status: http.StatusServiceUnavailable, Code: "lease_lost",
		Message: "no Snowflake IDs for now: the node lease could not be renewed in time; it recovers by itself, try again after Retry-After"},
	{Err: idgen.ErrClockBehind, Status: http.StatusServiceUnavailable, Code: "clock_behind",
		Message: "no Snowflake IDs for now: the clock is behind the node's last ID; try again after Retry-After"},
	{Err: idgen.ErrClosed, Status: http.StatusServiceUnavailable, Code: "closed", Message: "the service is shutting down"},
}

// utc returns t in UTC for a JSON body, or nil when it is zero.
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
