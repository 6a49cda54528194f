package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/auth"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/health"
)

// Environment variables that give a service its API keys (see auth.Keys
// for the format): the keys themselves, or a file of them.
const (
	KeysEnv     = "API_KEYS"
	KeysFileEnv = "API_KEYS_FILE"
)

// MetricsScope is the scope a key needs to read GET /metrics on a service's
// own server. Every service knows it besides its own scopes (Launch adds
// it), and the generated admin key has it.
const MetricsScope = "metrics:read"

// ServerConfig is what a service needs to be safe to expose. Flags
// registers each field as a flag.
type ServerConfig struct {
	KeysFile string // stored API keys; KeysFileEnv or KeysEnv otherwise
	NewKey   string // "principal:scope,scope": print a new key and exit

	ReadTimeout  time.Duration // whole request, body included
	WriteTimeout time.Duration // from the end of the headers to the end of the response
	IdleTimeout  time.Duration // a keep-alive connection with no request
	// MaxHeaderBytes bounds the request line and the header lines of a
	// request, counted as sent, the blank line that ends them included;
	// past it the answer is 431.
	MaxHeaderBytes int
	MaxInFlight    int  // requests being served at once; past it, 503 at once
	RateLimit      Rate // metered requests per principal; the zero Rate: none
	// Metered says what RateLimit counts, for the help of -rate-limit: the
	// requests of the service's metered routes ("buys and reservations").
	// Empty: "metered requests".
	Metered string
}

// Rate is a rate limit: N requests per Per, in bursts of up to N. As a flag
// it reads "5/s", "300/m", "1000/h", or "0" for none.
type Rate struct {
	N   int
	Per time.Duration
}

func (r Rate) String() string {
	switch r.Per {
	case 0:
		return "0"
	case time.Minute:
		return fmt.Sprintf("%d/m", r.N)
	case time.Hour:
		return fmt.Sprintf("%d/h", r.N)
	}
	return fmt.Sprintf("%d/s", r.N)
}

// Set parses s as the flag does.
func (r *Rate) Set(s string) error {
	if s == "0" || s == "off" {
		*r = Rate{}
		return nil
	}
	n, unit, ok := strings.Cut(s, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	v, err := strconv.Atoi(n)
	if !ok || per == 0 || err != nil || v < 1 {
		return fmt.Errorf("%q: want N/s, N/m or N/h with N at least 1, or 0 for no limit", s)
	}
	*r = Rate{N: v, Per: per}
	return nil
}

// Flags registers cfg's flags on fs, with cfg's values as defaults.
func (cfg *ServerConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.KeysFile, "keys", os.Getenv(KeysFileEnv), "file of hashed API keys (default $"+KeysFileEnv+"; or the keys in $"+KeysEnv+")")
	fs.StringVar(&cfg.NewKey, "new-key", "", "print a new API key for `principal:scope,...` and the line that stores it, and exit")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", cfg.ReadTimeout, "longest time to read a request, body included")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "longest time to answer a request once read")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "how long a keep-alive connection may wait for its next request")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "requests served at once; more are answered 503 with Retry-After")
	metered := cfg.Metered
	if metered == "" {
		metered = "metered requests"
	}
	fs.Var(&cfg.RateLimit, "rate-limit", metered+" per principal, as `N/s`, N/m or N/h, kept in Redis (0: no limit)")
}

// DefaultServerConfig returns the limits the services start with;
// rateLimit is the service's own.
func DefaultServerConfig(rateLimit Rate) ServerConfig {
	return ServerConfig{
		ReadTimeout:    10 * time.Second,
		WriteTimeout:   15 * time.Second,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: 16 << 10,
		MaxInFlight:    256,
		RateLimit:      rateLimit,
	}
}

func (cfg ServerConfig) check() error {
	switch {
	case cfg.ReadTimeout <= 0 || cfg.WriteTimeout <= 0 || cfg.IdleTimeout <= 0:
		return errors.New("-read-timeout, -write-timeout and -idle-timeout must be positive")
	case cfg.MaxInFlight < 1:
		return errors.New("-max-in-flight must be at least 1")
	}
	return nil
}

