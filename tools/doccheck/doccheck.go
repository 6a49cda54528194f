// Package doccheck keeps redkit's documentation and code together where a
// machine can tell them apart. Check reads the Markdown files of a
// repository (every *.md but the changelogs, which record the past) and the
// package documentation of every package of its go.work, and reports:
//
//   - a Go snippet that does not compile: a ```go block of a Markdown file,
//     or a code block of a package comment that is Go (it parses as Go, or
//     it has := or a func), type-checked against the workspace's packages;
//   - an exported identifier that does not exist: in Markdown, one named in
//     backquotes (`stock.ErrSoldOut`, `Ledger.Transfer`, `WithBuckets(b)`,
//     `inv.Deduct`, a method of the type of one of the Givens below);
//     in a package comment, one named in the prose (Go doc comments have no
//     markup), looked up in the package's module, then in the packages the
//     module imports;
//   - a make target, a file or a test that does not exist: `make <target>`
//     anywhere, Markdown links and file paths (a name with an extension, or
//     a path whose first element exists), and Test, Fuzz, Benchmark and
//     Example names, with a subtest's name looked for among the repository's
//     string literals, and a test a go test -run names on packages that
//     do not declare it (go test would pass, running nothing);
//   - a telemetry name (redkit. and dotted lower-case words: a metric, an
//     attribute) that no string literal of the workspace spells whole.
//
// A Markdown code block is fenced (```go for Go) or indented by four
// spaces; an indented one is read as commands.
//
// Each finding names the file and line of the documentation.
//
// A snippet is compiled as written, with three allowances for what
// documentation leaves out. Statements are the body of a function that
// returns an error, so `return err` works. Variables may be declared and
// not used. And the names in Givens may be used without being declared,
// as the reader's own variables (ctx, rdb, orderID...). "{ ... }" and a
// line of "..." stand for code left out. Imports are added for the
// packages a snippet names, by package name.
package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Finding is one disagreement between a document and the code.
type Finding struct {
	File string // relative to the repository root
	Line int
	Msg  string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Msg) }

// Givens are the names a snippet may use without declaring them, with
// their types: the variables a reader of the documentation already has.
var Givens = []struct{ Name, Type string }{
	{"ctx", "context.Context"},
	{"rdb", "redis.UniversalClient"},
	{"inv", "*stock.Inventory"},
	{"led", "*wallet.Ledger"},
	{"locks", "*lock.Client"},
	{"orderID", "string"},
	{"userID", "string"},
	{"host", "string"},
	{"skus", "[]string"},
	{"accounts", "[]string"},
	{"callBank", "func(context.Context, lock.Fence) error"},
	{"t", "*testing.T"},
}

// Check checks the documentation of the repository at root, which holds
// a go.work, and returns what it found, sorted by file and line. An error
// means the check could not run (go list failed, a file was unreadable).
func Check(root string) ([]Finding, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	c := &checker{root: root}
	if c.ws, err = loadWorkspace(root); err != nil {
		return nil, err
	}
	if c.targets, err = makeTargets(filepath.Join(root, "Makefile")); err != nil {
		return nil, err
	}
	if c.files, err = repoFiles(root); err != nil {
		return nil, err
	}
	docs, err := c.collectDocs()
	if err != nil {
		return nil, err
	}
	var snippets []snippet
	for _, d := range docs {
		c.checkRefs(d)
		snippets = append(snippets, d.snippets...)
	}
	if err := c.compileSnippets(snippets); err != nil {
		return nil, err
	}
	sort.SliceStable(c.findings, func(i, j int) bool {
		a, b := c.findings[i], c.findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return c.findings, nil
}

type checker struct {
	root     string
	ws       *workspace
	targets  map[string]bool
	files    *fileSet
	findings []Finding
	seen     map[string]bool // findings already reported, by text
}

func (c *checker) report(file string, line int, format string, args ...any) {
	f := Finding{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[f.String()] {
		return
	}
	c.seen[f.String()] = true
	c.findings = append(c.findings, f)
}

// rel returns path relative to the root, with slashes.
func (c *checker) rel(path string) string {
	r, err := filepath.Rel(c.root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// fileSet is every file and directory of the repository, relative to the
// root, without .git and testdata directories' contents.
type fileSet struct {
	paths map[string]bool // "stock/doc.go", "stock", "stock/scripts"
	list  []string
}

func repoFiles(root string) (*fileSet, error) {
	fs := &fileSet{paths: map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		name := d.Name()
		if d.IsDir() && (name == ".git" || name == "node_modules") {
			return filepath.SkipDir
		}
		r, _ := filepath.Rel(root, path)
		r = filepath.ToSlash(r)
		fs.paths[r] = true
		fs.list = append(fs.list, r)
		return nil
	})
	return fs, err
}

// exists reports whether p (relative to the root, slashes, maybe a glob)
// names a file or directory.
func (fs *fileSet) exists(p string) bool {
	p = strings.TrimSuffix(p, "/")
	if p == "" || p == "." {
		return true
	}
	if !strings.ContainsAny(p, "*?[") {
		return fs.paths[p]
	}
	for _, f := range fs.list {
		if ok, _ := filepath.Match(p, f); ok {
			return true
		}
	}
	return false
}

// existsAsSuffix reports whether some path of the repository ends with
// "/"+p (or is p).
func (fs *fileSet) existsAsSuffix(p string) bool {
	p = strings.TrimSuffix(p, "/")
	if fs.exists(p) {
		return true
	}
	glob := strings.ContainsAny(p, "*?[")
	n := strings.Count(p, "/") + 1
	for _, f := range fs.list {
		parts := strings.Split(f, "/")
		if len(parts) < n {
			continue
		}
		tail := strings.Join(parts[len(parts)-n:], "/")
		if tail == p {
			return true
		}
		if glob {
			if ok, _ := filepath.Match(p, tail); ok {
				return true
			}
		}
	}
	return false
}
