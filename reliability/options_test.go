package reliability_test

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// badRetry are the WithRetry and WithClusterBudget values every module
// refuses; the options share one shape and one set of bounds.
var badRetry = []struct {
	name               string
	attempts           int
	minBackoff, maxBac time.Duration
	budget             time.Duration
}{
	{"no attempt", 0, 0, 0, 0},
	{"too many attempts", 101, 0, 0, 0},
	{"min above max", 3, time.Second, time.Millisecond, 0},
	{"negative backoff", 3, -time.Millisecond, time.Millisecond, 0},
	{"backoff too long", 3, 0, 2 * time.Minute, 0},
	{"budget too long", 1, 0, 0, 2 * time.Minute},
	{"negative budget", 1, 0, 0, -time.Second},
}

// constructors builds each module's client for rdb with a key prefix and
// the retry options, the same way for every module.
func constructors(prefix string, attempts int, minBackoff, maxBackoff, budget time.Duration) map[string]func(redis.UniversalClient) (any, error) {
	return map[string]func(redis.UniversalClient) (any, error){
		"lock.New": func(rdb redis.UniversalClient) (any, error) {
			return lock.New(rdb, lock.WithKeyPrefix(prefix), lock.WithRetry(attempts, minBackoff, maxBackoff), lock.WithClusterBudget(budget))
		},
		"stock.New": func(rdb redis.UniversalClient) (any, error) {
			return stock.New(rdb, stock.WithKeyPrefix(prefix), stock.WithRetry(attempts, minBackoff, maxBackoff), stock.WithClusterBudget(budget))
		},
		"wallet.New": func(rdb redis.UniversalClient) (any, error) {
			return wallet.New(rdb, wallet.WithKeyPrefix(prefix), wallet.WithRetry(attempts, minBackoff, maxBackoff), wallet.WithClusterBudget(budget))
		},
	}
}

// Every constructor validates its options and refuses a nil client: a typo
// in a service's configuration fails at start, with an error wrapping the
// module's ErrInvalid, and no value is returned.
func TestNew_refusesBadOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does no I/O
	defer rdb.Close()
	check := func(t *testing.T, what string, v any, err error) {
		t.Helper()
		if !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", what, err)
		}
		if v != nil && !reflect.ValueOf(v).IsNil() {
			t.Errorf("%s: returned a value beside its error", what)
		}
	}
	for _, c := range badRetry {
		for name, build := range constructors("ok", c.attempts, c.minBackoff, c.maxBac, c.budget) {
			v, err := build(rdb)
			check(t, name+" "+c.name, v, err)
		}
	}
	for _, p := range []string{"", "a:b", "{x}", "a b"} {
		for name, build := range constructors(p, 3, 0, 0, 0) {
			v, err := build(rdb)
			check(t, fmt.Sprintf("%s prefix %q", name, p), v, err)
		}
		_, err := idgen.NewSequence(rdb, "seq", idgen.WithKeyPrefix(p))
		check(t, fmt.Sprintf("idgen.NewSequence prefix %q", p), nil, err)
	}
	for name, build := range constructors("ok", 3, 0, 0, 0) {
		v, err := build(nil)
		check(t, name+" nil client", v, err)
	}
	for name, build := range constructors("ok", 1, 0, time.Minute, time.Minute) { // the bounds themselves
		v, err := build(rdb)
		if err != nil {
			t.Errorf("%s: valid options refused: %v", name, err)
			continue
		}
		if err := v.(io.Closer).Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
	rl, err := lock.NewRedlock(nil)
	check(t, "lock.NewRedlock no masters", rl, err)
	_, err = idgen.NewSequence(nil, "seq")
	check(t, "idgen.NewSequence nil client", nil, err)
}
