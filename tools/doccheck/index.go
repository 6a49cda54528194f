package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// pkg is one Go package: of the workspace, or one a workspace package
// imports. Its declarations are parsed on first use.
type pkg struct {
	Path, Name, Dir string
	Module          string // directory of its module (workspace packages)
	GoFiles         []string
	TestFiles       []string
	Imports         []string // with the tests' imports
	Std             bool

	parsed  bool
	decls   map[string]bool            // top-level names
	members map[string]map[string]bool // type name -> fields and methods
	embeds  map[string][]string        // type name -> embedded type names of this package
	any     map[string]bool            // every field and method name
}

type workspace struct {
	root   string
	pkgs   []*pkg          // of the workspace
	ext    map[string]*pkg // imported by the workspace, by import path
	byName map[string][]*pkg
	tests  map[string]bool // Test, Fuzz, Benchmark and Example functions
	// testDirs are the directories of the packages declaring each test.
	testDirs map[string][]string
	strs     string // every string literal of the workspace's Go files, one a line
	// strsUnderscored is strs with spaces as underscores, as go test
	// names subtests.
	strsUnderscored string
	modules         []string // module directories, absolute
	goroot          string   // of the go command, once asked
}

// goList runs go list in dir with args and returns its output.
func goList(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	// The workspace of dir, whatever GOWORK the caller has (make modules
	// sets GOWORK=off).
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

func loadWorkspace(root string) (*workspace, error) {
	ws := &workspace{root: root, ext: map[string]*pkg{}, byName: map[string][]*pkg{}, tests: map[string]bool{}, testDirs: map[string][]string{}}
	const sep = "\x1f"
	format := strings.Join([]string{"{{.ImportPath}}", "{{.Name}}", "{{.Dir}}",
		`{{join .GoFiles ","}}`, `{{join .TestGoFiles ","}},{{join .XTestGoFiles ","}}`,
		`{{join .Imports ","}},{{join .TestImports ","}},{{join .XTestImports ","}}`,
		"{{with .Module}}{{.Dir}}{{end}}"}, sep)
	out, err := goList(root, "-e", "-f", format, "work")
	if err != nil {
		return nil, err
	}
	imported := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, sep)
		if len(f) != 7 {
			continue
		}
		p := &pkg{Path: f[0], Name: f[1], Dir: f[2], GoFiles: split(f[3]), TestFiles: split(f[4]), Imports: split(f[5]), Module: f[6]}
		if !slices.Contains(ws.modules, p.Module) {
			ws.modules = append(ws.modules, p.Module)
		}
		ws.pkgs = append(ws.pkgs, p)
		ws.byName[p.Name] = append(ws.byName[p.Name], p)
		for _, i := range p.Imports {
			imported[i] = true
		}
	}
	// Longest first, so that moduleOf finds examples/kit before examples.
	sort.Slice(ws.modules, func(i, j int) bool { return len(ws.modules[i]) > len(ws.modules[j]) })
	for _, p := range ws.pkgs {
		delete(imported, p.Path)
	}
	var paths []string
	for i := range imported {
		if i != "C" && i != "unsafe" {
			paths = append(paths, i)
		}
	}
	sort.Strings(paths)
	if len(paths) > 0 {
		out, err := goList(root, append([]string{"-e", "-f", strings.Join([]string{"{{.ImportPath}}", "{{.Name}}", "{{.Dir}}", `{{join .GoFiles ","}}`, "{{.Standard}}"}, sep)}, paths...)...)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, sep)
			if len(f) != 5 || f[1] == "" {
				continue
			}
			p := &pkg{Path: f[0], Name: f[1], Dir: f[2], GoFiles: split(f[3]), Std: f[4] == "true"}
			ws.ext[p.Path] = p
			ws.byName[p.Name] = append(ws.byName[p.Name], p)
		}
	}
	if err := ws.indexTests(); err != nil {
		return nil, err
	}
	return ws, nil
}

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// moduleOf returns the directory of the workspace module holding dir.
func (ws *workspace) moduleOf(dir string) string {
	for _, m := range ws.modules {
		if dir == m || strings.HasPrefix(dir, m+string(filepath.Separator)) {
			return m
		}
	}
	return ""
}

