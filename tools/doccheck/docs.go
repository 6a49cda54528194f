package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// doc is one document: a Markdown file or a package comment.
type doc struct {
	path string // relative to the root
	dir  string // absolute directory, for relative names
	// godoc is the package a package comment documents; nil for Markdown.
	godoc *pkg
	// ctx are the packages a bare identifier is looked up in first.
	ctx []*pkg

	prose    []line    // text outside code blocks (Markdown: with code spans)
	spans    []line    // Markdown: the content of each code span
	links    []line    // Markdown: the target of each link
	commands []line    // lines of code blocks that are not Go
	snippets []snippet // Go code blocks
}

type line struct {
	n    int
	text string
}

// snippet is a Go code block of a document.
type snippet struct {
	file string // relative to the root
	line int    // of the block's first line
	text string
}

func (c *checker) collectDocs() ([]*doc, error) {
	var docs []*doc
	for _, f := range c.files.list {
		if !strings.HasSuffix(f, ".md") || strings.HasSuffix(f, "CHANGELOG.md") || inTestdata(f) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(c.root, f))
		if err != nil {
			return nil, err
		}
		d := &doc{path: f, dir: filepath.Dir(filepath.Join(c.root, f))}
		d.ctx = c.packagesUnder(d.dir)
		parseMarkdown(d, string(src))
		docs = append(docs, d)
	}
	for _, p := range c.ws.pkgs {
		ds, err := c.packageDocs(p)
		if err != nil {
			return nil, err
		}
		docs = append(docs, ds...)
	}
	return docs, nil
}

func inTestdata(f string) bool {
	return strings.HasPrefix(f, "testdata/") || strings.Contains(f, "/testdata/")
}

// packagesUnder returns the workspace packages in dir and below it; the
// whole workspace for the root.
func (c *checker) packagesUnder(dir string) []*pkg {
	var out []*pkg
	for _, p := range c.ws.pkgs {
		if dir == c.root || p.Dir == dir || strings.HasPrefix(p.Dir, dir+string(filepath.Separator)) {
			out = append(out, p)
		}
	}
	return out
}

var fence = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([^`\\s]*)")

// parseMarkdown splits src into prose, code spans, links, commands and
// Go snippets.
func parseMarkdown(d *doc, src string) {
	lines := strings.Split(src, "\n")
	var para []line
	flush := func() {
		markdownSpans(d, para)
		para = nil
	}
	indented := false // in an indented code block: its lines are commands too
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.TrimSpace(lines[i]) == "" {
				flush()
				continue
			}
			l := line{i + 1, lines[i]}
			// A line indented by four spaces or a tab after a blank line
			// starts an indented code block (a command shown without a
			// fence); it is kept as prose as well, so that a list item's
			// indented paragraph is still read as one.
			code := strings.HasPrefix(l.text, "    ") || strings.HasPrefix(l.text, "\t")
			indented = code && (len(para) == 0 || indented)
			if indented {
				d.commands = append(d.commands, l)
			}
			d.prose = append(d.prose, l)
			para = append(para, l)
			continue
		}
		indented = false
		flush()
		marker, lang := m[1], m[2]
		start := i + 1
		var body []string
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), marker[:3]) && strings.Trim(strings.TrimSpace(lines[i]), marker[:1]) == "" {
				break
			}
			body = append(body, lines[i])
		}
		if lang == "go" {
			d.snippets = append(d.snippets, snippet{file: d.path, line: start + 1, text: strings.Join(body, "\n")})
			continue
		}
		for j, b := range body {
			d.commands = append(d.commands, line{start + 1 + j, b})
		}
	}
	flush()
}

var link = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownSpans finds the code spans and links of a paragraph.
func markdownSpans(d *doc, para []line) {
	if len(para) == 0 {
		return
	}
	var text strings.Builder
	var starts []int // offset of each line in text
	for _, l := range para {
		starts = append(starts, text.Len())
		text.WriteString(l.text)
		text.WriteByte('\n')
	}
	s := text.String()
	lineAt := func(off int) int {
		n := para[0].n
		for i, st := range starts {
			if st <= off {
				n = para[i].n
			}
		}
		return n
	}
	var outside strings.Builder // the paragraph without its code spans
	for i := 0; i < len(s); {
		if s[i] == '\\' && i+1 < len(s) {
			outside.WriteString(s[i : i+2])
			i += 2
			continue
		}
		if s[i] != '`' {
			outside.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		ticks := s[i:j]
		end := strings.Index(s[j:], ticks)
		for end >= 0 && j+end+len(ticks) < len(s) && s[j+end+len(ticks)] == '`' {
			next := strings.Index(s[j+end+len(ticks)+1:], ticks)
			if next < 0 {
				end = -1
				break
			}
			end += len(ticks) + 1 + next
		}
		if end < 0 {
			outside.WriteString(ticks)
			i = j
			continue
		}
		content := s[j : j+end]
		content = strings.ReplaceAll(content, "\n", " ")
		content = strings.ReplaceAll(content, `\|`, "|")
		if len(ticks) > 1 {
			content = strings.TrimSpace(content)
		}
		d.spans = append(d.spans, line{lineAt(i), content})
		outside.WriteString(strings.Repeat(" ", j+end+len(ticks)-i))
		i = j + end + len(ticks)
	}
	out := outside.String()
	for _, m := range link.FindAllStringSubmatchIndex(out, -1) {
		d.links = append(d.links, line{lineAt(m[2]), out[m[2]:m[3]]})
	}
}

