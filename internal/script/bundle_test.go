package script_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/redkit-go/redkit/internal/script"
)

func bundle() *script.Bundle {
	return script.NewBundle(fstest.MapFS{
		"scripts/lib.lua": {Data: []byte("local function a() return 1 end\n\n" +
			"local function b() return a() end\n\n" +
			"local function c() return 3 end\n")},
		"scripts/uses_b.lua": {Data: []byte("return b()\n")},
		"scripts/marked.lua": {Data: []byte("if ARGV[1] then return 0 end\n-- @common\nreturn c()\n")},
		"scripts/notes.txt":  {Data: []byte("not a script")},
	}, "scripts")
}

// Linked adds the library functions a script calls, through one another
// too, and only those; at the marker when there is one.
func TestBundle_Linked(t *testing.T) {
	b := bundle()
	src := b.Linked("uses_b.lua", "lib.lua").Source()
	if !strings.Contains(src, "local function a()") || !strings.Contains(src, "local function b()") ||
		strings.Contains(src, "local function c()") {
		t.Fatalf("uses_b.lua linked as:\n%s", src)
	}
	if strings.Index(src, "function a()") > strings.Index(src, "function b()") {
		t.Fatalf("library order not kept:\n%s", src)
	}
	src = b.Linked("marked.lua", "lib.lua").Source()
	fast, rest, _ := strings.Cut(src, "local function c()")
	if fast != "if ARGV[1] then return 0 end\n" || !strings.HasSuffix(rest, "return c()\n") || strings.Contains(src, "function a()") {
		t.Fatalf("marked.lua linked as %q: want the fast path, then c alone, then the rest", src)
	}
}

// Script prepends its chunks in order; Sources lists what was built, as
// built; File refuses a name the bundle does not have.
func TestBundle_ScriptAndSources(t *testing.T) {
	b := bundle()
	s := b.Script("uses_b.lua", "-- one", b.File("lib.lua"))
	if !strings.HasPrefix(s.Source(), "-- one\nlocal function a()") || !strings.HasSuffix(s.Source(), "return b()\n") {
		t.Fatalf("source %q", s.Source())
	}
	srcs := b.Sources()
	if len(srcs) != 1 || srcs["uses_b.lua"] != s.Source() {
		t.Fatalf("sources %v", srcs)
	}
	srcs["uses_b.lua"] = "changed"
	if b.Sources()["uses_b.lua"] != s.Source() {
		t.Fatal("Sources returned the bundle's own map")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("File of a missing name did not panic")
		}
	}()
	b.File("notes.txt")
}