// indexTests records the test functions and the string literals of the
// workspace's Go files.
func (ws *workspace) indexTests() error {
	var strs strings.Builder
	fset := token.NewFileSet()
	for _, p := range ws.pkgs {
		files := append(append([]string{}, p.GoFiles...), p.TestFiles...)
		for _, name := range files {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				continue // go vet reports it
			}
			test := strings.HasSuffix(name, "_test.go")
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					if test && n.Recv == nil && testName.MatchString(n.Name.Name) {
						ws.tests[n.Name.Name] = true
						ws.testDirs[n.Name.Name] = append(ws.testDirs[n.Name.Name], p.Dir)
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if s, err := strconv.Unquote(n.Value); err == nil {
							strs.WriteString(s)
							strs.WriteByte('\n')
						}
					}
				}
				return true
			})
		}
	}
	ws.strs = strs.String()
	ws.strsUnderscored = strings.ReplaceAll(ws.strs, " ", "_")
	return nil
}

var testName = regexp.MustCompile(`^(Test|Fuzz|Benchmark|Example)([A-Z_0-9][A-Za-z0-9_]*)?$`)

// parse reads p's declarations.
func (p *pkg) parse() {
	if p.parsed {
		return
	}
	p.parsed = true
	p.decls, p.members, p.embeds, p.any = map[string]bool{}, map[string]map[string]bool{}, map[string][]string{}, map[string]bool{}
	fset := token.NewFileSet()
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
		p.any[name] = true
	}
	fields := func(typ string, fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fd := range fl.List {
			for _, n := range fd.Names {
				member(typ, n.Name)
			}
			if len(fd.Names) == 0 { // embedded
				t := fd.Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if ix, ok := t.(*ast.IndexExpr); ok {
					t = ix.X
				}
				switch t := t.(type) {
				case *ast.Ident:
					member(typ, t.Name)
					p.embeds[typ] = append(p.embeds[typ], t.Name)
				case *ast.SelectorExpr:
					member(typ, t.Sel.Name)
				}
			}
		}
	}
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					p.decls[d.Name.Name] = true
					continue
				}
				member(recvName(d.Recv.List[0].Type), d.Name.Name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.decls[n.Name] = true
						}
					case *ast.TypeSpec:
						p.decls[s.Name.Name] = true
						switch t := s.Type.(type) {
						case *ast.StructType:
							fields(s.Name.Name, t.Fields)
						case *ast.InterfaceType:
							fields(s.Name.Name, t.Methods)
						}
					}
				}
			}
		}
	}
}

func recvName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// has reports whether p declares the chain: a top-level name ("New"), or a
// field or method of a type ("Ledger", "Transfer"), through embedded types
// of p too. A single name that is a field or method of any type counts when
// members is true.
func (p *pkg) has(chain []string, members bool) bool {
	p.parse()
	switch len(chain) {
	case 1:
		return p.decls[chain[0]] || (members && p.any[chain[0]])
	case 2:
		return p.decls[chain[0]] && p.hasMember(chain[0], chain[1], 0)
	}
	return false
}

func (p *pkg) hasMember(typ, name string, depth int) bool {
	if p.members[typ][name] {
		return true
	}
	if depth > 5 {
		return false
	}
	for _, e := range p.embeds[typ] {
		if p.hasMember(e, name, depth+1) {
			return true
		}
	}
	return false
}

// makeTargets returns the targets of a Makefile.
func makeTargets(path string) (map[string]bool, error) {
	targets := map[string]bool{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return targets, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rule := regexp.MustCompile(`^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*::?(?:[^=]|$)`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "#") {
			continue
		}
		m := rule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, t := range strings.Fields(m[1]) {
			if !strings.HasPrefix(t, ".") {
				targets[t] = true
			}
		}
	}
	return targets, sc.Err()
}
