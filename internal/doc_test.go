package internal_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLayers checks the imports between the packages of internal that the
// package documentation (doc.go) and ARCHITECTURE.md §2 state.
func TestLayers(t *testing.T) {
	want := map[string][]string{
		"keys":   nil,
		"valid":  nil,
		"worker": nil,
		"retry":  {"valid"},
		"script": {"retry", "valid"},
		"stream": {"retry", "valid"},
		"fence":  {"keys", "retry", "script", "valid"},
		"server": {"retry", "script"},
	}
	const prefix = "github.com/redkit-go/redkit/internal/"
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(e.Name(), "*.go"))
		uses := map[string]bool{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if rest, ok := strings.CutPrefix(p, prefix); ok {
					uses[rest] = true
				}
			}
		}
		if len(files) == 0 {
			continue
		}
		w, ok := want[e.Name()]
		if !ok {
			t.Errorf("package %s is not described in doc.go and ARCHITECTURE.md §2", e.Name())
			continue
		}
		got := make([]string, 0, len(uses))
		for u := range uses {
			got = append(got, u)
		}
		slices.Sort(got)
		if !slices.Equal(got, w) {
			t.Errorf("%s imports %v of internal; doc.go and ARCHITECTURE.md §2 say %v", e.Name(), got, w)
		}
	}
}
