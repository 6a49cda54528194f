package release

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// Versions is versions.yaml: the module sets released together and the
// modules that are never released.
//
// The file keeps to a small subset of YAML (two levels of maps, lists of
// module paths, scalar values, comments), so it is read here without a YAML
// dependency; Parse rejects anything outside that subset instead of guessing.
type Versions struct {
	Sets     []*Set
	Excluded []string
}

// Set is one module set: every module in it carries the same version and is
// tagged in the same release commit.
type Set struct {
	Name string
	// Version is the version of the set's current release commit: the one
	// release-prepare writes into the go.mod files and the tags carry.
	Version string
	// Previous is the version before Version, the base api-check compares
	// against; empty when the set has never been released.
	Previous string
	Modules  []string
}

// ReadVersions reads and checks the versions file at path.
func ReadVersions(path string) (*Versions, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := ParseVersions(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseVersions parses the text of a versions file.
func ParseVersions(text string) (*Versions, error) {
	v := &Versions{}
	var section string // "module-sets" or "excluded-modules"
	var set *Set
	var inModules bool
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := stripComment(sc.Text())
		if strings.TrimSpace(line) == "" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if strings.Contains(line[:indent+1], "\t") {
			return nil, fmt.Errorf("line %d: indent with spaces, not tabs", n)
		}
		body := strings.TrimSpace(line)
		bad := func(why string) error { return fmt.Errorf("line %d: %s: %q", n, why, body) }
		switch indent {
		case 0:
			switch body {
			case "module-sets:", "excluded-modules:":
				section = strings.TrimSuffix(body, ":")
				set, inModules = nil, false
			default:
				return nil, bad("unknown top-level key (want module-sets: or excluded-modules:)")
			}
		case 2:
			switch section {
			case "module-sets":
				name, ok := strings.CutSuffix(body, ":")
				if !ok || !validName(name) {
					return nil, bad("want a set name followed by a colon")
				}
				if v.Set(name) != nil {
					return nil, bad("set named twice")
				}
				set, inModules = &Set{Name: name}, false
				v.Sets = append(v.Sets, set)
			case "excluded-modules":
				p, ok := listItem(body)
				if !ok {
					return nil, bad("want '- <module path>'")
				}
				v.Excluded = append(v.Excluded, p)
			default:
				return nil, bad("indented line outside a section")
			}
		case 4:
			if set == nil {
				return nil, bad("set field outside a set")
			}
			key, val, _ := strings.Cut(body, ":")
			val = strings.TrimSpace(val)
			inModules = false
			switch key {
			case "version":
				set.Version = val
			case "previous":
				if val != "none" {
					set.Previous = val
				}
			case "modules":
				if val != "" {
					return nil, bad("list the modules one per line below modules:")
				}
				inModules = true
			default:
				return nil, bad("unknown set field (want version, previous or modules)")
			}
		case 6:
			p, ok := listItem(body)
			if !ok || !inModules {
				return nil, bad("want '- <module path>' under modules:")
			}
			set.Modules = append(set.Modules, p)
		default:
			return nil, bad("unexpected indentation")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return v, v.check()
}

func (v *Versions) check() error {
	seen := map[string]string{}
	add := func(p, where string) error {
		if err := module.CheckPath(p); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if prev, ok := seen[p]; ok {
			return fmt.Errorf("%s is listed twice (%s and %s)", p, prev, where)
		}
		seen[p] = where
		return nil
	}
	if len(v.Sets) == 0 {
		return fmt.Errorf("no module sets")
	}
	for _, s := range v.Sets {
		if !isRelease(s.Version) {
			return fmt.Errorf("set %s: version %q is not a release version like v1.2.3", s.Name, s.Version)
		}
		if s.Previous != "" && (!isRelease(s.Previous) || semver.Compare(s.Previous, s.Version) >= 0) {
			return fmt.Errorf("set %s: previous %q must be a release version below %s", s.Name, s.Previous, s.Version)
		}
		if len(s.Modules) == 0 {
			return fmt.Errorf("set %s has no modules", s.Name)
		}
		for _, p := range s.Modules {
			if err := add(p, "set "+s.Name); err != nil {
				return err
			}
		}
	}
	for _, p := range v.Excluded {
		if err := add(p, "excluded-modules"); err != nil {
			return err
		}
	}
	return nil
}

// Set returns the set called name, or nil.
func (v *Versions) Set(name string) *Set {
	for _, s := range v.Sets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// SetOf returns the set that releases module path, or nil when it is
// excluded or not listed.
func (v *Versions) SetOf(path string) *Set {
	for _, s := range v.Sets {
		for _, p := range s.Modules {
			if p == path {
				return s
			}
		}
	}
	return nil
}

// Released returns every released module path with its version, sorted.
func (v *Versions) Released() map[string]string {
	out := map[string]string{}
	for _, s := range v.Sets {
		for _, p := range s.Modules {
			out[p] = s.Version
		}
	}
	return out
}

// IsExcluded reports whether path is listed as never released.
func (v *Versions) IsExcluded(path string) bool {
	for _, p := range v.Excluded {
		if p == path {
			return true
		}
	}
	return false
}

// SortedReleased returns the released module paths in order.
func (v *Versions) SortedReleased() []string {
	var out []string
	for p := range v.Released() {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// isRelease reports whether s is a canonical release version (no
// prerelease or build suffix: gorelease and the tags accept those, but this
// project does not publish them).
func isRelease(s string) bool {
	return semver.IsValid(s) && semver.Canonical(s) == s && semver.Prerelease(s) == ""
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func listItem(body string) (string, bool) {
	p, ok := strings.CutPrefix(body, "- ")
	p = strings.TrimSpace(p)
	return p, ok && p != ""
}

func stripComment(line string) string {
	if i := strings.Index(line, "#"); i == 0 || (i > 0 && (line[i-1] == ' ' || line[i-1] == '\t')) {
		line = line[:i]
	}
	return strings.TrimRight(line, " \t")
}

// UpdateSetVersion rewrites the version and previous fields of set name in
// the versions file text, leaving every other line (and its comments) as
// it was.
func UpdateSetVersion(text, name, version, previous string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	in, done := false, false
	prevAt, verAt := -1, -1
	setStart := -1
	for i, l := range lines {
		body := stripComment(strings.TrimRight(l, "\n"))
		indent := len(body) - len(strings.TrimLeft(body, " "))
		trimmed := strings.TrimSpace(body)
		if trimmed == "" {
			continue
		}
		if indent <= 2 {
			if in {
				done = true
			}
			in = !done && indent == 2 && trimmed == name+":"
			if in {
				setStart = i
			}
			continue
		}
		if in && indent == 4 {
			switch {
			case strings.HasPrefix(trimmed, "version:"):
				verAt = i
			case strings.HasPrefix(trimmed, "previous:"):
				prevAt = i
			}
		}
	}
	if setStart < 0 || verAt < 0 {
		return "", fmt.Errorf("versions file has no set %s with a version", name)
	}
	if previous == "" {
		previous = "none"
	}
	lines[verAt] = "    version: " + version + "\n"
	p := "    previous: " + previous + "\n"
	if prevAt >= 0 {
		lines[prevAt] = p
	} else {
		lines = append(lines[:verAt+1], append([]string{p}, lines[verAt+1:]...)...)
	}
	return strings.Join(lines, ""), nil
}
