package doccheck

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var (
	elidedBlock = regexp.MustCompile(`\{\s*\.\.\.\s*\}`)
	elidedLine  = regexp.MustCompile(`(?m)^(\s*)\.\.\.\s*$`)
)

// outer is the name of the file a snippet is wrapped in. It has no
// directory, so that the //line comments naming the document's path
// (relative to the root) are not taken relative to one.
const outer = "snippet.go"

// elide removes the marks of code left out, "{ ... }" and a line of
// "...", keeping the lines where they are.
func elide(src string) string {
	src = elidedBlock.ReplaceAllString(src, "{}")
	return elidedLine.ReplaceAllString(src, "$1")
}

// parseSnippet parses src as a file (it starts with package), as
// declarations, or as the statements of a function body. The positions of
// the result are those of src's lines in file from line on. stmts tells
// which it was.
func parseSnippet(fset *token.FileSet, file string, line int, src string) (f *ast.File, stmts bool, err error) {
	directive := fmt.Sprintf("//line %s:%d\n", file, line)
	if strings.HasPrefix(strings.TrimSpace(src), "package ") {
		f, err = parser.ParseFile(fset, outer, directive+src, parser.SkipObjectResolution)
		return f, false, err
	}
	f, err = parser.ParseFile(fset, outer, "package snippet\n"+directive+src, parser.SkipObjectResolution)
	if err == nil {
		return f, false, nil
	}
	f, err2 := parser.ParseFile(fset, outer, "package snippet\nfunc _() error {\n{\n"+directive+src+"\n}\nreturn nil\n}\n", parser.SkipObjectResolution)
	if err2 == nil {
		return f, true, nil
	}
	// Report the error of the reading that got further.
	if lineOf(err2) > lineOf(err) {
		return nil, true, err2
	}
	return nil, false, err
}

func lineOf(err error) int {
	var list scanner.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return list[0].Pos.Line
	}
	return 0
}

// compiled is a snippet ready to type-check.
type compiled struct {
	snippet
	src     string
	imports map[string]string // package name -> import path
}

// compileSnippets type-checks every snippet against the export data of the
// workspace's packages.
func (c *checker) compileSnippets(snippets []snippet) error {
	fset := token.NewFileSet()
	var ready []compiled
	paths := map[string]bool{}
	for _, s := range snippets {
		cs, ok := c.prepare(fset, s)
		if !ok {
			continue
		}
		ready = append(ready, cs)
		for _, p := range cs.imports {
			paths[p] = true
		}
	}
	if len(ready) == 0 {
		return nil
	}
	exports, err := c.exportData(paths)
	if err != nil {
		return err
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, cs := range ready {
		f, err := parser.ParseFile(fset, outer, cs.src, parser.SkipObjectResolution)
		if err != nil {
			c.report(cs.file, cs.line, "Go snippet does not parse: %v", err)
			continue
		}
		var errs []types.Error
		conf := types.Config{Importer: imp, Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) && !strings.Contains(te.Msg, "declared and not used") {
				errs = append(errs, te)
			}
		}}
		_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
		for i, e := range errs {
			if i == 3 {
				c.report(cs.file, cs.line, "Go snippet: %d more errors", len(errs)-3)
				break
			}
			p := fset.Position(e.Pos)
			file, n := p.Filename, p.Line
			if file != cs.file || n < cs.line { // in what the check added around the snippet
				file, n = cs.file, cs.line
			}
			c.report(file, n, "Go snippet does not compile: %s", e.Msg)
		}
	}
	return nil
}

