package valid_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/redistest"
)

func TestName(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, tc := range []struct {
		in     string
		reason string // "" = valid
	}{
		{"sku-1", ""},
		{"shop-7/sku-1", ""},
		{"a", ""},
		{"A.b_c-d:e", ""},
		{"order:2024:0001", ""},
		{long, ""},
		{long[:127] + "/", "starts or ends with '/'"},
		{long + "a", "more than 128"},
		{"", "is empty"},
		{"/sku", "starts or ends with '/'"},
		{"sku/", "starts or ends with '/'"},
		{"/", "starts or ends with '/'"},
		{"a/b/c", "more than one '/'"},
		{"a//b", "more than one '/'"},
		{"{tag}", "has byte \"{\""},
		{"a}b", "has byte \"}\""},
		{"a b", "has byte \" \""},
		{"a*", "has byte \"*\""},
		{"a?", "has byte \"?\""},
		{"a[b]", "has byte \"[\""},
		{"a\x00b", "has byte \"\\x00\""},
		{"a\nb", "has byte \"\\n\""},
		{"café", "has byte \"\\xc3\""},
		{"a\\b", "has byte \"\\\\\""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			err := valid.Name("order ID", tc.in)
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, valid.ErrInvalid)
			require.ErrorContains(t, err, "order ID")
			require.ErrorContains(t, err, tc.reason)
		})
	}
}

func TestAmount(t *testing.T) {
	for _, v := range []int64{1, 2, valid.MaxAmount} {
		require.NoError(t, valid.Amount("qty", v), v)
	}
	for _, v := range []int64{0, -1, valid.MaxAmount + 1, math.MaxInt64, math.MinInt64} {
		err := valid.Amount("qty", v)
		require.ErrorIs(t, err, valid.ErrInvalid, v)
		require.ErrorContains(t, err, "qty")
		require.ErrorContains(t, err, "outside 1..9007199254740991")
	}
}

func TestSigned(t *testing.T) {
	for _, v := range []int64{0, 1, -1, valid.MaxAmount, -valid.MaxAmount} {
		require.NoError(t, valid.Signed("balance", v), v)
	}
	for _, v := range []int64{valid.MaxAmount + 1, -valid.MaxAmount - 1, math.MaxInt64, math.MinInt64} {
		err := valid.Signed("balance", v)
		require.ErrorIs(t, err, valid.ErrInvalid, v)
		require.ErrorContains(t, err, "balance")
	}
}

func TestDuration(t *testing.T) {
	lo, hi := valid.LockTTLMin, valid.LockTTLMax
	for _, d := range []time.Duration{lo, time.Second, hi} {
		require.NoError(t, valid.Duration("lock TTL", d, lo, hi), d)
	}
	for _, d := range []time.Duration{0, -time.Second, lo - 1, hi + 1} {
		err := valid.Duration("lock TTL", d, lo, hi)
		require.ErrorIs(t, err, valid.ErrInvalid, d)
		require.ErrorContains(t, err, "lock TTL")
		require.ErrorContains(t, err, "outside 10ms..24h0m0s")
	}
}

func TestDuration_bounds(t *testing.T) {
	require.Equal(t, 10*time.Millisecond, valid.LockTTLMin)
	require.Equal(t, 24*time.Hour, valid.LockTTLMax)
	require.Equal(t, time.Second, valid.HoldTTLMin)
	require.Equal(t, 7*24*time.Hour, valid.HoldTTLMax)
	require.Equal(t, time.Minute, valid.IdemWindowMin)
	require.Equal(t, 30*24*time.Hour, valid.IdemWindowMax)
	require.Equal(t, time.Second, valid.LeaseMin)
	require.Equal(t, time.Hour, valid.LeaseMax)
}

func TestPrefix(t *testing.T) {
	for _, p := range []string{"redkit", "a", "my-app_2.test", strings.Repeat("p", 64)} {
		require.NoError(t, valid.Prefix(p), p)
	}
	for _, p := range []string{"", strings.Repeat("p", 65), "a:b", "a/b", "{a}", "a b", "a*"} {
		err := valid.Prefix(p)
		require.ErrorIs(t, err, valid.ErrInvalid, p)
		require.ErrorContains(t, err, "key prefix")
	}
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"sku-1", "shop-7/sku-1", "a/b/c", "/x", "x/", "{t}", "a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := valid.Name("id", s)
		want := redistest.ValidName(s) // the grammar as a regular expression, not valid's byte loop
		if want != (err == nil) {
			t.Fatalf("Name(%q) = %v, grammar says valid=%v", s, err, want)
		}
		if err != nil && (!errors.Is(err, valid.ErrInvalid) || !strings.Contains(err.Error(), "id ")) {
			t.Fatalf("Name(%q) error %q does not wrap ErrInvalid or name the field", s, err)
		}
		// A valid name can never carry a hash tag or a glob character.
		if err == nil && strings.ContainsAny(s, "{}*?[] \\") {
			t.Fatalf("Name(%q) accepted a forbidden byte", s)
		}
	})
}

// Page takes "" or a stream entry ID and a limit of 1..MaxPage, and gives
// the exclusive XRANGE start after the cursor.
func TestPage(t *testing.T) {
	for _, tc := range []struct {
		cursor string
		limit  int
		start  string // "" = invalid
	}{
		{"", 1, "-"},
		{"", valid.MaxPage, "-"},
		{"1700000000000-0", 10, "(1700000000000-0"},
		{"0-0", 10, "(0-0"},
		{"", 0, ""},
		{"", valid.MaxPage + 1, ""},
		{"-", 10, ""},
		{"(1-0", 10, ""},
		{"1-", 10, ""},
		{"1", 10, ""},
		{"1-2-3", 10, ""},
		{"123456789012345678901-0", 10, ""},
		{"x-1", 10, ""},
		{"18446744073709551615-0", 10, "(18446744073709551615-0"}, // the largest ms
		{"18446744073709551616-0", 10, ""},                        // past 64 bits
		{"99999999999999999999-0", 10, ""},
		{"1-18446744073709551616", 10, ""},
		{"18446744073709551615-18446744073709551615", 10, ""}, // nothing can follow it
		{"+1-0", 10, ""},
	} {
		start, err := valid.Page(tc.cursor, tc.limit)
		if tc.start == "" {
			require.ErrorIs(t, err, valid.ErrInvalid, "%q %d", tc.cursor, tc.limit)
			continue
		}
		require.NoError(t, err, "%q %d", tc.cursor, tc.limit)
		require.Equal(t, tc.start, start)
	}
}
