package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// checkRefs checks what d names: tests, make targets, files, links and
// identifiers.
func (c *checker) checkRefs(d *doc) {
	var all []line
	all = append(all, d.prose...)
	all = append(all, d.commands...)
	for _, l := range all {
		c.checkTests(d, l)
		c.checkMake(d, l)
		c.checkTelemetryNames(d, l)
	}
	for _, l := range d.commands {
		c.checkCommandPaths(d, l)
	}
	for _, l := range d.links {
		c.checkLink(d, l)
	}
	if d.godoc != nil {
		for _, l := range d.prose {
			c.checkProsePaths(d, l)
		}
		c.checkGodocIdents(d)
		return
	}
	for _, s := range d.spans {
		c.checkSpan(d, s)
	}
	for _, l := range d.prose {
		c.checkProsePaths(d, l)
	}
}

var testRef = regexp.MustCompile(`\b((?:Test|Fuzz|Benchmark|Example)[A-Z_0-9][A-Za-z0-9_]*)((?:/[A-Za-z0-9_-]+)*)`)

func (c *checker) checkTests(d *doc, l line) {
	for _, m := range testRef.FindAllStringSubmatch(l.text, -1) {
		name, subs := m[1], m[2]
		if !c.ws.tests[name] {
			c.report(d.path, l.n, "names test %s, which no _test.go file of the workspace declares", name)
			continue
		}
		for _, sub := range strings.Split(strings.TrimPrefix(subs, "/"), "/") {
			if sub == "" {
				continue
			}
			// go test names a subtest by its t.Run name, spaces as _.
			if !strings.Contains(c.ws.strs, sub) && !strings.Contains(c.ws.strsUnderscored, sub) {
				c.report(d.path, l.n, "names subtest %s/%s: no string literal of the workspace spells %q", name, sub, sub)
			}
		}
	}
}

// telemetryName is a metric or attribute name of redkit's: redkit. and
// lower-case words joined by dots.
var telemetryName = regexp.MustCompile(`redkit(?:\.[a-z][a-z0-9_]*)+`)

// checkTelemetryNames reports a telemetry name (redkit.stock.units.sold,
// redkit.outcome) that no string literal of the workspace spells whole: the
// code names each instrument and attribute by one literal. A name followed
// by .<x> or .{x} is a pattern, not a name.
func (c *checker) checkTelemetryNames(d *doc, l line) {
	for _, m := range telemetryName.FindAllStringIndex(l.text, -1) {
		if m[0] > 0 && strings.ContainsRune("./-_:", rune(l.text[m[0]-1])) ||
			m[0] > 0 && (unicode.IsLetter(rune(l.text[m[0]-1])) || unicode.IsDigit(rune(l.text[m[0]-1]))) {
			continue
		}
		if rest := l.text[m[1]:]; strings.HasPrefix(rest, ".<") || strings.HasPrefix(rest, ".{") || strings.HasPrefix(rest, ".*") {
			continue
		}
		name := l.text[m[0]:m[1]]
		if !strings.Contains("\n"+c.ws.strs, "\n"+name+"\n") {
			c.report(d.path, l.n, "names telemetry %s, which no string literal of the workspace spells", name)
		}
	}
}

var makeRef = regexp.MustCompile(`\bmake +([a-z][a-z0-9_-]*)\b`)

// notTargets are words that follow "make" in English prose.
var notTargets = map[string]bool{
	"a": true, "an": true, "the": true, "it": true, "its": true, "them": true, "one": true,
	"sure": true, "every": true, "each": true, "this": true, "that": true, "these": true,
	"those": true, "no": true, "any": true, "all": true, "some": true, "their": true,
	"room": true, "use": true, "up": true, "handle": true, "for": true, "with": true,
	"to": true, "in": true, "on": true, "of": true, "and": true, "or": true, "so": true,
	"such": true, "more": true, "fewer": true, "less": true, "sense": true, "progress": true,
	"money": true, "calls": true, "writes": true, "do": true, "you": true, "your": true,
	"target": true, "targets": true,
}

