// Package auth decides who is calling an example service and what they may
// do: a Principal with scopes, found by an Authenticator.
//
// The Authenticator interface is the one seam a team replaces with its own
// scheme (JWTs checked against a JWKS, mTLS, a header an API gateway signs);
// everything after it (scope checks, rate limits, the buyer of an order)
// uses only the Principal it returns.
//
// Keys is the scheme the templates ship with: bearer API keys
// ("Authorization: Bearer rk_..."), of which the service stores only
// SHA-256 hashes, one line per key:
//
//	sha256:<64 hex digits> <principal> <scope>[,<scope>...]
//
// A key is 32 random bytes, so a fast hash is as good as a slow one here:
// nobody can guess their way back from the hash. The presented key's hash is
// compared with every stored hash in constant time, so the time a refusal
// takes says nothing about how close a guess was.
package auth

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Errors an Authenticator returns; both are a 401.
var (
	ErrNoCredential  = errors.New("no credential: send Authorization: Bearer <API key>")
	ErrBadCredential = errors.New("credential not accepted")
)

// Principal is who a request comes from, as its credential proves.
type Principal struct {
	// ID names the principal: the buyer of an order, the key of its rate
	// limit. 1–128 bytes of A-Z a-z 0-9 . _ - : with at most one '/'.
	ID     string
	Scopes []string
}

// Has reports whether p was given scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Authenticator finds the principal behind a request. It returns an error
// wrapping ErrNoCredential or ErrBadCredential when there is none; the
// error's text must not contain the credential.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// PrincipalFrom returns the principal the request's context carries; ok is
// false outside an authenticated route.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// keyPrefix starts every key NewKey makes, so a key found in a
// repository or a paste is recognisable for what it is.
const keyPrefix = "rk_"

// NewKey returns a new random API key and the line that stores it (hashed)
// for principal with scopes.
func NewKey(principal string, scopes ...string) (key, line string, err error) {
	if err := checkPrincipal(principal, scopes); err != nil {
		return "", "", err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	key = keyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, Line(key, principal, scopes...), nil
}

// Line returns the stored form of key for principal with scopes.
func Line(key, principal string, scopes ...string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:]) + " " + principal + " " + strings.Join(scopes, ",")
}

// Keys authenticates bearer API keys against their stored hashes.
type Keys struct {
	entries []entry
}

type entry struct {
	hash      [sha256.Size]byte
	principal Principal
}

var _ Authenticator = (*Keys)(nil)

var (
	principalRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+(/[A-Za-z0-9._:-]+)?$`)
	scopeRE     = regexp.MustCompile(`^[a-z][a-z0-9_:-]*$`)
)

func checkPrincipal(id string, scopes []string) error {
	if len(id) > 128 || !principalRE.MatchString(id) {
		return fmt.Errorf("principal %q: want 1-128 bytes of A-Z a-z 0-9 . _ - : with at most one '/'", id)
	}
	if len(scopes) == 0 {
		return fmt.Errorf("principal %q: no scopes", id)
	}
	for _, s := range scopes {
		if !scopeRE.MatchString(s) {
			return fmt.Errorf("principal %q: scope %q: want lower-case letters, digits, '_', ':' or '-'", id, s)
		}
	}
	return nil
}

// ParseKeys reads stored keys, one per line as Line writes them; blank
// lines and lines starting with '#' are skipped, and so may ';' separate
// keys on one line (for an environment variable). Every scope must be one
// of known, so a typo is found at start-up rather than as a 403 later.
func ParseKeys(text string, known ...string) (*Keys, error) {
	k := &Keys{}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ";", "\n")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseLine(line, known)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", n, err)
		}
		k.entries = append(k.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(k.entries) == 0 {
		return nil, errors.New("no keys")
	}
	return k, nil
}

func parseLine(line string, known []string) (entry, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return entry{}, errors.New(`want "sha256:<hex> <principal> <scope>[,<scope>...]"`)
	}
	h, ok := strings.CutPrefix(f[0], "sha256:")
	raw, err := hex.DecodeString(h)
	if !ok || err != nil || len(raw) != sha256.Size {
		// The field is shown only when it is no hash, so a key pasted
		// where its hash belongs is not printed back.
		return entry{}, errors.New("first field: want sha256: and 64 hex digits (the hash, never the key itself)")
	}
	scopes := strings.Split(f[2], ",")
	if err := checkPrincipal(f[1], scopes); err != nil {
		return entry{}, err
	}
	for _, s := range scopes {
		if len(known) > 0 && !slices.Contains(known, s) {
			return entry{}, fmt.Errorf("principal %q: unknown scope %q (this service has %s)", f[1], s, strings.Join(known, ", "))
		}
	}
	e := entry{principal: Principal{ID: f[1], Scopes: scopes}}
	copy(e.hash[:], raw)
	return e, nil
}

// Authenticate implements Authenticator for "Authorization: Bearer <key>".
func (k *Keys) Authenticate(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, ErrNoCredential
	}
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return Principal{}, fmt.Errorf("%w: want the Bearer scheme", ErrBadCredential)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
	// Every entry is compared, found or not, so the time taken does not
	// depend on where (or whether) the key is stored.
	found := -1
	for i := range k.entries {
		if subtle.ConstantTimeCompare(sum[:], k.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, ErrBadCredential
	}
	p := k.entries[found].principal
	p.Scopes = slices.Clone(p.Scopes)
	return p, nil
}
