package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/internal/httpx"
	"github.com/redkit-go/redkit/examples/internal/redisconn"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// backends runs f against a real redis-server and against the embedded
// Redis the service uses by default.
func backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, url string)) {
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

// testClient talks to a test server.
type testClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// startAPI serves newServer over a Ledger on rdb.
func startAPI(t *testing.T, rdb redis.UniversalClient) (*testClient, *wallet.Ledger) {
	t.Helper()
	led := wallet.New(rdb)
	t.Cleanup(func() { _ = led.Close() })
	ts := httptest.NewServer(newServer(led, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(ts.Close)
	return &testClient{t: t, base: ts.URL, hc: ts.Client()}, led
}

type reply struct {
	status   int
	replayed bool
	header   http.Header
	body     []byte
	problem  problem
}

// problem is a Problem with the 409's field.
type problem struct {
	httpx.Problem
	Field string `json:"field"`
}

// do sends a request; key, when not empty, is the Idempotency-Key.
func (c *testClient) do(method, path, key, body string) reply {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(httpx.IdempotencyKeyHeader, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, replayed: resp.Header.Get(httpx.ReplayedHeader) == "true", body: data}
	if r.status >= 400 {
		if err := json.Unmarshal(data, &r.problem); err != nil {
			c.t.Fatalf("%s %s: %d with a body that is no problem: %s", method, path, r.status, data)
		}
	}
	return r
}

// want checks the status and, for errors, the problem code.
func (r reply) want(t *testing.T, status int, code string) reply {
	t.Helper()
	if r.status != status || r.problem.Code != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.status, r.problem.Code, status, code, r.body)
	}
	return r
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return v
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different
// goroutines.
type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}