// PrintNewKey handles -new-key: it prints a new key for the principal and
// scopes spec names ("alice:buy" or "ops:sale:admin,read"), each one of
// known, and the line that stores it. done is false when -new-key was not
// given.
func PrintNewKey(fs *flag.FlagSet, cfg ServerConfig, known []string, stdout io.Writer) (done bool, err error) {
	if cfg.NewKey == "" {
		return false, nil
	}
	principal, scopeList, ok := strings.Cut(cfg.NewKey, ":")
	if !ok {
		return true, UsageError(fs, fmt.Errorf("-new-key %q: want principal:scope,... (scopes: %s)", cfg.NewKey, strings.Join(known, ", ")))
	}
	scopes := strings.Split(scopeList, ",")
	key, line, err := auth.NewKey(principal, scopes...)
	if err == nil {
		_, err = auth.ParseKeys(line, known...) // refuses unknown scopes
	}
	if err != nil {
		return true, UsageError(fs, err)
	}
	fmt.Fprintf(stdout, "API key (give it to %s; it is not stored anywhere):\n  %s\n"+
		"Line for the keys file (-keys, $%s) or $%s:\n  %s\n", principal, key, KeysFileEnv, KeysEnv, line)
	return true, nil
}

// Credentials returns the Authenticator for a service that will listen on
// addr and knows scopes: the keys of cfg.KeysFile or $API_KEYS when given.
// With none given it makes an admin key with every scope and prints it,
// once, on stderr (as notebook servers print their token), but only for a
// loopback addr: on any other address it refuses, so that a service is
// never exposed with a key nobody chose to give out.
func Credentials(addr string, cfg ServerConfig, scopes []string, stderr io.Writer) (auth.Authenticator, error) {
	var text, from string
	switch {
	case cfg.KeysFile != "":
		b, err := os.ReadFile(cfg.KeysFile)
		if err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
		text, from = string(b), cfg.KeysFile
	case os.Getenv(KeysEnv) != "":
		text, from = os.Getenv(KeysEnv), "$"+KeysEnv
	}
	if from != "" {
		k, err := auth.ParseKeys(text, scopes...)
		if err != nil {
			return nil, fmt.Errorf("API keys in %s: %w", from, err)
		}
		return k, nil
	}
	if !loopback(addr) {
		return nil, fmt.Errorf("refusing to serve on %s, which is not a loopback address, without API keys: "+
			"give them with -keys FILE, $%s or $%s (make one with -new-key principal:scope,...), "+
			"or serve on 127.0.0.1 to get a generated admin key", addr, KeysFileEnv, KeysEnv)
	}
	key, line, err := auth.NewKey("admin", scopes...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "\nNo API keys given (-keys, $%s, $%s): this run's admin key, with every scope (%s), shown only now:\n\n"+
		"    Authorization: Bearer %s\n\n", KeysFileEnv, KeysEnv, strings.Join(scopes, ", "), key)
	return auth.ParseKeys(line, scopes...)
}

// loopback reports whether a listen address reaches this host only: an
// IP literal on the loopback network or "localhost". An empty host (":8080")
// is every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RateLimit returns the Limiter for cfg.RateLimit per principal, GCRA in
// Redis (github.com/go-redis/redis_rate), so every instance of the service
// counts against the same budget; nil for no limit. Keys are
// "rate:<service>:{<principal>}", one per principal, each expiring once its
// principal has been idle long enough to have its whole burst back.
func (a *App) RateLimit(cfg ServerConfig) httpx.Limiter {
	if cfg.RateLimit.N == 0 {
		return nil
	}
	limit := redis_rate.Limit{Rate: cfg.RateLimit.N, Burst: cfg.RateLimit.N, Period: cfg.RateLimit.Per}
	return &rateLimit{lim: redis_rate.NewLimiter(a.Redis.Client), limit: limit, prefix: a.Name + ":"}
}

type rateLimit struct {
	lim    *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
}

func (l *rateLimit) Allow(ctx context.Context, principal string) error {
	res, err := l.lim.Allow(ctx, l.prefix+"{"+principal+"}", l.limit)
	if err != nil {
		// Nothing of the caller's was done; the limit cannot be known
		// without Redis, and neither can anything else this service does.
		return httpx.Unavailable(fmt.Errorf("rate limit: %w", err))
	}
	if res.Allowed == 0 {
		return &httpx.StatusError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Err: fmt.Errorf("over the rate limit of %s", l.limit), RetryAfter: res.RetryAfter}
	}
	return nil
}

