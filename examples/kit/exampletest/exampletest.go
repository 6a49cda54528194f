// Package exampletest holds what the example services' tests share: running
// a test on both kinds of Redis, running a service's run function in the
// background as main does, and an HTTP client that speaks the services'
// conventions (package httpx). It is imported by tests only.
package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/auth"
	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
)

// SilenceRedisLog stops go-redis from logging every failed dial and read,
// which tests with unreachable or paused servers cause on purpose. Call it
// from TestMain.
func SilenceRedisLog() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// Backends runs f against a real redis-server and against the embedded
// Redis the services use by default. rdb is a client of that server and url
// what REDIS_URL says for it: for the embedded one "", with which run starts
// an embedded Redis of its own.
func Backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, url string)) {
	t.Run("redis-server", func(t *testing.T) {
		s := redistest.New(t, redistest.Options{})
		f(t, s.Client(), "redis://"+s.Addr())
	})
	t.Run("embedded", func(t *testing.T) {
		c, err := redisconn.Open(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		f(t, c.Client, "")
	})
}

// SyncBuffer is a bytes.Buffer that one goroutine may write (a service's
// log) while another reads it. The zero value is an empty buffer.
type SyncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed by the next Write
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// next returns the contents and a channel that the next Write closes.
func (s *SyncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = make(chan struct{})
	}
	return s.b.String(), s.written
}

// RunFunc is an example's run function, which main calls.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Keys makes an API key for each spec, "principal:scope,..." ("alice:buy",
// "shop:sale:admin,read"), and returns the Authenticator that accepts them
// and the keys by principal.
func Keys(t testing.TB, specs ...string) (*auth.Keys, map[string]string) {
	t.Helper()
	lines, keys := KeyLines(t, specs...)
	a, err := auth.ParseKeys(lines)
	if err != nil {
		t.Fatal(err)
	}
	return a, keys
}

// KeyLines is Keys for a service run as main does: it returns the stored
// form of the keys, for API_KEYS or a keys file, and the keys by principal.
func KeyLines(t testing.TB, specs ...string) (lines string, keys map[string]string) {
	t.Helper()
	keys = map[string]string{}
	for _, spec := range specs {
		principal, scopes, _ := strings.Cut(spec, ":")
		key, line, err := auth.NewKey(principal, strings.Split(scopes, ",")...)
		if err != nil {
			t.Fatal(err)
		}
		keys[principal], lines = key, lines+line+"\n"
	}
	return lines, keys
}

// WithKeys gives a service run as main does the keys for specs (as Keys)
// through $API_KEYS, and none through a keys file, until the test ends. It
// returns the keys by principal.
func WithKeys(t *testing.T, specs ...string) map[string]string {
	t.Helper()
	lines, keys := KeyLines(t, specs...)
	t.Setenv(app.KeysEnv, lines)
	t.Setenv(app.KeysFileEnv, "")
	return keys
}

// Run runs run with args as main does, to its end, and returns what it
// printed. The test fails, with both outputs, if run fails.
func Run(t *testing.T, run RunFunc, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	if err := run(t.Context(), args, &out, &errs); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	return out.String(), errs.String()
}

// RunWithBook runs run with args (Run) on both kinds of Redis (Backends)
// with $DATABASE_URL set to pgURL, and hands check the report it printed,
// once the report has the reconciler's clean verdict.
func RunWithBook(t *testing.T, pgURL string, run RunFunc, args []string, check func(t *testing.T, report string)) {
	Backends(t, func(t *testing.T, _ redis.UniversalClient, url string) {
		t.Setenv(redisconn.Env, url)
		t.Setenv(book.Env, pgURL)
		report, _ := Run(t, run, args...)
		if !strings.Contains(report, "reconciler: OK, Redis and the book agree") {
			t.Fatalf("no clean verdict in the report:\n%s", report)
		}
		check(t, report)
	})
}

// Service is a run function serving HTTP in the background.
type Service struct {
	URL string      // where it listens: "http://127.0.0.1:port"
	Log *SyncBuffer // what it writes to stderr
	// AdminKey is the key run printed when it made one (no keys given).
	AdminKey string

	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error
}

// listening matches the line app.App.Serve logs once its listener is open,
// and adminKey the generated key app.Credentials prints before.
var (
	listening = regexp.MustCompile(`listening" addr=(\S+)`)
	adminKey  = regexp.MustCompile(`Authorization: Bearer (rk_[A-Za-z0-9_-]+)`)
)

