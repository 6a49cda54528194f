package release

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// Stage is a release made in a scratch repository: a copy of the working
// tree, prepared and committed as a release commit, tagged, and every
// released module's files served from a file-based module proxy the way
// the public proxy would serve them from those tags.
type Stage struct {
	Repo  *Repo  // the prepared copy
	Proxy string // directory laid out as a GOPROXY
	Tags  []string
}

// StageOptions adjusts a stage.
type StageOptions struct {
	// AfterPrepare, when set, runs on the copy between Prepare and the
	// release commit. Tests use it to release a broken go.mod.
	AfterPrepare func(root string) error
	// FillSums completes the released go.sum files as release-prepare
	// does (Repo.FillSums). It costs a go mod tidy per module, and the
	// consumers do not read their dependencies' go.sum, so the proof
	// leaves it out; api-check needs it (gorelease checks go.sum).
	FillSums bool
}

// NewStage copies the files of src's HEAD commit (what a tag of it would
// hold; uncommitted edits are left out) into dir/repo, commits them, runs
// Prepare, commits the result as the release commit, tags every released
// module at its set's version and builds the module proxy in dir/proxy.
func NewStage(src, dir string, opts StageOptions) (*Stage, error) {
	root := filepath.Join(dir, "repo")
	if err := CopyCommit(src, "HEAD", root); err != nil {
		return nil, err
	}
	if err := gitInit(root); err != nil {
		return nil, err
	}
	r, err := OpenRepo(root)
	if err != nil {
		return nil, err
	}
	if _, err := r.Prepare(); err != nil {
		return nil, err
	}
	if opts.AfterPrepare != nil {
		if err := opts.AfterPrepare(root); err != nil {
			return nil, err
		}
	}
	if opts.FillSums {
		if err := r.FillSums(context.Background(), filepath.Join(dir, "sums")); err != nil {
			return nil, err
		}
	}
	if err := gitCommit(root, "release"); err != nil {
		return nil, err
	}
	st := &Stage{Repo: r, Proxy: filepath.Join(dir, "proxy")}
	for _, m := range r.ReleasedModules() {
		tag := m.Tag(r.Versions.SetOf(m.Path).Version)
		if _, err := git(root, "tag", tag); err != nil {
			return nil, err
		}
		st.Tags = append(st.Tags, tag)
	}
	for _, m := range r.ReleasedModules() {
		if err := AddToProxy(st.Proxy, root, m, r.Versions.SetOf(m.Path).Version); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// StageFromTags serves the released modules of the repository at root from
// its existing tags of the sets' current versions (what a release pushed),
// instead of staging a new release.
func StageFromTags(root, dir string) (*Stage, error) {
	r, err := OpenRepo(root)
	if err != nil {
		return nil, err
	}
	st := &Stage{Repo: r, Proxy: filepath.Join(dir, "proxy")}
	for _, m := range r.ReleasedModules() {
		v := r.Versions.SetOf(m.Path).Version
		if _, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+m.Tag(v)); err != nil {
			return nil, fmt.Errorf("no tag %s: %w", m.Tag(v), err)
		}
		if err := AddToProxy(st.Proxy, root, m, v); err != nil {
			return nil, err
		}
		st.Tags = append(st.Tags, m.Tag(v))
	}
	return st, nil
}

// AddToProxy writes module m at version, from the tag m.Tag(version) of the
// git repository at root, into the proxy directory: the zip is built by
// golang.org/x/mod/zip from exactly the files `git archive` gives for the
// tag (as the go command and the public proxy build it), the .mod is the
// tag's go.mod, and the list and .info answer @latest queries.
func AddToProxy(proxy, root string, m Module, version string) error {
	tag := m.Tag(version)
	subdir := ""
	if m.Dir != "." {
		subdir = m.Dir + "/"
	}
	var buf bytes.Buffer
	if err := zip.CreateFromVCS(&buf, module.Version{Path: m.Path, Version: version}, root, tag, subdir); err != nil {
		return fmt.Errorf("zip of %s@%s: %w", m.Path, version, err)
	}
	gomod, err := git(root, "show", tag+":"+subdir+"go.mod")
	if err != nil {
		return err
	}
	when, err := git(root, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return err
	}
	return writeToProxy(proxy, m.Path, version, buf.Bytes(), []byte(gomod), t)
}

// writeToProxy writes module path at version into the proxy directory as
// the go command reads it: the zip, the go.mod, the .info with the time t,
// and the version in the list, which answers @latest queries.
func writeToProxy(proxy, path, version string, zipData, gomod []byte, t time.Time) error {
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	for name, b := range map[string][]byte{version + ".zip": zipData, version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(vdir, name), b, 0o644); err != nil {
			return err
		}
	}
	list := filepath.Join(vdir, "list")
	old, _ := os.ReadFile(list)
	for _, l := range strings.Fields(string(old)) {
		if l == version {
			return nil
		}
	}
	return os.WriteFile(list, append(old, []byte(version+"\n")...), 0o644)
}

// CopyCommit writes the files of commit rev of the repository at src into
// dst, as git archive gives them.
func CopyCommit(src, rev, dst string) error {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	cmd.Dir = src
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = cmd.Wait()
			return fmt.Errorf("git archive %s: %w: %s", rev, err, stderr.String())
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := filepath.Join(dst, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", rev, err, stderr.String())
	}
	return nil
}

func gitInit(root string) error {
	if _, err := git(root, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	return gitCommit(root, "base")
}

func gitCommit(root, msg string) error {
	if _, err := git(root, "add", "-A"); err != nil {
		return err
	}
	_, err := git(root, "commit", "-q", "--allow-empty", "-m", msg)
	return err
}

// git runs git in dir with a fixed identity, so a scratch repository
// commits on a machine with no git configuration.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=redkit release", "-c", "user.email=release@localhost", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// BuildAlone unpacks every released module's zip from the proxy into dir
// and builds it there on its own (no workspace, no replace, go.sum read
// only), with the stage's proxy for its siblings: what someone who
// downloads the module at its tag gets. A go.sum that misses a sibling's
// sum, or holds one that differs from the tag's files, fails here.
func (st *Stage) BuildAlone(ctx context.Context, dir string) error {
	env, err := st.GoEnv(dir)
	if err != nil {
		return err
	}
	env = append(env, "GOFLAGS=-mod=readonly -modcacherw -trimpath")
	for _, m := range st.Repo.ReleasedModules() {
		v := st.Repo.Versions.SetOf(m.Path).Version
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		zf := filepath.Join(st.Proxy, filepath.FromSlash(esc), "@v", v+".zip")
		to := filepath.Join(dir, "alone", filepath.FromSlash(m.Dir))
		if err := zip.Unzip(to, module.Version{Path: m.Path, Version: v}, zf); err != nil {
			return err
		}
		if _, err := run(ctx, env, to, "go", "build", "./..."); err != nil {
			return fmt.Errorf("%s@%s does not build alone: %w", m.Path, v, err)
		}
	}
	return nil
}