// prepare parses a snippet and wraps it in a file with its imports and
// givens. ok is false when it did not parse (reported).
func (c *checker) prepare(fset *token.FileSet, s snippet) (cs compiled, ok bool) {
	src := elide(s.text)
	f, stmts, err := parseSnippet(fset, s.file, s.line, src)
	if err != nil {
		var list scanner.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			// An error found at what closes the wrapping is the snippet's
			// last line's.
			n := min(list[0].Pos.Line, s.line+strings.Count(s.text, "\n"))
			c.report(s.file, n, "Go snippet does not parse: %s", list[0].Msg)
		} else {
			c.report(s.file, s.line, "Go snippet does not parse: %v", err)
		}
		return cs, false
	}
	declared, used, selectors := names(f)
	cs = compiled{snippet: s, imports: map[string]string{}}
	var params []string
	if stmts {
		for _, g := range Givens {
			if !used[g.Name] {
				continue
			}
			params = append(params, g.Name+" "+g.Type)
			t, err := parser.ParseExpr(g.Type)
			if err != nil {
				continue
			}
			ast.Inspect(t, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok {
						selectors[id.Name] = true
					}
				}
				return true
			})
		}
	}
	for name := range selectors {
		if declared[name] {
			continue
		}
		if p := c.ws.importPath(name, s.file); p != "" {
			cs.imports[name] = p
		} else if c.ws.isStd(name) {
			cs.imports[name] = name
		}
	}
	var b strings.Builder
	if hasPackage := strings.HasPrefix(strings.TrimSpace(src), "package "); hasPackage {
		// A whole file: its own imports.
		cs.src = fmt.Sprintf("//line %s:%d\n%s", s.file, s.line, src)
		cs.imports = map[string]string{}
		for _, im := range f.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			cs.imports[p] = p
		}
		return cs, true
	}
	b.WriteString("package snippet\n")
	var names []string
	for n := range cs.imports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "import %s %q\n", n, cs.imports[n])
	}
	if stmts {
		fmt.Fprintf(&b, "func _(%s) error {\n{\n//line %s:%d\n%s\n}\nreturn nil\n}\n", strings.Join(params, ", "), s.file, s.line, src)
	} else {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n", s.file, s.line, src)
	}
	cs.src = b.String()
	return cs, true
}

// names returns the names f declares, every identifier it uses, and the
// identifiers it selects from (x in x.Y), the candidates for packages.
func names(f *ast.File) (declared, used, selectors map[string]bool) {
	declared, used, selectors = map[string]bool{}, map[string]bool{}, map[string]bool{}
	fields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fd := range fl.List {
			for _, n := range fd.Names {
				declared[n.Name] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			used[n.Name] = true
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				selectors[id.Name] = true
			}
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.TypeSpec:
			declared[n.Name.Name] = true
		case *ast.FuncDecl:
			fields(n.Recv)
		case *ast.FuncType:
			fields(n.Params)
			fields(n.Results)
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ImportSpec:
			if n.Name != nil {
				declared[n.Name.Name] = true
			}
		}
		return true
	})
	return declared, used, selectors
}

// importPath returns the import path of the package a snippet of file
// names name: a workspace package of that name (the one in file's module
// first), else one the workspace imports (a standard package first).
func (ws *workspace) importPath(name, file string) string {
	cands := ws.byName[name]
	if len(cands) == 0 {
		return ""
	}
	var best *pkg
	score := func(p *pkg) int {
		switch {
		case p.Module != "" && strings.HasPrefix(ws.root+"/"+file, p.Module+"/"):
			return 4
		case p.Module != "" && p.Name != "main":
			return 3
		case p.Std:
			return 2
		case p.Name != "main":
			return 1
		}
		return 0
	}
	for _, p := range cands {
		if best == nil || score(p) > score(best) || (score(p) == score(best) && p.Path < best.Path) {
			best = p
		}
	}
	if best.Name == "main" {
		return ""
	}
	return best.Path
}

// isStd reports whether path is a package of the standard library
// (fmt, context: those whose name is their path).
func (ws *workspace) isStd(path string) bool {
	if ws.goroot == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return false
		}
		ws.goroot = strings.TrimSpace(string(out))
	}
	fi, err := os.Stat(filepath.Join(ws.goroot, "src", path))
	return err == nil && fi.IsDir() && !strings.Contains(path, ".")
}

// exportData returns the export data files of paths and their
// dependencies, building them if needed.
func (c *checker) exportData(paths map[string]bool) (map[string]string, error) {
	var list []string
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)
	out, err := goList(c.root, append([]string{"-e", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, list...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, f, ok := strings.Cut(l, "\t"); ok {
			exports[p] = f
		}
	}
	return exports, nil
}
