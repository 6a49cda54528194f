package auth_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/examples/kit/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func request(authorization string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestKeys_Authenticate(t *testing.T) {
	alice, aliceLine, err := auth.NewKey("shop-7/alice", "buy")
	if err != nil {
		t.Fatal(err)
	}
	ops, opsLine, err := auth.NewKey("ops", "sale:admin", "read")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(aliceLine, alice) || strings.Contains(opsLine, ops) {
		t.Fatal("the stored line holds the key itself")
	}
	keys, err := auth.ParseKeys("# buyers\n"+aliceLine+"\n\n"+opsLine+"\n", "buy", "sale:admin", "read")
	if err != nil {
		t.Fatal(err)
	}

	p, err := keys.Authenticate(request("Bearer " + alice))
	if err != nil || p.ID != "shop-7/alice" || !p.Has("buy") || p.Has("read") {
		t.Fatalf("alice: %+v, %v", p, err)
	}
	p, err = keys.Authenticate(request("bearer " + ops))
	if err != nil || p.ID != "ops" || !p.Has("sale:admin") || !p.Has("read") || p.Has("buy") {
		t.Fatalf("ops: %+v, %v", p, err)
	}

	wrong := alice[:len(alice)-1] + "x"
	if alice[len(alice)-1] == 'x' {
		wrong = alice[:len(alice)-1] + "y"
	}
	for _, h := range []string{"Bearer " + wrong, "Basic " + alice, "Bearer ", alice, "Bearer " + strings.TrimPrefix(aliceLine, "sha256:")[:64]} {
		_, err := keys.Authenticate(request(h))
		if !errors.Is(err, auth.ErrBadCredential) {
			t.Errorf("%q: %v, want ErrBadCredential", h, err)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(h, "Bearer ")) && len(h) > len("Bearer ") {
			t.Errorf("%q: the error repeats the credential: %v", h, err)
		}
	}
	if _, err := keys.Authenticate(request("")); !errors.Is(err, auth.ErrNoCredential) {
		t.Errorf("no header: %v, want ErrNoCredential", err)
	}
}

// A key pasted where its hash belongs is refused without being printed
// back, and so are unknown scopes and bad principals.
func TestParseKeys_invalid(t *testing.T) {
	key, line, err := auth.NewKey("alice", "buy")
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"":                                      "no keys",
		"# only a comment":                      "no keys",
		key + " alice buy":                      "the hash, never the key",
		"sha256:abc alice buy":                  "64 hex digits",
		strings.Replace(line, "buy", "buyy", 1): `unknown scope "buyy"`,
		strings.Replace(line, "alice", "al ice", 1): "want",
		strings.Replace(line, "alice", "a{b}", 1):   "principal",
		strings.Replace(line, "alice", "a/b/c", 1):  "principal",
		strings.TrimSuffix(line, " buy"):            "want",
	} {
		_, err := auth.ParseKeys(text, "buy", "read")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", text, err, want)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("%q: the error prints the key: %v", text, err)
		}
	}
	// Several keys in one environment variable, separated by ';'.
	_, line2, _ := auth.NewKey("bob", "read")
	if _, err := auth.ParseKeys(line+";"+line2, "buy", "read"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.NewKey("alice"); err == nil {
		t.Error("a key without scopes was made")
	}
}