// packageDocs returns p's package comment, as a document per file that
// has one.
func (c *checker) packageDocs(p *pkg) ([]*doc, error) {
	var docs []*doc
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		path := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			continue
		}
		if f.Doc == nil {
			continue
		}
		d := &doc{path: c.rel(path), dir: p.Dir, godoc: p}
		for _, q := range c.ws.pkgs {
			if q.Module == p.Module {
				d.ctx = append(d.ctx, q)
			}
		}
		parseComment(d, fset, f.Doc)
		docs = append(docs, d)
	}
	return docs, nil
}

// parseComment splits a doc comment into prose, and code blocks (lines
// indented by a tab, as gofmt writes them): Go snippets and commands.
func parseComment(d *doc, fset *token.FileSet, cg *ast.CommentGroup) {
	var lines []line
	for _, c := range cg.List {
		n := fset.Position(c.Slash).Line
		if strings.HasPrefix(c.Text, "//") {
			t := strings.TrimPrefix(c.Text, "//")
			t = strings.TrimPrefix(t, " ")
			lines = append(lines, line{n, t})
			continue
		}
		for i, t := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/"), "\n") {
			lines = append(lines, line{n + i, t})
		}
	}
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i].text, "\t") {
			d.prose = append(d.prose, lines[i])
			continue
		}
		var block []line
		for ; i < len(lines); i++ {
			t := lines[i].text
			if strings.HasPrefix(t, "\t") {
				block = append(block, line{lines[i].n, t[1:]})
				continue
			}
			if strings.TrimSpace(t) == "" && i+1 < len(lines) && strings.HasPrefix(lines[i+1].text, "\t") {
				block = append(block, line{lines[i].n, ""})
				continue
			}
			break
		}
		i--
		var text []string
		for _, b := range block {
			text = append(text, b.text)
		}
		src := strings.Join(text, "\n")
		if isGo(src) {
			d.snippets = append(d.snippets, snippet{file: d.path, line: block[0].n, text: src})
			continue
		}
		d.commands = append(d.commands, block...)
	}
}

var goLike = regexp.MustCompile(`:=|(^|\n)\s*(func\s*[A-Za-z_(]|package\s+\w+\s*(\n|$))`)

// isGo reports whether a code block of a package comment is Go: it
// parses as Go statements or declarations, or it looks like Go (it has :=
// or a func).
func isGo(src string) bool {
	if goLike.MatchString(src) {
		return true
	}
	_, _, err := parseSnippet(token.NewFileSet(), "x.go", 1, elide(src))
	return err == nil
}