// Serve starts run with args, which must make it serve HTTP on a loopback
// port ("-serve", "127.0.0.1:0"), and returns once it listens. The test
// fails if run ends first. Stop stops it; so does the end of the test.
func Serve(t *testing.T, run RunFunc, args ...string) *Service {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	s := &Service{Log: new(SyncBuffer), stop: stop, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, args, io.Discard, s.Log) }()
	t.Cleanup(func() { _ = s.Stop() })
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		log, written := s.Log.next()
		if m := listening.FindStringSubmatch(log); m != nil {
			s.URL = "http://" + m[1]
			if k := adminKey.FindStringSubmatch(log); k != nil {
				s.AdminKey = k[1]
			}
			return s
		}
		select {
		case <-written:
		case err := <-s.done:
			s.once.Do(func() { stop(); s.err = err })
			t.Fatalf("run %q ended before it listened: %v\n%s", args, err, log)
		case <-timeout.C:
			t.Fatalf("run %q does not listen after a minute:\n%s", args, log)
		}
	}
}

// Stop ends run's context, as SIGINT or SIGTERM does, and returns what run
// returned.
func (s *Service) Stop() error {
	s.once.Do(func() {
		s.stop()
		s.err = <-s.done
	})
	return s.err
}

// RequireNoKeyLogged stops the service and fails the test if run failed
// or its log holds any of keys (by principal).
func (s *Service) RequireNoKeyLogged(t *testing.T, keys map[string]string) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for who, key := range keys {
		if strings.Contains(s.Log.String(), key) {
			t.Errorf("%s's key is in the log:\n%s", who, s.Log)
		}
	}
}

// ACLUser starts a redis-server that loads the ACL file aclFile (a
// template's redis.acl, one user), with its ">CHANGE-ME" password replaced,
// and points a service run as main does at it, as that user ($REDIS_URL
// until the test ends). It returns the server (whose own Client is an
// administrator) and a client logged in as the user.
func ACLUser(t *testing.T, aclFile string) (*redistest.Server, *redis.Client) {
	t.Helper()
	src, err := os.ReadFile(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(src))
	if len(fields) < 2 || fields[0] != "user" || strings.Count(string(src), "\nuser ") > 0 {
		t.Fatalf("%s: want one ACL user line, got %q", aclFile, src)
	}
	user := fields[1]
	s, password := redistest.NewWithACL(t, aclFile)
	t.Setenv(redisconn.Env, "redis://"+url.UserPassword(user, password).String()+"@"+s.Addr())
	return s, s.Client(func(o *redis.Options) { o.Username, o.Password = user, password })
}

// RequireQuoted fails the test unless the document doc holds the contents
// of file (trimmed): SECURITY.md quotes each template's redis.acl. A copy of
// a template outside the repository has no such document; then it only
// logs that.
func RequireQuoted(t *testing.T, doc, file string) {
	t.Helper()
	d, err := os.ReadFile(doc)
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("%s: not in this copy, not checked", doc)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d), strings.TrimSpace(string(f))) {
		t.Errorf("%s does not quote %s as it is:\n%s", doc, file, f)
	}
}

// Help returns what run prints for -h, and fails the test unless run
// returns flag.ErrHelp.
func Help(t *testing.T, run RunFunc) string {
	t.Helper()
	var errs bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, io.Discard, &errs); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v, want flag.ErrHelp\n%s", err, &errs)
	}
	return errs.String()
}

// FlagHelp returns the part of help (Help's output) about the flag name
// ("serve" for -serve): its line and its description.
func FlagHelp(t *testing.T, help, name string) string {
	t.Helper()
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "-"+name {
			out := l
			for _, d := range lines[i+1:] {
				if !strings.HasPrefix(d, "    \t") {
					break
				}
				out += "\n" + d
			}
			return out
		}
	}
	t.Fatalf("-h does not list -%s:\n%s", name, help)
	return ""
}

// RequireLoopbackAddrs fails the test unless the flag's help (FlagHelp)
// names an address ("127.0.0.1:8080", quoted) and every address it names
// is a loopback one: one a service accepts without API keys.
func RequireLoopbackAddrs(t *testing.T, help, name string) {
	t.Helper()
	fh := FlagHelp(t, help, name)
	addrs := regexp.MustCompile(`"([^"\s]*:\d+)"`).FindAllStringSubmatch(fh, -1)
	if len(addrs) == 0 {
		t.Fatalf("-%s's help names no address: %s", name, fh)
	}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a[1])
		ip := net.ParseIP(host)
		if err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			t.Errorf("-%s's help names %s, which a service refuses without API keys: %s", name, a[1], fh)
		}
	}
}

// ServeBehindProxy is Serve on a redis-server that the service reaches
// through a proxy with a read timeout of 100ms, for a test that drops
// Redis's replies (LoseReply).
func ServeBehindProxy(t *testing.T, run RunFunc, args ...string) (*Service, *redistest.Proxy) {
	t.Helper()
	px := redistest.NewProxy(t, redistest.New(t, redistest.Options{}).Addr())
	t.Setenv(redisconn.Env, "redis://"+px.Addr()+"/?read_timeout=100ms")
	return Serve(t, run, args...), px
}

