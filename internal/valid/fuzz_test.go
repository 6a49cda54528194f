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

func FuzzAmount(f *testing.F) {
	for _, v := range []int64{0, 1, -1, valid.MaxAmount, valid.MaxAmount + 1, -valid.MaxAmount} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		err := valid.Amount("qty", v)
		if want := v >= 1 && v <= valid.MaxAmount; want != (err == nil) {
			t.Fatalf("Amount(%d) = %v, want valid=%v", v, err, want)
		}
		if err != nil {
			requireInvalid(t, err, "qty")
			return
		}
		// Every accepted amount is exact as a Lua number (a double).
		if int64(float64(v)) != v {
			t.Fatalf("Amount accepted %d, which a double does not hold exactly", v)
		}
	})
}

func FuzzSigned(f *testing.F) {
	for _, v := range []int64{0, valid.MaxAmount, valid.MaxAmount + 1, -valid.MaxAmount, -valid.MaxAmount - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		err := valid.Signed("balance", v)
		if want := v >= -valid.MaxAmount && v <= valid.MaxAmount; want != (err == nil) {
			t.Fatalf("Signed(%d) = %v, want valid=%v", v, err, want)
		}
		if err != nil {
			requireInvalid(t, err, "balance")
			return
		}
		if int64(float64(v)) != v {
			t.Fatalf("Signed accepted %d, which a double does not hold exactly", v)
		}
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
