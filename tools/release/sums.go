package release

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// FillSums completes the go.sum of every released module after Prepare.
// Without the relative replaces a released module reaches its siblings as
// downloaded modules, whose hashes its go.sum does not hold yet (a replaced
// directory has none), so the module would not build alone at its tag and
// gorelease reports the go.sum as untidy. The modules are tidied in
// dependency order, each against a module proxy in dir holding the siblings
// already done, built from the files their tags will hold; so the sums
// written are the ones the public proxy will serve.
func (r *Repo) FillSums(ctx context.Context, dir string) error {
	order, err := r.releaseOrder()
	if err != nil {
		return err
	}
	proxy := filepath.Join(dir, "proxy")
	st := &Stage{Repo: r, Proxy: proxy}
	env, err := st.GoEnv(dir)
	if err != nil {
		return err
	}
	// Sums written by an earlier prepare are stale once any file of a
	// sibling changed (a dated changelog is enough): start from none.
	var changed []string
	for _, m := range order {
		if err := r.dropSiblingSums(m, &changed); err != nil {
			return err
		}
	}
	files, err := trackedFiles(r.Root)
	if err != nil {
		return err
	}
	for _, m := range order {
		mdir := filepath.Join(r.Root, filepath.FromSlash(m.Dir))
		if _, err := run(ctx, env, mdir, "go", "mod", "tidy"); err != nil {
			return err
		}
		v := r.Versions.SetOf(m.Path).Version
		if err := addDirToProxy(proxy, r.Root, m, v, files); err != nil {
			return err
		}
	}
	return nil
}

// releaseOrder sorts the released modules so that each comes after the
// siblings it requires.
func (r *Repo) releaseOrder() ([]Module, error) {
	mods := r.ReleasedModules()
	deps := map[string][]string{}
	for _, m := range mods {
		b, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(m.Dir+"/go.mod", b, nil)
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			if r.Versions.SetOf(req.Mod.Path) != nil {
				deps[m.Path] = append(deps[m.Path], req.Mod.Path)
			}
		}
	}
	var out []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(p string) error
	visit = func(p string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("released modules require each other in a cycle through %s", p)
		case 2:
			return nil
		}
		state[p] = 1
		for _, d := range deps[p] {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[p] = 2
		m, _ := r.Module(p)
		out = append(out, m)
		return nil
	}
	for _, m := range mods {
		if err := visit(m.Path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// trackedFiles lists the files a commit of root would hold: tracked files
// still present and untracked ones that are not ignored (release-prepare
// runs before the release commit is made).
func trackedFiles(root string) ([]string, error) {
	out, err := git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Split(out, "\x00") {
		if n == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(n))); err == nil && fi.Mode().IsRegular() {
			names = append(names, n)
		}
	}
	return names, nil
}

type zipFile struct{ root, name, rel string }

func (f zipFile) Path() string { return f.rel }
func (f zipFile) Lstat() (os.FileInfo, error) {
	return os.Lstat(filepath.Join(f.root, filepath.FromSlash(f.name)))
}
func (f zipFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.name)))
}

// addDirToProxy writes module m at version into the proxy from the working
// files of root that git would commit (names), so the zip equals the one a
// tag of the same files gives.
func addDirToProxy(proxy, root string, m Module, version string, names []string) error {
	prefix := ""
	if m.Dir != "." {
		prefix = m.Dir + "/"
	}
	var files []zip.File
	for _, n := range names {
		if rel, ok := strings.CutPrefix(n, prefix); ok {
			files = append(files, zipFile{root, n, rel})
		}
	}
	var buf bytes.Buffer
	if err := zip.Create(&buf, module.Version{Path: m.Path, Version: version}, files); err != nil {
		return fmt.Errorf("zip of %s@%s: %w", m.Path, version, err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
	if err != nil {
		return err
	}
	return writeToProxy(proxy, m.Path, version, buf.Bytes(), gomod, time.Now())
}
