package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/auth"
)

var errBusiness = errors.New("sold out")

// A 5xx body tells its code and a text of the service's, never its cause;
// an error that says Redis did not answer is 503 unavailable, on a read
// too when the library reports an unknown outcome; anything else
// unexpected is a 500.
func TestMux_fail(t *testing.T) {
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED,
		Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6379}}
	unknown := errors.New("outcome unknown")
	status := func(err error) error {
		switch {
		case errors.Is(err, errBusiness):
			return &StatusError{Status: 422, Code: "sold_out", Err: err}
		case errors.Is(err, unknown):
			return UnknownOutcome(err)
		}
		return err
	}
	key, line, err := auth.NewKey("alice", "buy")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.ParseKeys(line)
	if err != nil {
		t.Fatal(err)
	}
	var failWith error
	mux := NewMux("test", Edge{Auth: keys}, status)
	for _, m := range []string{"GET", "POST"} {
		mux.Handle(m+" /x", "buy", func(http.ResponseWriter, *http.Request) error { return failWith })
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	for _, c := range []struct {
		method string
		err    error
		status int
		code   string
	}{
		{"POST", fmt.Errorf("deduct: %w", errBusiness), 422, "sold_out"},
		{"POST", fmt.Errorf("deduct: %w", cause), 503, "unavailable"},
		{"GET", context.DeadlineExceeded, 503, "unavailable"},
		{"GET", redis.ErrPoolTimeout, 503, "unavailable"},
		{"GET", fmt.Errorf("level: %w", redis.ErrClosed), 503, "unavailable"},
		{"POST", errors.Join(unknown, cause), 503, "unknown_outcome"},
		{"GET", errors.Join(unknown, cause), 503, "unavailable"},
		{"POST", errors.New("ERR user_script:1: attempt to index a nil value at /tmp/x.go:12"), 500, "internal"},
	} {
		failWith = c.err
		req, _ := http.NewRequestWithContext(t.Context(), c.method, ts.URL+"/x", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p Problem
		err = json.NewDecoder(resp.Body).Decode(&p)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || p.Code != c.code {
			t.Errorf("%s %v: %d %+v, %v; want %d %s", c.method, c.err, resp.StatusCode, p, err, c.status, c.code)
		}
		for _, secret := range []string{"10.1.2.3", "6379", "refused", "/tmp", "ERR", "user_script"} {
			if c.status >= 500 && strings.Contains(p.Error, secret) {
				t.Errorf("%s %v: the body tells %q: %s", c.method, c.err, secret, p.Error)
			}
		}
		if c.status == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %v: 503 without Retry-After", c.method, c.err)
		}
	}
}
