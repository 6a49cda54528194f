package release

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Module is one go.mod in the repository.
type Module struct {
	Path string // module path
	Dir  string // directory relative to the repository root, slash-separated
}

// Tag returns the tag a release of m at version carries: <dir>/<version>.
func (m Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// FindModules lists every go.mod under root (testdata and hidden
// directories are skipped, as the go command does), sorted by path.
func FindModules(root string) ([]Module, error) {
	var out []Module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mp := modfile.ModulePath(b)
		if mp == "" {
			return fmt.Errorf("%s: no module line", p)
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		out = append(out, Module{Path: mp, Dir: filepath.ToSlash(rel)})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// Repo is the repository at Root with its versions file read.
type Repo struct {
	Root     string
	Versions *Versions
	Modules  []Module // every go.mod, released or not
}

// OpenRepo reads root/versions.yaml and the go.mod files, and checks that
// every module is either in a set or excluded, so a new module cannot be
// left out of a release (or published by accident) silently.
func OpenRepo(root string) (*Repo, error) {
	v, err := ReadVersions(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return nil, err
	}
	mods, err := FindModules(root)
	if err != nil {
		return nil, err
	}
	r := &Repo{Root: root, Versions: v, Modules: mods}
	have := map[string]bool{}
	for _, m := range mods {
		have[m.Path] = true
		if v.SetOf(m.Path) == nil && !v.IsExcluded(m.Path) {
			return nil, fmt.Errorf("module %s (%s/go.mod) is in no set of versions.yaml and not in excluded-modules: list it in one", m.Path, m.Dir)
		}
	}
	for _, s := range v.Sets {
		for _, p := range s.Modules {
			if !have[p] {
				return nil, fmt.Errorf("versions.yaml: set %s lists %s, which has no go.mod in the repository", s.Name, p)
			}
		}
	}
	return r, nil
}

// Module returns the module with path p.
func (r *Repo) Module(p string) (Module, bool) {
	for _, m := range r.Modules {
		if m.Path == p {
			return m, true
		}
	}
	return Module{}, false
}

// ReleasedModules returns the modules of every set, sorted by path.
func (r *Repo) ReleasedModules() []Module {
	var out []Module
	for _, m := range r.Modules {
		if r.Versions.SetOf(m.Path) != nil {
			out = append(out, m)
		}
	}
	return out
}

func (r *Repo) isRepoModule(p string) bool {
	_, ok := r.Module(p)
	return ok
}

// Prepare makes every released go.mod ready to be tagged: each require of a
// released sibling names the version of that sibling's set, and the
// replace directives that point at sibling directories are gone (a consumer
// ignores them, so a release must not depend on them; development keeps
// reaching the working copies through go.work). Unreleased modules are not
// touched. A released module that requires an unreleased one is an error:
// no consumer could resolve it. It also sets each released module's
// Version constant (SyncVersionConstants). Prepare returns the files it
// changed, relative to the root.
func (r *Repo) Prepare() ([]string, error) {
	released := r.Versions.Released()
	var changed []string
	for _, m := range r.ReleasedModules() {
		err := r.editGoMod(m, func(f *modfile.File) error {
			for _, req := range f.Require {
				if !r.isRepoModule(req.Mod.Path) {
					continue
				}
				v, ok := released[req.Mod.Path]
				if !ok {
					return fmt.Errorf("%s requires %s, which versions.yaml never releases", m.Path, req.Mod.Path)
				}
				if path.Base(req.Mod.Path) == "internal" && r.Versions.SetOf(req.Mod.Path) != r.Versions.SetOf(m.Path) {
					return fmt.Errorf("%s requires %s but is not in its set: internal makes no compatibility promise, so its users move with it", m.Path, req.Mod.Path)
				}
				if err := f.AddRequire(req.Mod.Path, v); err != nil {
					return err
				}
			}
			for _, rep := range f.Replace {
				if !modfile.IsDirectoryPath(rep.New.Path) {
					continue
				}
				if !r.isRepoModule(rep.Old.Path) {
					return fmt.Errorf("%s: replace %s => %s points outside the released modules; a release cannot carry it", m.Dir, rep.Old.Path, rep.New.Path)
				}
				if err := f.DropReplace(rep.Old.Path, rep.Old.Version); err != nil {
					return err
				}
			}
			return nil
		}, &changed)
		if err != nil {
			return changed, err
		}
	}
	consts, err := r.SyncVersionConstants()
	return append(changed, consts...), err
}

// Develop is the step back after a release commit is tagged: every released
// go.mod gets a relative replace for each sibling it requires (and its
// go.sum loses the siblings' sums), so each module builds alone again with
// GOWORK=off while the requires keep naming the released versions.
func (r *Repo) Develop() ([]string, error) {
	var changed []string
	for _, m := range r.ReleasedModules() {
		err := r.editGoMod(m, func(f *modfile.File) error {
			for _, req := range f.Require {
				sib, ok := r.Module(req.Mod.Path)
				if !ok {
					continue
				}
				rel, err := filepath.Rel(filepath.FromSlash(m.Dir), filepath.FromSlash(sib.Dir))
				if err != nil {
					return err
				}
				rel = filepath.ToSlash(rel)
				if !strings.HasPrefix(rel, ".") {
					rel = "./" + rel
				}
				if err := f.AddReplace(req.Mod.Path, "", rel, ""); err != nil {
					return err
				}
			}
			return nil
		}, &changed)
		if err != nil {
			return changed, err
		}
		if err := r.dropSiblingSums(m, &changed); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// dropSiblingSums removes the go.sum lines of repository modules, which a
// module reaching them by directory replace does not need (go mod tidy
// would remove them too: make modules checks that the go.sum is tidy).
func (r *Repo) dropSiblingSums(m Module, changed *[]string) error {
	name := filepath.Join(r.Root, filepath.FromSlash(m.Dir), "go.sum")
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if p, _, ok := strings.Cut(l, " "); ok && r.isRepoModule(p) {
			continue
		}
		keep = append(keep, l)
	}
	out := strings.Join(keep, "")
	if out == string(b) {
		return nil
	}
	*changed = append(*changed, m.Dir+"/go.sum")
	return os.WriteFile(name, []byte(out), 0o644)
}

func (r *Repo) editGoMod(m Module, edit func(*modfile.File) error, changed *[]string) error {
	name := filepath.Join(r.Root, filepath.FromSlash(m.Dir), "go.mod")
	old, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(name, old, nil)
	if err != nil {
		return err
	}
	if err := edit(f); err != nil {
		return err
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return err
	}
	if string(out) == string(old) {
		return nil
	}
	*changed = append(*changed, m.Dir+"/go.mod")
	return os.WriteFile(name, out, 0o644)
}

// Bump moves set name to version in versions.yaml (the old version becomes
// previous) and dates the Unreleased section of each of the set's
// changelogs. Moving to the version the set already has changes nothing,
// so a first release (or a prepare run twice) works. A version below the
// current one is refused.
func (r *Repo) Bump(name, version string, now time.Time) ([]string, error) {
	s := r.Versions.Set(name)
	if s == nil {
		return nil, fmt.Errorf("versions.yaml has no set %q", name)
	}
	if version == "" {
		version = s.Version
	}
	if !isRelease(version) {
		return nil, fmt.Errorf("version %q is not a release version like v1.2.3", version)
	}
	if c := semver.Compare(version, s.Version); c < 0 {
		return nil, fmt.Errorf("set %s is at %s; %s would go back", name, s.Version, version)
	} else if c > 0 {
		vf := filepath.Join(r.Root, "versions.yaml")
		b, err := os.ReadFile(vf)
		if err != nil {
			return nil, err
		}
		text, err := UpdateSetVersion(string(b), name, version, s.Version)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(vf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		s.Previous, s.Version = s.Version, version
	}
	var changed []string
	if c := semver.Compare(version, s.Version); c != 0 {
		return nil, fmt.Errorf("internal: set %s at %s after bump to %s", name, s.Version, version)
	}
	changed = append(changed, "versions.yaml")
	for _, p := range s.Modules {
		m, _ := r.Module(p)
		cl := filepath.Join(r.Root, filepath.FromSlash(m.Dir), "CHANGELOG.md")
		b, err := os.ReadFile(cl)
		if err != nil {
			return changed, fmt.Errorf("%s: every released module keeps a CHANGELOG.md: %w", m.Dir, err)
		}
		out, err := DateChangelog(string(b), version, now)
		if err != nil {
			return changed, fmt.Errorf("%s/CHANGELOG.md: %w", m.Dir, err)
		}
		if out != string(b) {
			if err := os.WriteFile(cl, []byte(out), 0o644); err != nil {
				return changed, err
			}
			changed = append(changed, m.Dir+"/CHANGELOG.md")
		}
	}
	return changed, nil
}

// DateChangelog turns the "## [Unreleased]" section into "## [version] -
// date" under a new empty Unreleased heading (Keep a Changelog). A
// changelog that already has a section for version is left as it is.
func DateChangelog(text, version string, now time.Time) (string, error) {
	if strings.Contains(text, "\n## ["+version+"]") {
		return text, nil
	}
	const head = "\n## [Unreleased]\n"
	i := strings.Index(text, head)
	if i < 0 {
		return "", fmt.Errorf("no %q heading to date", strings.TrimSpace(head))
	}
	dated := head + "\n## [" + version + "] - " + now.UTC().Format("2006-01-02") + "\n"
	return text[:i] + dated + text[i+len(head):], nil
}

// Tags returns the tags of set name's current version.
func (r *Repo) Tags(name string) ([]string, error) {
	s := r.Versions.Set(name)
	if s == nil {
		return nil, fmt.Errorf("versions.yaml has no set %q", name)
	}
	var out []string
	for _, p := range s.Modules {
		m, _ := r.Module(p)
		out = append(out, m.Tag(s.Version))
	}
	return out, nil
}