// Readiness is a module's Check (stock.Inventory.Check, ...) turned into
// what /readyz asks: an error when a finding is at severity min or above.
// The error's text names each finding's node, for the log; /readyz tells
// the client the settings and values only (NotReady), never where Redis is.
func Readiness(check func(context.Context) (health.Report, error), min health.Severity) func(context.Context) error {
	return func(ctx context.Context) error {
		rep, err := check(ctx)
		if err != nil {
			return NotReady("cannot read the Redis settings", err)
		}
		err = rep.Err(min)
		if err == nil {
			return nil
		}
		var public []string
		for _, f := range rep.Findings {
			if line := fmt.Sprintf("%s=%q (%s)", f.Setting, f.Value, f.Severity); f.Severity >= min && !slices.Contains(public, line) {
				public = append(public, line)
			}
		}
		return NotReady("risky Redis settings: "+strings.Join(public, "; "), err)
	}
}

// NotReady returns the error a Server's Ready test returns to fail
// /readyz: the probe answers 503 not_ready telling message, which must not
// say where Redis is; cause goes to the log.
func NotReady(message string, cause error) error {
	return &httpx.StatusError{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: message, Err: cause}
}

// Server is what Serve serves.
type Server struct {
	Addr    string // listen address; port 0 picks one
	Handler http.Handler
	Config  ServerConfig
	// Auth admits the readers of GET /metrics, which need MetricsScope;
	// without it a Prometheus exporter sharing the server is not served.
	Auth auth.Authenticator
	// Ready is the service's own readiness test beyond a PING of Redis
	// (Readiness of its module's Check); nil: PING only. An error of its
	// own (NotReady) says what /readyz tells; the text of any other is
	// only logged.
	Ready func(context.Context) error
	// Listening, when not nil, receives the bound address once the
	// listener is open.
	Listening func(net.Addr)
}

// readyTimeout bounds a /readyz probe: an orchestrator's probe times out
// too, and a paused Redis would otherwise hold it for the client's whole
// retry budget.
const readyTimeout = time.Second

// probeTimeout bounds the probe itself, which a request no longer waits
// for after readyTimeout: a shutdown waits for it.
const probeTimeout = 5 * time.Second

