package redisconn_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/redisconn"
	"github.com/redkit-go/redkit/redistest"
)

func open(t *testing.T, url string) *redisconn.Conn {
	t.Helper()
	c, err := redisconn.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// wantConn checks what c is connected to, that Describe says so (it
// contains describe), and that it works.
func wantConn(t *testing.T, c *redisconn.Conn, embedded, cluster bool, describe string) {
	t.Helper()
	if c.Embedded != embedded || c.Cluster != cluster {
		t.Fatalf("Embedded %v, Cluster %v; want %v, %v", c.Embedded, c.Cluster, embedded, cluster)
	}
	want := "*redis.Client"
	if cluster {
		want = "*redis.ClusterClient"
	}
	if got := fmt.Sprintf("%T", c.Client); got != want {
		t.Fatalf("Client is %s, want %s", got, want)
	}
	if !strings.Contains(c.Describe, describe) {
		t.Errorf("Describe = %q, want it to say %q", c.Describe, describe)
	}
	// A call ends with its context: a request's deadline bounds it.
	var ctxTimeout bool
	switch rdb := c.Client.(type) {
	case *redis.Client:
		ctxTimeout = rdb.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		ctxTimeout = rdb.Options().ContextTimeoutEnabled
	}
	if !ctxTimeout {
		t.Errorf("%T without ContextTimeoutEnabled", c.Client)
	}
	roundTrip(t, c.Client)
}

// roundTrip writes and reads keys in many slots, so on a Cluster the client
// must follow the slot map to several nodes.
func roundTrip(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := t.Context()
	for i := range 20 {
		k := fmt.Sprintf("redisconn-test-%d", i)
		if err := rdb.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if got, err := rdb.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, got, err, i)
		}
	}
}

func TestOpen_embedded(t *testing.T) {
	wantConn(t, open(t, ""), true, false, "embedded")
}

// TTLs on the embedded server follow the wall clock, without anyone moving
// miniredis's clock by hand: keys expire, and not before their time.
func TestOpen_embeddedTTLsExpire(t *testing.T) {
	c := open(t, "")
	ctx := t.Context()
	if err := c.Client.Set(ctx, "short", "x", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx, "long", "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Client.Exists(ctx, "short").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS short right after SET = %d, %v", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Client.Exists(ctx, "short").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key with a 300ms TTL still exists after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ttl, err := c.Client.PTTL(ctx, "long").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL long = %v, %v; want just under an hour", ttl, err)
	}
	// TIME is the wall clock too, so deadlines computed by scripts agree
	// with the TTLs.
	now, err := c.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Fatalf("TIME is %v away from the wall clock", d)
	}
}

func TestOpen_server(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	for _, url := range []string{"redis://" + s.Addr(), s.Addr(), " redis://" + s.Addr() + "/2 "} {
		t.Run(url, func(t *testing.T) {
			wantConn(t, open(t, url), false, false, s.Addr())
		})
	}
}

// A user whose ACL refuses INFO still gets a single-server client, and the
// password shows up nowhere.
func TestOpen_aclUserWithoutInfo(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user app on >CHANGE-ME ~* &* +@all -info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, password := redistest.NewWithACL(t, acl)
	c := open(t, "redis://app:"+password+"@"+s.Addr())
	if err := c.Client.Info(t.Context(), "cluster").Err(); err == nil {
		t.Fatal("INFO allowed: the ACL does not test what it should")
	}
	if strings.Contains(c.Describe, password) {
		t.Fatalf("Describe = %q shows the password", c.Describe)
	}
	wantConn(t, c, false, false, s.Addr())
	_, err := redisconn.Open(t.Context(), "redis://app:wrong-"+password+"@"+s.Addr())
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), password) {
		t.Fatalf("error %q shows the password", err)
	}
}

func TestOpen_unixSocket(t *testing.T) {
	// Unix socket paths are limited to about 100 bytes; t.TempDir can be
	// longer.
	dir, err := os.MkdirTemp("", "rc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	redistest.New(t, redistest.Options{Config: []string{"unixsocket " + sock, "unixsocketperm 700"}})
	wantConn(t, open(t, "unix://"+sock), false, false, sock)
}

func TestOpen_cluster(t *testing.T) {
	cl := redistest.NewCluster(t, redistest.ClusterOptions{})
	cases := map[string]string{
		"one node":                        cl.Addrs()[1],
		"node URL":                        "redis://" + cl.Addrs()[0],
		"comma list":                      strings.Join(cl.Addrs(), ","),
		"comma list with spaces and URLs": "redis://" + cl.Addrs()[0] + " , " + cl.Addrs()[2] + ",",
	}
	for name, url := range cases {
		t.Run(name, func(t *testing.T) {
			wantConn(t, open(t, url), false, true, "Cluster")
		})
	}
}

func TestOpen_malformed(t *testing.T) {
	for _, url := range []string{" , ", "redis://host:notaport", "ftp://x", "redis://a:1,redis://b:notaport"} {
		if c, err := redisconn.Open(t.Context(), url); err == nil {
			_ = c.Close()
			t.Errorf("Open(%q) succeeded", url)
		} else if !strings.HasPrefix(err.Error(), "redisconn: ") {
			t.Errorf("Open(%q) error %q lacks the package prefix", url, err)
		}
	}
}

func TestOpen_unreachable(t *testing.T) {
	// A port nothing listens on: take one from a server and stop it.
	s, err := redistest.Start(t.Context(), redistest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dead := s.Addr()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"redis://" + dead, dead + "," + dead} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if c, err := redisconn.Open(ctx, url); err == nil {
			_ = c.Close()
			t.Errorf("Open(%q) succeeded", url)
		} else if !strings.HasPrefix(err.Error(), "redisconn: ") {
			t.Errorf("Open(%q) error %q lacks the package prefix", url, err)
		}
		cancel()
	}
}

func TestClose_twice(t *testing.T) {
	c, err := redisconn.Open(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // no panic, no hang
}
