package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/idgen"
)

var services atomic.Int64

// startAPI serves newServer over generators on rdb, with a Snowflake
// service name no other test uses.
func startAPI(t *testing.T, rdb redis.UniversalClient, maxNames int) (*exampletest.Client, *generators) {
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
	authn, keys := exampletest.Keys(t, "billing:ids")
	c := exampletest.NewServer(t, newServer(g, httpx.Edge{Auth: authn, Log: slog.New(slog.DiscardHandler)}))
	return c.As(keys["billing"]), g
}

// ids decodes a single ID or a batch, checking each base32 form.
func ids(r exampletest.Reply) ([]idgen.ID, error) {
	var batch struct {
		IDs []json.RawMessage `json:"ids"`
	}
	raws := []json.RawMessage{json.RawMessage(r.Body)}
	if json.Unmarshal([]byte(r.Body), &batch) == nil && batch.IDs != nil {
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

func mustIDs(t *testing.T, r exampletest.Reply) []idgen.ID {
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
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, g := startAPI(t, rdb, 4)

		one := mustIDs(t, c.Get("/id/snowflake").Want(t, 200, ""))
		if len(one) != 1 || one[0].SnowflakeNode() != g.sf.Node() {
			t.Fatalf("snowflake %v from node %d", one, g.sf.Node())
		}
		batch := mustIDs(t, c.Get("/id/snowflake?n=1000").Want(t, 200, ""))
		if len(batch) != 1000 || !increasing(append(one, batch...)) {
			t.Fatalf("batch of %d not increasing after %v", len(batch), one)
		}
		for _, n := range []string{"0", "1001", "x", "-1", ""} {
			c.Get("/id/snowflake?n="+n).Want(t, 400, "malformed")
		}

		seg := mustIDs(t, c.Get("/id/segment/order-no?n=3").Want(t, 200, ""))
		if len(seg) != 3 || seg[0] != 1 || !increasing(seg) {
			t.Fatalf("segment: %v", seg)
		}
		seq := mustIDs(t, c.Get("/id/sequence/order-no").Want(t, 200, ""))
		if seq[0] <= seg[2] { // one counter, ranges of it reserved by the Segment
			t.Fatalf("sequence %v overlaps the segment's %v", seq, seg)
		}
		mustIDs(t, c.Get("/id/sequence/shop-7/invoice?n=100").Want(t, 200, ""))
		c.Get("/id/sequence/shop-7/invoice?n=101").Want(t, 400, "malformed")
		c.Get("/id/segment/shop-7/orders").Want(t, 200, "")

		c.Get("/id/segment/%7Bbad%7D").Want(t, 400, "invalid")
		c.Get("/id/segment/a/b/c").Want(t, 400, "invalid")
		c.Get("/id/sequence/"+strings.Repeat("x", 129)).Want(t, 400, "invalid")
		c.Get("/id/segment/one-too-many").Want(t, 422, "name_limit")
		c.Get("/id/segment/order-no").Want(t, 200, "") // names already served still are

		st := exampletest.Decode[statusBody](t, c.Get("/status").Want(t, 200, ""))
		if st.Snowflake.Node != g.sf.Node() || !st.Snowflake.Healthy || st.Snowflake.LastID == nil ||
			*st.Snowflake.LastID <= batch[len(batch)-1] || st.Names != 4 || st.MaxNames != 4 {
			t.Fatalf("status: %+v", st)
		}
		checkLease(t, st.Snowflake)
		if len(st.Segments) != 2 || st.Segments[0].Name != "order-no" || st.Segments[0].Runway <= 0 ||
			strings.Join(st.Sequences, ",") != "order-no,shop-7/invoice" {
			t.Fatalf("status: %+v", st)
		}

		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		c.Get("/id/snowflake").Want(t, 503, "closed")
		c.Get("/id/segment/order-no").Want(t, 503, "closed")
		st = exampletest.Decode[statusBody](t, c.Get("/status").Want(t, 503, ""))
		if sf := st.Snowflake; sf.Node != -1 || sf.LeaseUntil != nil || sf.HighWater != nil || sf.Healthy {
			t.Fatalf("status after Close: %+v", sf)
		}
	})
}