// Serve listens on s.Addr and serves until ctx ends, then shuts down
// gracefully: in-flight requests get up to 10 s to finish.
//
// Besides s.Handler it answers, outside the bound on requests in flight,
// GET /healthz (200 while the process serves) and GET /readyz (200 when
// Redis answers a PING and s.Ready passes, within a second; 503 otherwise),
// which need no credential, and GET /metrics, for a key with MetricsScope,
// when the Prometheus exporter shares this server
// (setup.WithSharedPrometheus). Every other request counts against
// s.Config.MaxInFlight: past it, the answer is 503 with Retry-After at once,
// rather than one more request queueing on Redis.
//
// A request's context ends at 4/5 of s.Config.WriteTimeout, and the Redis
// clients of redisconn end their calls with it, so a call still running
// then is answered (503 unknown_outcome for a write that may have been
// applied, 503 unavailable otherwise) instead of cut off with no answer.
// Requests whose request line and headers are longer than
// s.Config.MaxHeaderBytes are answered 431. Every request is traced and
// measured (Handler).
func (a *App) Serve(ctx context.Context, s Server) error {
	if err := s.Config.check(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	probe := &readiness{rdb: a.Redis.Client, ready: s.Ready, log: a.Log, name: a.Name}
	slots := make(chan struct{}, s.Config.MaxInFlight)
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.SetRoute(r.Context(), "GET /healthz")
		httpx.WriteJSON(w, http.StatusOK, healthBody{Status: "ok", InFlight: len(slots), MaxInFlight: cap(slots)})
	})
	root.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		httpx.SetRoute(r.Context(), "GET /readyz")
		if err := probe.run(r.Context()); err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	switch h := a.Tel.MetricsHandler(); {
	case h != nil && s.Auth != nil:
		// OTEL_METRICS_EXPORTER=prometheus without a host or port of its
		// own: the scrape endpoint shares this server, outside the bound
		// but behind a key, as the service's other routes are. With
		// OTEL_EXPORTER_PROMETHEUS_HOST or _PORT the exporter listens on
		// an address of its own instead, without a key: a network only
		// the scraper reaches.
		mux := httpx.NewMux(a.Name, httpx.Edge{Auth: s.Auth, Log: a.Log}, func(err error) error { return err })
		mux.Handle("GET /metrics", MetricsScope, func(w http.ResponseWriter, r *http.Request) error {
			h.ServeHTTP(w, r)
			return nil
		})
		root.Handle("GET /metrics", mux)
	case h != nil:
		a.Log.Warn(a.Name + ": GET /metrics is not served: no Authenticator for its readers")
	}
	root.Handle("/", bound(slots, s.Config.WriteTimeout*4/5, s.Handler))
	srv := &http.Server{
		Handler:           a.Handler(headerLimit(s.Config.MaxHeaderBytes, root)),
		ReadHeaderTimeout: min(5*time.Second, s.Config.ReadTimeout),
		ReadTimeout:       s.Config.ReadTimeout,
		WriteTimeout:      s.Config.WriteTimeout,
		IdleTimeout:       s.Config.IdleTimeout,
		MaxHeaderBytes:    max(1, s.Config.MaxHeaderBytes-headerSlop),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	a.Log.Info(a.Name+": listening", "addr", ln.Addr().String())
	if s.Listening != nil {
		s.Listening(ln.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		probe.wait()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done
	probe.wait()
	a.Log.Info(a.Name + ": stopped")
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// healthBody is the body of /healthz: the process serves, and how busy it is.
type healthBody struct {
	Status      string `json:"status"`
	InFlight    int    `json:"in_flight"` // requests being served, health checks aside
	MaxInFlight int    `json:"max_in_flight"`
}

// bound serves h to as many requests at once as slots holds and answers
// the rest 503 at once, with a deadline on each request's context.
func bound(slots chan struct{}, deadline time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			httpx.WriteError(w, &httpx.StatusError{Status: http.StatusServiceUnavailable, Code: "overloaded",
				Err: fmt.Errorf("more than %d requests in flight: try again shortly", cap(slots))})
			return
		}
		defer func() { <-slots }()
		ctx, cancel := context.WithTimeout(r.Context(), deadline)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// readiness runs one probe of Redis at a time: probes that arrive while
// one runs wait for its answer, so a paused Redis costs one goroutine, not
// one per probe. It logs each change of the verdict, with its cause.
type readiness struct {
	rdb   redis.UniversalClient
	ready func(context.Context) error
	log   *slog.Logger
	name  string

	mu      sync.Mutex
	running chan struct{} // closed when the probe in flight ends; nil when none
	last    error
	wg      sync.WaitGroup
}

func (p *readiness) run(ctx context.Context) error {
	p.mu.Lock()
	done := p.running
	if done == nil {
		done = make(chan struct{})
		p.running = done
		p.wg.Go(func() {
			// Not the request's context: the probe outlives a request
			// that gave up, and the next request gets its answer.
			// The body of /readyz is public: it says what is wrong,
			// not where Redis is; the log says both.
			pctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			err := p.rdb.Ping(pctx).Err()
			if err != nil {
				err = NotReady("no answer to PING from Redis", err)
			} else if p.ready != nil {
				if err = p.ready(pctx); err != nil && !errors.As(err, new(*httpx.StatusError)) {
					err = NotReady("not ready", err)
				}
			}
			p.mu.Lock()
			changed := fmt.Sprint(err) != fmt.Sprint(p.last)
			p.last, p.running = err, nil
			p.mu.Unlock()
			if changed && err != nil {
				p.log.Warn(p.name+": not ready", "err", err)
			} else if changed {
				p.log.Info(p.name + ": ready")
			}
			close(done)
		})
	}
	p.mu.Unlock()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return NotReady(fmt.Sprintf("no answer from Redis within %v", readyTimeout), errors.New("probe timed out"))
	case <-ctx.Done():
		return NotReady("the probe was given up", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// wait waits for the probe in flight, if any, to end.
func (p *readiness) wait() { p.wg.Wait() }

// headerSlop is what net/http adds to http.Server.MaxHeaderBytes before it
// refuses a request: the bytes its reader may have buffered past the
// headers. Serve gives net/http the limit less this, so that its own 431
// comes exactly past the limit, counted on the wire.
const headerSlop = 4096

// headerLimit answers 431 to a request whose request line and header lines,
// as a client writes them ("Name: value\r\n"), are longer than limit
// bytes. net/http refuses most such requests itself before they are read
// (see headerSlop); a request read from bytes net/http had buffered already
// (pipelined after another one) reaches this check instead. The check sees
// the headers as net/http parsed them, without the spaces around values,
// so such a request padded with spaces can pass with up to 4 KiB more as
// sent; net/http's own limit refuses it past limit + 4 KiB.
func headerLimit(limit int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > limit {
			w.Header().Set("Connection", "close")
			httpx.WriteError(w, httpx.Errorf(http.StatusRequestHeaderFieldsTooLarge, "headers_too_large",
				"the request line and headers are longer than %d bytes", limit))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headerBytes is the length of r's request line, header lines and the blank
// line after them, as a client writes them.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
}
