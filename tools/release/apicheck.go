package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
)

// APICheck runs gorelease for every released module of the stage: the
// module as the release commit holds it against its set's previous
// version, built from that version's tag in the repository at src (the
// files the public proxy serves for it). Before a set's first release there
// is no previous version, so the base is the release commit's own module:
// the comparison runs end to end and reports the whole API as unchanged.
// gorelease reports every API change; on a v0 module only a version that is
// not valid makes it fail. The reports are written to w.
func (st *Stage) APICheck(ctx context.Context, src, dir string, w io.Writer) error {
	env, err := st.GoEnv(dir)
	if err != nil {
		return err
	}
	// gorelease is pinned by the tools module's go.mod (a tool directive).
	bin := filepath.Join(dir, "gorelease")
	if _, err := run(ctx, append(os.Environ(), "GOWORK=off"), filepath.Join(src, "tools"), "go", "build", "-o", bin, "golang.org/x/exp/cmd/gorelease"); err != nil {
		return err
	}
	srcRepo, err := OpenRepo(src)
	if err != nil {
		return err
	}
	// The bases come from the previous tags, every module of a set at once
	// (a base requires its siblings at that version). The proxy's version
	// lists then name only those: gorelease refuses a proposed version
	// that the proxy already lists, and the staged new version must stay
	// reachable by its exact version for the siblings that require it.
	for _, m := range st.Repo.ReleasedModules() {
		s := st.Repo.Versions.SetOf(m.Path)
		if s.Previous == "" {
			continue
		}
		if _, ok := srcRepo.Module(m.Path); !ok {
			return fmt.Errorf("%s: not in %s", m.Path, src)
		}
		if _, err := git(src, "rev-parse", "-q", "--verify", "refs/tags/"+m.Tag(s.Previous)); err != nil {
			return fmt.Errorf("%s: no tag %s to compare against (git fetch --tags): %w", m.Path, m.Tag(s.Previous), err)
		}
		if err := AddToProxy(st.Proxy, src, m, s.Previous); err != nil {
			return err
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(st.Proxy, filepath.FromSlash(esc), "@v", "list"), []byte(s.Previous+"\n"), 0o644); err != nil {
			return err
		}
	}
	var failed []string
	for _, m := range st.Repo.ReleasedModules() {
		s := st.Repo.Versions.SetOf(m.Path)
		args := []string{"-base=" + m.Path + "@" + s.Version}
		what := "no previous version in versions.yaml: against the current tree"
		if s.Previous != "" {
			args = []string{"-base=" + m.Path + "@" + s.Previous, "-version=" + s.Version}
			what = "against " + s.Previous
		}
		fmt.Fprintf(w, "== %s %s (%s)\n", m.Path, s.Version, what)
		out, err := run(ctx, env, filepath.Join(st.Repo.Root, filepath.FromSlash(m.Dir)), bin, args...)
		fmt.Fprintln(w, strings.TrimSpace(out))
		if err != nil {
			fmt.Fprintln(w, err)
			failed = append(failed, m.Path)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("gorelease failed for %s", strings.Join(failed, ", "))
	}
	return nil
}
