package redistest

import (
	"context"
	"crypto/rand"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACLPlaceholder is the password redkit's redis.acl files ship with. It
// must be replaced before the file is used; NewWithACL replaces it with a
// random password.
const ACLPlaceholder = "CHANGE-ME"

// NewWithACL starts a server for a test with its users loaded from the ACL
// file at aclFile (aclfile directive), every ">CHANGE-ME" password replaced
// by a fresh random one, which it returns. The default user keeps its
// default rights, so s.Client() is an administrator. Log in as a file's
// user with s.Client(func(o *redis.Options) { o.Username, o.Password = user, password }).
func NewWithACL(tb testing.TB, aclFile string) (s *Server, password string) {
	tb.Helper()
	src, err := os.ReadFile(aclFile)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	password = rand.Text()
	// Redis wants an absolute path; the copy lives in the test's temp dir.
	path := filepath.Join(tb.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(src), ">"+ACLPlaceholder, ">"+password)), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return New(tb, Options{Config: []string{"aclfile " + path}}), password
}

// IsNoPerm reports whether err is an ACL refusal: a NOPERM reply, or the
// error a script gets when its user may not run a command or touch a key.
func IsNoPerm(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't")
}

// RequireLeastPrivilege fails t unless rdb's user is refused what no
// module's ACL user may do: FLUSHALL, KEYS, CONFIG GET, a key outside its
// patterns, foreignKey (another module's key), and FLUSHALL or an outside
// key inside a script; and each of more, the refusals particular to the
// module (what it names, the error of the call that must be refused).
func RequireLeastPrivilege(t testing.TB, rdb *redis.Client, foreignKey string, more map[string]error) {
	t.Helper()
	ctx := context.Background()
	refused := map[string]error{
		"FLUSHALL":                   rdb.FlushAll(ctx).Err(),
		"KEYS":                       rdb.Keys(ctx, "*").Err(),
		"CONFIG GET":                 rdb.ConfigGet(ctx, "requirepass").Err(),
		"a key outside the patterns": rdb.Set(ctx, "other:key", 1, 0).Err(),
		"another module's key":       rdb.Get(ctx, foreignKey).Err(),
		"FLUSHALL inside a script":   rdb.Eval(ctx, "return redis.call('FLUSHALL')", nil).Err(),
		"an outside key in a script": rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"other:key"}).Err(),
	}
	maps.Copy(refused, more)
	for what, err := range refused {
		if !IsNoPerm(err) {
			t.Errorf("%s: %v, want an ACL refusal", what, err)
		}
	}
}