func (c *checker) checkMake(d *doc, l line) {
	for _, m := range makeRef.FindAllStringSubmatchIndex(l.text, -1) {
		t := l.text[m[2]:m[3]]
		if notTargets[t] || c.targets[t] {
			continue
		}
		if m[3] < len(l.text) && l.text[m[3]] == '=' { // make VAR=value
			continue
		}
		c.report(d.path, l.n, "cites make %s, which the Makefile has no target for", t)
	}
}

// checkCommandPaths checks the ./paths of go commands: relative to the
// root, or to the directory of a "cd dir &&" or "-C dir" before them.
func (c *checker) checkCommandPaths(d *doc, l line) {
	fields := strings.Fields(l.text)
	dir := ""
	inGo := false
	// A go test command: its -run pattern and the directories of its
	// packages (absolute; "..." kept as a suffix).
	goTest, run := false, ""
	var pkgs []string
	endGo := func() {
		if goTest && run != "" && len(pkgs) > 0 {
			c.checkTestRun(d, l.n, run, pkgs)
		}
		inGo, goTest, run, pkgs = false, false, "", nil
	}
	for i, f := range fields {
		f = strings.Trim(f, `'"`)
		switch {
		case f == "#":
			endGo()
			return
		case f == "cd" && i+1 < len(fields):
			dir = strings.Trim(fields[i+1], `'"`)
		case f == "-C" && i+1 < len(fields):
			dir = strings.Trim(fields[i+1], `'"`)
		case f == "go":
			endGo()
			inGo = true
		case f == "&&" || f == ";" || f == "|":
			endGo()
		case inGo && f == "test" && i > 0 && fields[i-1] == "go":
			goTest = true
		case goTest && f == "-run" && i+1 < len(fields):
			run = strings.Trim(fields[i+1], `'"`)
		case goTest && strings.HasPrefix(f, "-run="):
			run = strings.Trim(strings.TrimPrefix(f, "-run="), `'"`)
		case inGo && (strings.HasPrefix(f, "./") || strings.HasPrefix(f, "../")) && !strings.ContainsAny(f, "<>{}$*"):
			p := strings.TrimSuffix(strings.TrimSuffix(f, "..."), "/")
			// From the root, or from the document's directory (a module's
			// README or package comment may mean a command run there).
			fromRoot := filepath.ToSlash(filepath.Join(dir, p))
			fromDoc := c.rel(filepath.Join(d.dir, dir, p))
			switch {
			case c.files.exists(fromRoot):
				pkgs = append(pkgs, filepath.Join(c.root, fromRoot)+strings.TrimPrefix(f, strings.TrimSuffix(f, "...")))
			case c.files.exists(fromDoc):
				pkgs = append(pkgs, filepath.Join(c.root, fromDoc)+strings.TrimPrefix(f, strings.TrimSuffix(f, "...")))
			default:
				c.report(d.path, l.n, "runs go on %s, which does not exist", f)
			}
		}
	}
	endGo()
}

// checkTestRun reports a test that a go test -run pattern names and none
// of the command's packages declares: go test would pass, running nothing.
func (c *checker) checkTestRun(d *doc, n int, run string, pkgs []string) {
	for _, m := range testRef.FindAllStringSubmatch(run, -1) {
		name := m[1]
		if !c.ws.tests[name] {
			continue // checkTests reports it
		}
		found := false
		for _, p := range pkgs {
			under := strings.HasSuffix(p, "...")
			p = strings.TrimSuffix(p, "...")
			p = strings.TrimSuffix(p, string(filepath.Separator))
			for _, td := range c.ws.testDirs[name] {
				if td == p || under && strings.HasPrefix(td, p+string(filepath.Separator)) {
					found = true
				}
			}
		}
		if !found {
			c.report(d.path, n, "runs go test -run %s on packages that do not declare it (it is in %s): no test would run", name, c.rel(c.ws.testDirs[name][0]))
		}
	}
}

