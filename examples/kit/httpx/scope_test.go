package httpx

import (
	"net/http"
	"strings"
	"testing"
)

// Two principals' keys never meet: the same key of two principals is two
// IDs, each one's KeyOf only for its own principal, and no ID is the scoped
// form of two (principal, key) pairs.
func TestScopedID(t *testing.T) {
	principals := []string{"alice", "bob", "shop-7/alice", "a:b", "a", "admin"}
	keys := []string{"o-1", "b:o-1", "shop/x", "x." + strings.Repeat("k", MaxKeyLen-2)}
	seen := map[string]string{}
	for _, p := range principals {
		for _, k := range keys {
			id, err := ScopedID(p, k)
			if err != nil {
				t.Fatalf("ScopedID(%q, %q): %v", p, k, err)
			}
			if len(id) > 128 {
				t.Errorf("ScopedID(%q, %q) is %d bytes", p, k, len(id))
			}
			if other, ok := seen[id]; ok {
				t.Errorf("ScopedID(%q, %q) = %q, as for %s", p, k, id, other)
			}
			seen[id] = p + " " + k
			for _, q := range principals {
				got, ok := KeyOf(q, id)
				if want := q == p; ok != want || ok && got != k {
					t.Errorf("KeyOf(%q, ScopedID(%q, %q)) = %q, %v", q, p, k, got, ok)
				}
			}
		}
	}
	for _, k := range []string{"", "a b", "{x}", "/x", "x/", "a/b/c", strings.Repeat("k", MaxKeyLen+1), "é"} {
		_, err := ScopedID("alice", k)
		var se *StatusError
		if !asStatus(err, &se) || se.Status != http.StatusBadRequest || se.Code != "invalid" {
			t.Errorf("ScopedID(alice, %q): %v, want a 400 invalid", k, err)
		}
	}
}

func asStatus(err error, se **StatusError) bool {
	s, ok := err.(*StatusError)
	*se = s
	return ok
}
