package redistest

import (
	"flag"
	"regexp"
	"strconv"
	"testing"
)

// The grammar of caller data, written out as regular expressions for
// property and fuzz tests: an oracle independent of the code that checks
// it (package internal/valid), so a bug there does not hide in its tests.

var nameGrammar = regexp.MustCompile(`^[A-Za-z0-9._:-]+(/[A-Za-z0-9._:-]+)?$`)

// ValidName reports whether s is a valid name or ID (ARCHITECTURE.md §5):
// 1–128 bytes of A-Z a-z 0-9 . _ - : with at most one inner '/'.
func ValidName(s string) bool { return len(s) <= 128 && nameGrammar.MatchString(s) }

// ValidAmount reports whether v is a valid amount: 1..2^53-1, what a Lua
// number holds exactly.
func ValidAmount(v int64) bool { return v >= 1 && v <= 1<<53-1 }

// SetRapidChecks sets how many cases pgregory.net/rapid draws in the test
// tb (its -rapid.checks flag) and restores the old number when tb ends. A
// -rapid.checks given on the command line wins, and without rapid in the
// test binary it does nothing.
func SetRapidChecks(tb testing.TB, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		return
	}
	given := false
	flag.Visit(func(v *flag.Flag) { given = given || v.Name == "rapid.checks" })
	if given {
		return
	}
	old := f.Value.String()
	_ = f.Value.Set(strconv.Itoa(n))
	tb.Cleanup(func() { _ = f.Value.Set(old) })
}