func (c *checker) checkLink(d *doc, l line) {
	t := l.text
	if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
		return
	}
	path, frag, _ := strings.Cut(t, "#")
	target := filepath.Join(d.dir, path)
	if path == "" {
		target = filepath.Join(c.root, d.path)
	}
	rel := c.rel(target)
	if rel != "." && !c.files.exists(rel) {
		c.report(d.path, l.n, "links to %s, which does not exist", t)
		return
	}
	if frag == "" || !strings.HasSuffix(rel, ".md") {
		return
	}
	if !c.headings(target)[frag] {
		c.report(d.path, l.n, "links to %s: %s has no heading #%s", t, rel, frag)
	}
}

// headings returns the anchors GitHub gives the headings of a Markdown file.
func (c *checker) headings(path string) map[string]bool {
	src, err := os.ReadFile(path)
	out := map[string]bool{}
	if err != nil {
		return out
	}
	inFence := false
	for _, l := range strings.Split(string(src), "\n") {
		if fence.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

var (
	fileExt   = regexp.MustCompile(`\.(md|go|lua|acl|ya?ml|json|sql|mod|sum|work|txt|html|sh)$`)
	pathToken = regexp.MustCompile(`(?:^|[\s(\[,;])((?:\.\.?/)?[A-Za-z0-9_*.-]+(?:/[A-Za-z0-9_*.-]*)*)`)
)

// checkProsePaths checks the file names of prose: a name with a known
// extension, or a path whose first element is in the document's directory
// or at the root.
func (c *checker) checkProsePaths(d *doc, l line) {
	text := quoted.ReplaceAllStringFunc(l.text, func(s string) string { return strings.Repeat(" ", len(s)) })
	for _, m := range pathToken.FindAllStringSubmatchIndex(text, -1) {
		p := text[m[2]:m[3]]
		end := m[3]
		if end < len(text) && strings.ContainsRune(":@=<{$", rune(text[end])) {
			continue // a key, a URL, an address
		}
		c.checkPath(d, l.n, strings.TrimRight(p, ".,"))
	}
}

var (
	quoted     = regexp.MustCompile(`"[^"]*"`)
	versionTag = regexp.MustCompile(`/v\d+\.\d+\.\d+`)
	// pkgIdent is a package directory and an identifier of it:
	// internal/valid.Name.
	pkgIdent = regexp.MustCompile(`^([a-z0-9_./-]+)\.([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)$`)
)

// checkPath checks p when it looks like a path.
func (c *checker) checkPath(d *doc, n int, p string) {
	if p == "" || strings.Contains(p, "://") {
		return
	}
	ext := fileExt.MatchString(p)
	slash := strings.Contains(strings.TrimSuffix(p, "/"), "/")
	if !ext && !slash {
		return
	}
	clean := strings.TrimPrefix(p, "./")
	if versionTag.MatchString(clean) {
		return // a tag, lock/v0.2.0
	}
	if !ext {
		// A path counts as one when its first element exists where it is
		// resolved (group/name, N/s and shop-7/alice do not).
		first, _, _ := strings.Cut(clean, "/")
		if first == ".." || first == "" {
			first = clean
		}
		if !c.files.exists(c.rel(filepath.Join(d.dir, first))) && !c.files.exists(first) &&
			!c.files.exists(c.rel(filepath.Join(c.ws.moduleOf(d.dir), first))) {
			return
		}
	}
	if c.resolvesPath(d, clean) {
		return
	}
	c.report(d.path, n, "cites %s, which does not exist", p)
}

func (c *checker) resolvesPath(d *doc, p string) bool {
	for _, base := range []string{d.dir, c.ws.moduleOf(d.dir), c.root} {
		if base == "" {
			continue
		}
		if c.files.exists(c.rel(filepath.Join(base, p))) {
			return true
		}
	}
	return !strings.HasPrefix(p, "../") && c.files.existsAsSuffix(p)
}

var (
	spanIdent = regexp.MustCompile(`^\*?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\(.*\)|\{.*\})?(\s\(.*\))?$`)
	allCaps   = regexp.MustCompile(`^[A-Z0-9_]+s?$`)
)

func (c *checker) checkSpan(d *doc, s line) {
	t := s.text
	if fileExt.MatchString(t) && !strings.ContainsAny(t, " ") {
		c.checkPath(d, s.n, t)
		return
	}
	if m := pkgIdent.FindStringSubmatch(t); m != nil && strings.Contains(m[1], "/") {
		dir := filepath.Join(c.root, m[1])
		for _, p := range c.ws.pkgs {
			if p.Dir == dir {
				if !p.has(strings.Split(m[2], "."), true) {
					c.report(d.path, s.n, "names %s, which package %s does not declare", t, p.Path)
				}
				return
			}
		}
		c.report(d.path, s.n, "names %s, but %s is no package of the workspace", t, m[1])
		return
	}
	if m := spanIdent.FindStringSubmatch(t); m != nil {
		chain := strings.Split(m[1], ".")
		c.checkIdent(d, s.n, chain, "")
		return
	}
	if !strings.ContainsAny(t, " \t") {
		c.checkPath(d, s.n, t)
		return
	}
	c.checkCommandPaths(d, s)
}

// checkIdent checks an identifier chain named by d on line n; owner is
// the package a prose "owner's X" names, if any.
func (c *checker) checkIdent(d *doc, n int, chain []string, owner string) {
	first := chain[0]
	if unicode.IsLower(rune(first[0])) || first[0] == '_' {
		if len(chain) < 2 || !unicode.IsUpper(rune(chain[1][0])) {
			return
		}
		if typ := givenType(first); typ != "" {
			// inv.Deduct names the method Deduct of a given's type,
			// *stock.Inventory.
			pkgName, typName, _ := strings.Cut(strings.TrimPrefix(typ, "*"), ".")
			pkgs := c.ws.byName[pkgName]
			if typName == "" || len(chain) != 2 || len(pkgs) == 0 {
				return
			}
			for _, p := range pkgs {
				if p.has([]string{typName, chain[1]}, false) {
					return
				}
			}
			c.report(d.path, n, "names %s, but %s (%s) has no field or method %s", strings.Join(chain, "."), first, typ, chain[1])
			return
		}
		pkgs := c.ws.byName[first]
		if len(pkgs) == 0 {
			return
		}
		for _, p := range pkgs {
			// stock.Deduct names the method Deduct of stock's Inventory.
			if p.has(chain[1:], len(chain) == 2) || p.has(singular(chain[1:]), len(chain) == 2) {
				return
			}
		}
		c.report(d.path, n, "names %s, which package %s does not declare", strings.Join(chain, "."), pkgs[0].Path)
		return
	}
	if (allCaps.MatchString(first) && len(chain) == 1) || testName.MatchString(first) {
		return
	}
	if len(chain) == 1 && properNouns[first] {
		return
	}
	for _, ch := range [][]string{chain, singular(chain)} {
		if owner != "" {
			for _, p := range c.ws.byName[owner] {
				if p.has(ch, true) {
					return
				}
			}
		}
		if c.resolveBare(d, ch) {
			return
		}
	}
	hint := ""
	if len(chain) == 1 && strings.IndexFunc(first[1:], unicode.IsUpper) < 0 {
		hint = " (a word of prose, not an identifier? properNouns in tools/doccheck/refs.go lists those)"
	}
	c.report(d.path, n, "names %s, which is declared in none of %s%s", strings.Join(chain, "."), c.scope(d), hint)
}

// givenType returns the type of the given (Givens) named name, or "".
func givenType(name string) string {
	for _, g := range Givens {
		if g.Name == name {
			return g.Type
		}
	}
	return ""
}

// singular returns chain with a plural s dropped from its last name
// ("Snowflakes" for Snowflake values).
func singular(chain []string) []string {
	last := chain[len(chain)-1]
	if len(last) < 3 || !strings.HasSuffix(last, "s") {
		return chain
	}
	return append(append([]string{}, chain[:len(chain)-1]...), strings.TrimSuffix(last, "s"))
}

func (c *checker) scope(d *doc) string {
	switch {
	case d.godoc != nil:
		return "the packages of module " + c.rel(d.godoc.Module) + " and the packages they import"
	case filepath.Dir(filepath.Join(c.root, d.path)) == c.root:
		return "the workspace's packages and the packages they import"
	}
	return "the packages under " + c.rel(d.dir) + " and the packages they import"
}

// resolveBare looks a chain up in d's packages, then in the packages they
// import.
func (c *checker) resolveBare(d *doc, chain []string) bool {
	for _, p := range d.ctx {
		if p.has(chain, true) {
			return true
		}
	}
	seen := map[string]bool{}
	var std []*pkg
	for _, p := range d.ctx {
		for _, i := range p.Imports {
			if seen[i] {
				continue
			}
			seen[i] = true
			q := c.ws.pkg(i)
			if q == nil {
				continue
			}
			if q.Std {
				std = append(std, q)
				continue
			}
			if q.has(chain, true) {
				return true
			}
		}
	}
	for _, q := range std {
		if q.has(chain, true) {
			return true
		}
	}
	return false
}

func (ws *workspace) pkg(path string) *pkg {
	if p := ws.ext[path]; p != nil {
		return p
	}
	for _, p := range ws.pkgs {
		if p.Path == path {
			return p
		}
	}
	return nil
}

// properNouns are capitalised words of prose that are no identifier.
var properNouns = map[string]bool{
	"Debian": true, "Go": true, "JavaScript": true, "Leaf": true, "Linux": true, "Lua": true,
	"Makefile": true, "Markdown": true, "Meituan": true, "OpenTelemetry": true,
	"PostgreSQL": true, "Prometheus": true, "Redis": true, "Stripe": true, "TigerBeetle": true,
	// OpenTelemetry SDK's metric View, which the docs name as a concept.
	"View": true,
}

var (
	proseToken = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*`)
	listMarker = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s+`)
	possessive = regexp.MustCompile(`([a-z][a-z0-9]*)'s\s+$`)
	// seeRef is a reference to a heading of the same comment: (see Slot
	// groups and keys).
	seeRef = regexp.MustCompile(`\b(?i:see)\s+$`)
)

// checkGodocIdents checks the identifiers of a package comment's prose.
// Doc comments have no markup, so a word is taken for an identifier when
// it has an inner capital (WithBuckets, ErrSoldOut), a dot (Result.Replayed,
// stock.Deduct) or, capitalised, stands inside a sentence (Entries).
func (c *checker) checkGodocIdents(d *doc) {
	startOfSentence := true
	for _, l := range d.prose {
		text := l.text
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "# ") {
			startOfSentence = true
			continue
		}
		if m := listMarker.FindString(text); m != "" {
			startOfSentence = true
			text = strings.Repeat(" ", len(m)) + text[len(m):]
		}
		text = quoted.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat(" ", len(s)) })
		last := 0
		for _, m := range proseToken.FindAllStringIndex(text, -1) {
			before := strings.TrimSpace(text[last:m[0]])
			if before != "" {
				r := before[len(before)-1]
				startOfSentence = strings.ContainsRune(".!?:(", rune(r))
			}
			last = m[1]
			tok := text[m[0]:m[1]]
			sentence := startOfSentence
			startOfSentence = false
			if m[0] > 0 && strings.ContainsRune("-$/:<@#&=%*'`\\", rune(text[m[0]-1])) {
				continue
			}
			if m[1] < len(text) && strings.ContainsRune("/:=-<>`@", rune(text[m[1]])) {
				continue
			}
			if fileExt.MatchString(tok) {
				continue
			}
			chain := strings.Split(tok, ".")
			first := chain[0]
			if !unicode.IsUpper(rune(first[0])) {
				if len(chain) > 1 {
					c.checkIdent(d, l.n, chain, "")
				}
				continue
			}
			if allCaps.MatchString(first) && len(chain) == 1 {
				continue
			}
			camel := strings.IndexFunc(first[1:], unicode.IsUpper) >= 0 || strings.ContainsAny(first, "_0123456789")
			if len(chain) == 1 && !camel && (sentence || seeRef.MatchString(text[:m[0]])) {
				continue
			}
			owner := ""
			if pm := possessive.FindStringSubmatch(text[:m[0]]); pm != nil {
				owner = pm[1]
			}
			c.checkIdent(d, l.n, chain, owner)
		}
		if t := strings.TrimSpace(text); t != "" {
			startOfSentence = strings.ContainsRune(".!?:", rune(t[len(t)-1]))
		}
	}
}