// LoseReply sends a request (send) while px drops every reply from Redis:
// the answer must be 503 unknown_outcome with Retry-After and the advice to
// send the same request again with the same Idempotency-Key. Then px lets
// replies through again and resets its connections, which lost a reply and
// are out of step, and LoseReply sends the request again until the answer is
// no 503 (the pool may still hand out a reset connection), and returns that
// answer.
func LoseReply(t *testing.T, px *redistest.Proxy, send func() Reply) Reply {
	t.Helper()
	px.DropReplies(true)
	r := send().Want(t, http.StatusServiceUnavailable, "unknown_outcome")
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Problem.Error, "same "+httpx.IdempotencyKeyHeader) {
		t.Fatalf("503 without Retry-After or the advice to repeat with the same key: %v %s", r.Header, r.Body)
	}
	if px.Dropped() == 0 {
		t.Fatal("no reply was dropped")
	}
	px.DropReplies(false)
	px.ResetConnections()
	again := send()
	for again.Status == http.StatusServiceUnavailable {
		time.Sleep(50 * time.Millisecond)
		again = send()
	}
	return again
}

// Client calls a service the way the services' clients do: an API key
// (Authorization: Bearer), JSON bodies, the operation ID in the
// Idempotency-Key header, errors as httpx.Problem.
//
// Every body it receives is searched for what no body of a service may
// tell (Leak): a match fails the test. So every test of the templates
// checks, on every route it calls and every failure it provokes, that no
// host, port, file path or Redis error text reaches a client.
type Client struct {
	t      *testing.T
	base   string
	key    string // API key; none when empty
	header http.Header
	hc     *http.Client
}

// As returns a client that sends key as its API key ("" for none).
func (c *Client) As(key string) *Client {
	cc := *c
	cc.key = key
	return &cc
}

// With returns a client that also sends the header name with value; "Host"
// sets the request's Host.
func (c *Client) With(name, value string) *Client {
	cc := *c
	cc.header = c.header.Clone()
	if cc.header == nil {
		cc.header = http.Header{}
	}
	cc.header.Set(name, value)
	return &cc
}

// NewClient returns a client of the service at base ("http://host:port").
// Its idle connections are closed when the test ends.
func NewClient(t *testing.T, base string) *Client {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return &Client{t: t, base: base, hc: hc}
}

// NewServer serves h on a loopback port until the test ends and returns a
// client of it.
func NewServer(t *testing.T, h http.Handler) *Client {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return NewClient(t, ts.URL)
}

// Reply is a service's answer to one request.
type Reply struct {
	Status int
	Header http.Header
	Body   string
	// Problem is the body of an error answered in JSON; the zero Problem
	// for anything else (success, or the mux's own plain-text 404 and 405).
	Problem httpx.Problem
}

// Replayed reports whether the answer repeats the first answer to its
// idempotency key.
func (r Reply) Replayed() bool { return r.Header.Get(httpx.ReplayedHeader) == "true" }

