package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/internal/httpx"
	"github.com/redkit-go/redkit/examples/internal/redisconn"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// backends runs f against a real redis-server and against the embedded
// Redis the service uses by default; url is what REDIS_URL would say.
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

var services atomic.Int64

// startAPI serves newServer over generators on rdb, with a Snowflake
// service name no other test uses.
func startAPI(t *testing.T, rdb redis.UniversalClient, maxNames int) (*testClient, *generators) {
	t.Helper()
	g, err := newGenerators(t.Context(), rdb, config{
		Service: fmt.Sprintf("test-%d", services.Add(1)), MaxNames: maxNames, LeaseTTL: idgen.DefaultLeaseTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	ts := httptest.NewServer(newServer(g, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(ts.Close)
	return &testClient{t: t, base: ts.URL, hc: ts.Client()}, g
}

type testClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

type reply struct {
	status int
	body   []byte
	code   string // the problem's code
}

// get fetches path. It may run in any goroutine: failures are returned
// with the reply, not reported.
func (c *testClient) get(path string) (reply, error) {
	req, err := http.NewRequestWithContext(c.t.Context(), "GET", c.base+path, nil)
	if err != nil {
		return reply{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		return r, err
	}
	if r.status >= 400 {
		var p httpx.Problem
		if err := json.Unmarshal(r.body, &p); err != nil {
			return r, fmt.Errorf("%d with a body that is no problem: %s", r.status, r.body)
		}
		r.code = p.Code
	}
	return r, nil
}

func (c *testClient) want(path string, status int, code string) reply {
	c.t.Helper()
	r, err := c.get(path)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	if r.status != status || r.code != code {
		c.t.Fatalf("GET %s: %d %q, want %d %q: %s", path, r.status, r.code, status, code, r.body)
	}
	return r
}

// ids decodes a single ID or a batch, checking each base32 form.
func ids(r reply) ([]idgen.ID, error) {
	var batch struct {
		IDs []json.RawMessage `json:"ids"`
	}
	raws := []json.RawMessage{r.body}
	if json.Unmarshal(r.body, &batch) == nil && batch.IDs != nil {
		raws = batch.IDs
	}
	out := make([]idgen.ID, 0, len(raws))
	for _, raw := range raws {
		var v struct {
			ID     string `json:"id"` // a string, not a number
			Base32 string `json:"base32"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", raw, err)
		}
		id, err := idgen.Parse(v.ID)
		if err != nil {
			return nil, err
		}
		if b, err := idgen.ParseBase32(v.Base32); err != nil || b != id {
			return nil, fmt.Errorf("base32 %q of %d: %d, %v", v.Base32, id, b, err)
		}
		out = append(out, id)
	}
	return out, nil
}

func mustIDs(t *testing.T, r reply) []idgen.ID {
	t.Helper()
	got, err := ids(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func increasing(got []idgen.ID) bool {
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			return false
		}
	}
	return true
}

func TestAPI(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, g := startAPI(t, rdb, 4)

		one := mustIDs(t, c.want("/id/snowflake", 200, ""))
		if len(one) != 1 || one[0].SnowflakeNode() != g.sf.Node() {
			t.Fatalf("snowflake %v from node %d", one, g.sf.Node())
		}
		batch := mustIDs(t, c.want("/id/snowflake?n=1000", 200, ""))
		if len(batch) != 1000 || !increasing(append(one, batch...)) {
			t.Fatalf("batch of %d not increasing after %v", len(batch), one)
		}
		for _, n := range []string{"0", "1001", "x", "-1", ""} {
			c.want("/id/snowflake?n="+n, 400, "malformed")
		}

		seg := mustIDs(t, c.want("/id/segment/order-no?n=3", 200, ""))
		if len(seg) != 3 || seg[0] != 1 || !increasing(seg) {
			t.Fatalf("segment: %v", seg)
		}
		seq := mustIDs(t, c.want("/id/sequence/order-no", 200, ""))
		if seq[0] <= seg[2] { // one counter, ranges of it reserved by the Segment
			t.Fatalf("sequence %v overlaps the segment's %v", seq, seg)
		}
		mustIDs(t, c.want("/id/sequence/shop-7/invoice?n=100", 200, ""))
		c.want("/id/sequence/shop-7/invoice?n=101", 400, "malformed")
		c.want("/id/segment/shop-7/orders", 200, "")

		c.want("/id/segment/%7Bbad%7D", 400, "invalid")
		c.want("/id/segment/a/b/c", 400, "invalid")
		c.want("/id/sequence/"+strings.Repeat("x", 129), 400, "invalid")
		c.want("/id/segment/one-too-many", 422, "name_limit")
		c.want("/id/segment/order-no", 200, "") // names already served still are

		var st statusBody
		if err := json.Unmarshal(c.want("/status", 200, "").body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Snowflake.Node != g.sf.Node() || !st.Snowflake.Healthy || st.Snowflake.LastID == nil ||
			*st.Snowflake.LastID <= batch[len(batch)-1] || st.Names != 4 || st.MaxNames != 4 {
			t.Fatalf("status: %+v", st)
		}
		if len(st.Segments) != 2 || st.Segments[0].Name != "order-no" || st.Segments[0].Runway <= 0 ||
			strings.Join(st.Sequences, ",") != "order-no,shop-7/invoice" {
			t.Fatalf("status: %+v", st)
		}

		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		c.want("/id/snowflake", 503, "closed")
		c.want("/id/segment/order-no", 503, "closed")
		c.want("/status", 503, "")
	})
}

// TestAPI_ConcurrentSafe has many clients draw IDs at once: every ID of a
// generator is unique, and each client sees increasing IDs, request after
// request. A Segment and a Sequence of one name share a counter, so their
// values are unique together.
func TestAPI_ConcurrentSafe(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, _ := startAPI(t, rdb, 10)
		const clients, requests = 8, 25
		paths := map[string]string{
			"snowflake": "/id/snowflake?n=20",
			"segment":   "/id/segment/orders?n=20",
			"sequence":  "/id/sequence/orders?n=3",
		}
		var mu sync.Mutex
		seen := map[string]map[idgen.ID]bool{"snowflake": {}, "orders": {}}
		var wg sync.WaitGroup
		errs := make(chan error, clients*len(paths))
		for kind, path := range paths {
			counter := "orders"
			if kind == "snowflake" {
				counter = kind
			}
			for i := range clients {
				wg.Go(func() {
					var last idgen.ID
					for range requests {
						r, err := c.get(path)
						if err == nil && r.status != 200 {
							err = fmt.Errorf("%d %s", r.status, r.body)
						}
						var got []idgen.ID
						if err == nil {
							got, err = ids(r)
						}
						if err == nil && (!increasing(got) || got[0] <= last) {
							err = fmt.Errorf("not increasing after %d: %v", last, got)
						}
						if err != nil {
							errs <- fmt.Errorf("%s client %d: %w", kind, i, err)
							return
						}
						last = got[len(got)-1]
						mu.Lock()
						for _, id := range got {
							if seen[counter][id] {
								err = fmt.Errorf("%s: %d issued twice", kind, id)
							}
							seen[counter][id] = true
						}
						mu.Unlock()
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := len(seen["snowflake"]); n != clients*requests*20 {
			t.Errorf("%d snowflake IDs", n)
		}
		if n := len(seen["orders"]); n != clients*requests*(20+3) {
			t.Errorf("%d segment and sequence values", n)
		}
	})
}

// TestRun_serve runs the service as main does, stops it like SIGTERM, and,
// on a Redis that outlives it, finds its Snowflake node free again.
func TestRun_serve(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		service := fmt.Sprintf("test-%d", services.Add(1))
		addrs := make(chan string, 1)
		listening = func(a net.Addr) { addrs <- a.String() }
		t.Cleanup(func() { listening = nil })
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		stderr := newSyncBuffer()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-service", service, "-lease-ttl", "2s"}, io.Discard, stderr)
		}()
		var base string
		select {
		case a := <-addrs:
			base = "http://" + a
		case err := <-done:
			t.Fatalf("run: %v\n%s", err, stderr)
		}
		c := &testClient{t: t, base: base, hc: &http.Client{Transport: &http.Transport{}}}
		t.Cleanup(c.hc.CloseIdleConnections)
		mustIDs(t, c.want("/id/snowflake?n=10", 200, ""))
		var st statusBody
		if err := json.Unmarshal(c.want("/status", 200, "").body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Snowflake.Service != service || st.Snowflake.Node < 0 || st.Snowflake.LeaseTTL != "2s" || st.Snowflake.LastIDTime == nil {
			t.Fatalf("status: %+v", st)
		}
		node := st.Snowflake.Node

		external := redisURL != ""
		if external { // while the service runs, its node is taken
			other, err := idgen.NewLeasedSnowflake(t.Context(), rdb, service)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if other.Node() == node {
				t.Fatalf("node %d leased twice", node)
			}
		}

		stop()
		if err := <-done; err != nil {
			t.Fatalf("run: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "idservice: stopped") {
			t.Fatalf("no graceful stop in the log:\n%s", stderr)
		}
		if !external {
			return // the embedded Redis ended with the service
		}
		// A node is handed out again once the new holder's clock is past the
		// last ID the old one issued.
		for !time.Now().After(st.Snowflake.LastIDTime.Add(time.Millisecond)) {
			time.Sleep(time.Millisecond)
		}
		next, err := idgen.NewLeasedSnowflake(t.Context(), rdb, service)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		if next.Node() != node {
			t.Fatalf("after shutdown got node %d, want the released %d", next.Node(), node)
		}
	})
}

func TestRun_demo(t *testing.T) {
	backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		var out bytes.Buffer
		stderr := newSyncBuffer()
		if err := run(t.Context(), []string{"-demo", "-service", fmt.Sprintf("test-%d", services.Add(1))}, &out, stderr); err != nil {
			t.Fatalf("run: %v\n%s", err, stderr)
		}
		for _, want := range []string{"snowflake (node 0)", "segment order-no           1 ", "sequence shop-7/invoice", `"healthy": true`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("demo output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

func TestRun_usage(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-max-names", "-1"}} {
		if err := run(t.Context(), args, io.Discard, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want errUsage", args, err)
		}
	}
	if err := run(t.Context(), []string{"-h"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	t.Setenv("REDIS_URL", "")
	if err := run(t.Context(), []string{"-demo", "-lease-ttl", "1ms"}, io.Discard, &stderr); !errors.Is(err, idgen.ErrInvalid) {
		t.Errorf("-lease-ttl 1ms: %v, want ErrInvalid", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
