package valid_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/internal/valid"
)

// prefixGrammar is the key prefix rule as a regular expression, an oracle
// independent of the byte loop in valid.Prefix.
var prefixGrammar = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requireInvalid fails unless err wraps ErrInvalid and names field.
func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if !errors.Is(err, valid.ErrInvalid) || !strings.Contains(err.Error(), field) {
		t.Fatalf("error %v does not wrap ErrInvalid or name %q", err, field)
	}
}

// requireBounded fails unless err, a check's verdict on v, accepts exactly
// the v from lo to hi, refuses the rest as requireInvalid wants, and
// accepts only values a Lua number (a double) holds exactly.
func requireBounded(t *testing.T, err error, field string, v, lo, hi int64) {
	t.Helper()
	if want := v >= lo && v <= hi; want != (err == nil) {
		t.Fatalf("%s %d: %v, want valid=%v", field, v, err, want)
	}
	if err != nil {
		requireInvalid(t, err, field)
		return
	}
	if int64(float64(v)) != v {
		t.Fatalf("%s %d was accepted, and a double does not hold it exactly", field, v)
	}
}

func FuzzAmount(f *testing.F) {
	for _, v := range []int64{0, 1, -1, valid.MaxAmount, valid.MaxAmount + 1, -valid.MaxAmount} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		requireBounded(t, valid.Amount("qty", v), "qty", v, 1, valid.MaxAmount)
	})
}

func FuzzSigned(f *testing.F) {
	for _, v := range []int64{0, valid.MaxAmount, valid.MaxAmount + 1, -valid.MaxAmount, -valid.MaxAmount - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		requireBounded(t, valid.Signed("balance", v), "balance", v, -valid.MaxAmount, valid.MaxAmount)
	})
}

func FuzzDuration(f *testing.F) {
	f.Add(int64(valid.LockTTLMin), int64(valid.LockTTLMin), int64(valid.LockTTLMax))
	f.Add(int64(valid.LockTTLMin-1), int64(valid.LockTTLMin), int64(valid.LockTTLMax))
	f.Add(int64(valid.HoldTTLMax+1), int64(valid.HoldTTLMin), int64(valid.HoldTTLMax))
	f.Add(int64(-1), int64(valid.LeaseMin), int64(valid.LeaseMax))
	f.Add(int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, d, lo, hi int64) {
		err := valid.Duration("ttl", time.Duration(d), time.Duration(lo), time.Duration(hi))
		if want := lo <= d && d <= hi; want != (err == nil) {
			t.Fatalf("Duration(%d, %d..%d) = %v, want valid=%v", d, lo, hi, err, want)
		}
		if err != nil {
			requireInvalid(t, err, "ttl")
		}
	})
}

func FuzzPrefix(f *testing.F) {
	for _, p := range []string{"redkit", "", "a:b", "{x}", "a/b", strings.Repeat("p", 65), "é"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := valid.Prefix(p)
		if want := prefixGrammar.MatchString(p); want != (err == nil) {
			t.Fatalf("Prefix(%q) = %v, grammar says valid=%v", p, err, want)
		}
		if err != nil {
			requireInvalid(t, err, "key prefix")
			return
		}
		// A prefix can add neither a hash tag, nor a key separator, nor a
		// glob character to a key.
		if strings.ContainsAny(p, "{}:*?[]\\/ ") {
			t.Fatalf("Prefix(%q) accepted a forbidden byte", p)
		}
	})
}
