package httpx

import "testing"

// A module's error that wraps its own sentinel reads with one prefix.
func TestOnePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"stock: level phone: stock: not found":                   "stock: level phone: not found",
		"wallet: debit d-1: wallet: insufficient funds":          "wallet: debit d-1: insufficient funds",
		"outcome unknown, send again: stock: deduct o: stock: x": "outcome unknown, send again: stock: deduct o: x",
		"stock: sold out": "stock: sold out",
		"malformed body":  "malformed body",
	} {
		if got := OnePrefix(in); got != want {
			t.Errorf("OnePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