// Try sends a request with body (JSON, or "" for none); key, when not
// empty, is the Idempotency-Key. It may run in any goroutine: failures,
// including an error answered in JSON that is no Problem, are returned.
func (c *Client) Try(method, path, key, body string) (Reply, error) {
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for name, vs := range c.header {
		if name == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[name] = vs
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if key != "" {
		req.Header.Set(httpx.IdempotencyKeyHeader, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
	if leak := Leak(r.Body); leak != "" {
		c.t.Errorf("%s %s: %d: the body tells %q: %.500s", method, path, r.Status, leak, r.Body)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); r.Status >= 400 && ct == "application/json" {
		if err := json.Unmarshal(data, &r.Problem); err != nil {
			return r, fmt.Errorf("%s %s: %d with a body that is no problem: %s", method, path, r.Status, data)
		}
	}
	return r, nil
}

// Do is Try for the test's goroutine: a failure ends the test.
func (c *Client) Do(method, path, key, body string) Reply {
	c.t.Helper()
	r, err := c.Try(method, path, key, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Get is Do for a GET of path.
func (c *Client) Get(path string) Reply {
	c.t.Helper()
	return c.Do(http.MethodGet, path, "", "")
}

// Want ends the test unless the reply has status and, for an error, the
// problem code ("" for a success or a reply that is no Problem).
func (r Reply) Want(t *testing.T, status int, code string) Reply {
	t.Helper()
	if r.Status != status || r.Problem.Code != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.Status, r.Problem.Code, status, code, r.Body)
	}
	return r
}

// JSON decodes the body into a map.
func (r Reply) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return m
}

// Decode decodes the body into a T, refusing fields T does not have.
func Decode[T any](t *testing.T, r Reply) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return v
}

// leaks are what no response body may contain: a host or port (an IP
// literal, localhost, a dial), a file path (under the usual roots), a Go
// source position, or the text of a Redis or connection error.
var leaks = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\[[0-9A-Fa-f]*:[0-9A-Fa-f:]*\]|(?i:localhost)|` +
	`/(?:tmp|home|root|usr|var|etc|opt|proc|run|srv|mnt|work|Users|private)/|\.go:\d+|` +
	`\b(?:ERR|WRONGTYPE|NOSCRIPT|LOADING|BUSY|BUSYGROUP|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|OOM|MOVED|ASK|NOAUTH|NOPERM|EXECABORT)\b|` +
	`redis: |dial tcp|dial unix|read tcp|write tcp|connection refused|connection reset|broken pipe|i/o timeout|` +
	`closed network connection|context deadline exceeded|context canceled|user_script`)

// Leak returns the first thing in body that no response body of a service
// may tell (a host or port, a file path, a Redis or connection error), or
// "" when there is none.
func Leak(body string) string { return leaks.FindString(body) }

// MetricSeries returns the series GET /metrics shows c (whose key needs
// metrics:read), each as its name and labels, and the body.
func (c *Client) MetricSeries() (series map[string]bool, body string) {
	c.t.Helper()
	r := c.Get("/metrics").Want(c.t, http.StatusOK, "")
	series = map[string]bool{}
	for line := range strings.Lines(r.Body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			series[line[:i]] = true
		}
	}
	return series, r.Body
}

// Distinct is what RequireBoundedSeries varies from request to request:
// i's Host, User-Agent, X-Forwarded-For, traceparent and Referer, each seen
// once.
func Distinct(c *Client, i int) *Client {
	return c.With("Host", fmt.Sprintf("h%d.client.example:%d", i, 1024+i)).
		With("User-Agent", fmt.Sprintf("agent-%d/1.0", i)).
		With("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)).
		With("Traceparent", fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)).
		With("Referer", fmt.Sprintf("https://r%d.client.example/p/%d?q=%d", i, i, i))
}

// RequireBoundedSeries checks that what clients send cannot grow a
// service's telemetry: it sends 100 requests to warm up, then 1,000, the
// i-th made by send(Distinct(c, i), i) (one request of the service, with
// IDs and paths of its own for i), and every fifth i one more, to an
// unknown path with a query or with an unknown method. The series that
// metrics (a client with metrics:read) reads on GET /metrics must be the
// same after the 1,000 as before them, and tell none of the hosts or
// agents sent. Requests run 8 at a time.
func RequireBoundedSeries(t *testing.T, c, metrics *Client, send func(c *Client, i int) error) {
	t.Helper()
	batch := func(from, to int) {
		t.Helper()
		next := make(chan int)
		errs := make(chan error, to-from)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := range next {
					d := Distinct(c, i)
					err := send(d, i)
					switch {
					case err != nil:
					case i%10 == 0:
						_, err = d.Try(http.MethodGet, fmt.Sprintf("/nowhere-%d/x?q=%d&id=%d", i, i, i), "", "")
					case i%10 == 5:
						_, err = d.Try(fmt.Sprintf("M%d", i), fmt.Sprintf("/m-%d", i), "", "")
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	metrics.MetricSeries() // a scrape is a request too: its series now exist
	batch(0, 100)
	before, _ := metrics.MetricSeries()
	batch(100, 1100)
	after, body := metrics.MetricSeries()
	var grown, gone, slow []string
	for s := range after {
		switch {
		case before[s]:
		case strings.Contains(s, `http_response_status_code="5`):
			// A 5xx the service answered because the machine was slow
			// (a lease renewal or a range fetch late, under -race on a
			// busy machine) adds its status's series once: it is no
			// value a client chose.
			slow = append(slow, s)
		default:
			grown = append(grown, s)
		}
	}
	if len(slow) > 0 {
		t.Logf("%d series of 5xx answers appeared meanwhile (not counted), such as %s", len(slow), slow[0])
	}
	for s := range before {
		if !after[s] {
			gone = append(gone, s)
		}
	}
	if len(grown) == 0 && len(gone) == 0 {
		t.Logf("%d series before and after 1,000 requests with distinct hosts, paths and IDs", len(before))
	} else {
		t.Errorf("%d series before 1,000 requests, %d after: %d new, %d gone; new: %.3000s",
			len(before), len(after), len(grown), len(gone), strings.Join(grown, "\n"))
	}
	for _, sent := range []string{"client.example", "agent-"} {
		if strings.Contains(body, sent) {
			t.Errorf("GET /metrics tells %q, which clients sent", sent)
		}
	}
}
