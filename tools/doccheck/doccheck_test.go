package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo is a small workspace whose documents agree with its code.
var repo = map[string]string{
	"go.work": "go 1.26.0\n\nuse ./m\n",
	"Makefile": `.PHONY: test docs
test: docs
	go test work
docs:
	@true
`,
	"m/go.mod": "module example.com/m\n\ngo 1.26.0\n",
	"m/m.go": `package m

// Hello says hello.
func Hello() string { return "hello" }

// Hellos is the name of a metric.
const Hellos = "redkit.m.hellos"

// T is a type.
type T struct{ F int }

// M is a method.
func (T) M() {}
`,
	"m/m_test.go": `package m

import "testing"

func TestHello(t *testing.T) {
	t.Run("sub case", func(t *testing.T) {})
}
`,
	"m/n/n.go":      "package n\n",
	"m/n/n_test.go": "package n\n\nimport \"testing\"\n\nfunc TestN(t *testing.T) {}\n",
	"m/doc.go": `// Package m says hello, and Hello returns it, and T.M does nothing
// (TestHello/sub_case shows it; make test runs it).
//
//	s := m.Hello()
//	fmt.Println(s, ctx.Err())
//
// See README.md. Its keys (a code block that is no Go):
//
//	<p>:m:v1:{g}:key:<id>   hash: what m keeps
//	go run ./m/
package m
`,
	"README.md": "# m\n\n" +
		"`m.Hello` and `T.M`: run `make test`, read [the doc](m/doc.go) and [below](#more).\n\n" +
		"```sh\ngo test ./m/\ngo test -run '^TestHello$' ./m/ && go test -run=TestN ./m/...\n```\n\n" +
		"`TestHello/sub_case` checks `m/m.go`.\n\n" +
		"## More\n\n" +
		"```go\nfmt.Println(m.Hello())\n```\n",
	"m/README.md": "# m module\n\n" +
		"```go\nvar t m.T\nt.M()\n```\n\n" +
		"[Up](../README.md#more)\n\n" +
		"`redkit.m.hellos` counts hellos (one of the metrics redkit.m.<name>).\n",
}

func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The documents of repo agree with its code: no finding. (So every
// finding of TestCheck_plantedDisagreements comes from what was planted.)
func TestCheck_agreeingRepository(t *testing.T) {
	findings, err := Check(writeRepo(t, repo))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("unexpected finding: %s", f)
	}
}

// Each kind of disagreement planted in repo is found, at its file and
// line, and nothing else is.
func TestCheck_plantedDisagreements(t *testing.T) {
	// A reader's variable of a type of m, as inv is a *stock.Inventory.
	givens := Givens
	Givens = append(slices.Clone(Givens), struct{ Name, Type string }{"tv", "*m.T"})
	t.Cleanup(func() { Givens = givens })
	files := map[string]string{}
	for k, v := range repo {
		files[k] = v
	}
	files["README.md"] = "# m\n\n" +
		"`m.Goodbye` and `T.N` and `Hello`, `tv.M` but not `tv.N()`.\n" + // line 3: a wrong identifier of a package, a wrong method
		"Run `make tset` and see [the doc](m/nodoc.go) and [below](#less).\n" + // line 4
		"`TestGoodbye` and `TestHello/other_case` check `m/missing.go`, counted by `redkit.m.hello`.\n" + // line 5
		"\n## More\n\n" +
		"```go\nfmt.Println(m.Hello(1))\n```\n" + // snippet at line 10
		"\n```go\nx := \n```\n" + // line 14: does not parse
		"\n```sh\ngo test ./m/ && go run ./m/cmd/nope\n" + // line 18
		"go test -run 'TestHello|TestN' ./m/\n```\n" + // line 19: TestN is in m/n
		"\n    go test -run TestN ./m/\n" // line 22: an indented code block
	files["m/doc.go"] = `// Package m says hello, and Goodbye returns it, and T.M does nothing
// (TestHello/sub_case shows it; make tests runs it).
//
//	s := m.Hello()
//	fmt.Println(s + 1, ctx.Err())
//
// See READYOU.md.
package m
`
	files["m/README.md"] = "# m module\n\n" +
		"```go\nvar t m.T\nt.N()\n```\n\n" +
		"[Up](../README.md#most)\n"
	findings, err := Check(writeRepo(t, files))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: names m.Goodbye, which package example.com/m does not declare",
		"README.md:3: names T.N, which is declared in none of",
		"README.md:3: names tv.N, but tv (*m.T) has no field or method N",
		"README.md:4: cites make tset, which the Makefile has no target for",
		"README.md:4: links to m/nodoc.go, which does not exist",
		"README.md:4: cites m/nodoc.go, which does not exist",
		"README.md:4: links to #less: README.md has no heading #less",
		"README.md:5: names test TestGoodbye, which no _test.go file of the workspace declares",
		"README.md:5: names subtest TestHello/other_case",
		"README.md:5: cites m/missing.go, which does not exist",
		"README.md:5: names telemetry redkit.m.hello, which no string literal of the workspace spells",
		"README.md:10: Go snippet does not compile: too many arguments in call to m.Hello",
		"README.md:14: Go snippet does not parse",
		"README.md:18: runs go on ./m/cmd/nope, which does not exist",
		"README.md:19: runs go test -run TestN on packages that do not declare it (it is in m/n)",
		"README.md:22: runs go test -run TestN on packages that do not declare it (it is in m/n)",
		"m/README.md:5: Go snippet does not compile: t.N undefined",
		"m/README.md:8: links to ../README.md#most: README.md has no heading #most",
		"m/doc.go:1: names Goodbye, which is declared in none of the packages of module m",
		"m/doc.go:2: cites make tests, which the Makefile has no target for",
		"m/doc.go:5: Go snippet does not compile: invalid operation: s + 1 (mismatched types string and untyped int)",
		"m/doc.go:7: cites READYOU.md, which does not exist",
	}
	var got []string
	for _, f := range findings {
		got = append(got, f.String())
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool { return strings.HasPrefix(g, w) })
		if i < 0 {
			t.Errorf("missing finding %q", w)
			continue
		}
		got = slices.Delete(got, i, i+1)
	}
	for _, g := range got {
		t.Errorf("unexpected finding: %s", g)
	}
}