// checkLease checks the node lease of a healthy status.
func checkLease(t *testing.T, sf snowflakeStatus) {
	t.Helper()
	switch {
	case sf.LeaseUntil == nil || sf.LeaseRenewed == nil || sf.HighWater == nil || sf.LastIDTime == nil:
		t.Fatalf("lease times missing: %+v", sf)
	case !sf.LeaseUntil.After(*sf.LeaseRenewed):
		t.Fatalf("lease until %v, not after the renewal %v", sf.LeaseUntil, sf.LeaseRenewed)
	case sf.LastIDTime.After(*sf.LeaseUntil) || sf.LastIDTime.After(*sf.HighWater):
		t.Fatalf("last ID at %v, after the lease's end %v or high-water mark %v", sf.LastIDTime, sf.LeaseUntil, sf.HighWater)
	case sf.LeaseError != "":
		t.Fatalf("lease error %q", sf.LeaseError)
	}
}

// TestAPI_ConcurrentSafe has many clients draw IDs at once: every ID of a
// generator is unique, and each client sees increasing IDs, request after
// request. A Segment and a Sequence of one name share a counter, so their
// values are unique together.
func TestAPI_ConcurrentSafe(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
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
						r, err := c.Try("GET", path, "", "")
						if err == nil && r.Status != 200 {
							err = fmt.Errorf("%d %s", r.Status, r.Body)
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
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		service := fmt.Sprintf("test-%d", services.Add(1))
		svc := exampletest.Serve(t, run, "-addr", "127.0.0.1:0", "-service", service, "-lease-ttl", "2s")
		anon := exampletest.NewClient(t, svc.URL)
		anon.Get("/id/snowflake").Want(t, 401, "unauthenticated")
		anon.Get("/status").Want(t, 401, "unauthenticated")
		anon.Get("/healthz").Want(t, 200, "")
		c := anon.As(svc.AdminKey)
		mustIDs(t, c.Get("/id/snowflake?n=10").Want(t, 200, ""))
		st := exampletest.Decode[statusBody](t, c.Get("/status").Want(t, 200, ""))
		if st.Snowflake.Service != service || st.Snowflake.Node < 0 || st.Snowflake.LeaseTTL != "2s" || st.Snowflake.LastIDTime == nil {
			t.Fatalf("status: %+v", st)
		}
		checkLease(t, st.Snowflake)
		node := st.Snowflake.Node
		// The lease is renewed every third of its TTL, and the status shows
		// it: a later renewal, and a later end.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			now := exampletest.Decode[statusBody](t, c.Get("/status").Want(t, 200, "")).Snowflake
			checkLease(t, now)
			if now.LeaseRenewed.After(*st.Snowflake.LeaseRenewed) {
				if now.Node != node || !now.LeaseUntil.After(*st.Snowflake.LeaseUntil) || now.HighWater.Before(*st.Snowflake.HighWater) {
					t.Fatalf("after a renewal: %+v\nbefore: %+v", now, st.Snowflake)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no renewal in 30s of a lease with a 2s TTL: %+v", now)
			}
		}

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

		if err := svc.Stop(); err != nil {
			t.Fatalf("run: %v\n%s", err, svc.Log)
		}
		if !strings.Contains(svc.Log.String(), "idservice: stopped") {
			t.Fatalf("no graceful stop in the log:\n%s", svc.Log)
		}
		if !external {
			return // the embedded Redis ended with the service
		}
		// The released node is free again (idgen picks free nodes at random,
		// so a new holder may or may not take it): its table entry has no owner.
		v, err := rdb.HGet(t.Context(), "redkit:idgen:v1:{"+service+"}:nodes:"+service, strconv.FormatInt(node, 10)).Result()
		if err != nil || !strings.HasPrefix(v, "|0|") {
			t.Fatalf("node %d after shutdown: %q, %v; want released", node, v, err)
		}
	})
}

func TestRun_demo(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		var out bytes.Buffer
		var stderr exampletest.SyncBuffer
		if err := run(t.Context(), []string{"-demo", "-service", fmt.Sprintf("test-%d", services.Add(1))}, &out, &stderr); err != nil {
			t.Fatalf("run: %v\n%s", err, &stderr)
		}
		for _, want := range []string{"snowflake (node ", "segment order-no           1 ", "sequence shop-7/invoice", `"healthy": true`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("demo output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

func TestRun_usage(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-max-names", "-1"}} {
		if err := run(t.Context(), args, io.Discard, &stderr); !errors.Is(err, app.ErrUsage) {
			t.Errorf("%q: %v, want app.ErrUsage", args, err)
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
