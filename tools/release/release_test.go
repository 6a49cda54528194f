package release

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// repoRoot is the repository these tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// copyRepo copies the files of the HEAD commit to a temporary directory
// and opens it.
func copyRepo(t *testing.T) *Repo {
	t.Helper()
	dst := t.TempDir()
	if err := CopyCommit(repoRoot(t), "HEAD", dst); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRepo(dst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readMod(t *testing.T, r *Repo, m Module) *modfile.File {
	t.Helper()
	name := filepath.Join(r.Root, m.Dir, "go.mod")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(name, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseVersions_theRepositoryFile(t *testing.T) {
	r := copyRepo(t)
	for _, m := range r.Modules {
		if r.Versions.SetOf(m.Path) == nil && !r.Versions.IsExcluded(m.Path) {
			t.Errorf("%s is in no set", m.Path)
		}
	}
	for _, p := range []string{"reliability", "examples", "bench", "tools"} {
		if !r.Versions.IsExcluded("github.com/redkit-go/redkit/" + p) {
			t.Errorf("%s must never be released", p)
		}
	}
	lib := r.Versions.SetOf("github.com/redkit-go/redkit/lock")
	if lib == nil || r.Versions.SetOf("github.com/redkit-go/redkit/internal") != lib {
		t.Errorf("internal must move with its users (lock's set)")
	}
}

func TestParseVersions_rejects(t *testing.T) {
	const good = "module-sets:\n  a:\n    version: v0.2.0\n    previous: v0.1.0\n    modules:\n      - example.com/m/x\nexcluded-modules:\n  - example.com/m/y\n"
	if v, err := ParseVersions(good); err != nil {
		t.Fatalf("good file: %v", err)
	} else if s := v.Set("a"); s.Version != "v0.2.0" || s.Previous != "v0.1.0" || len(s.Modules) != 1 || !v.IsExcluded("example.com/m/y") {
		t.Fatalf("parsed %+v", s)
	}
	for name, text := range map[string]string{
		"unknown top key":   "sets:\n",
		"unknown set field": "module-sets:\n  a:\n    versoin: v0.1.0\n",
		"tab indent":        "module-sets:\n\ta:\n",
		"no sets":           "excluded-modules:\n  - example.com/m/y\n",
		"not a version":     strings.Replace(good, "v0.2.0", "0.2", 1),
		"prerelease":        strings.Replace(good, "v0.2.0", "v0.2.0-rc.1", 1),
		"previous above":    strings.Replace(good, "v0.1.0", "v0.3.0", 1),
		"listed twice":      strings.Replace(good, "example.com/m/y", "example.com/m/x", 1),
		"bad module path":   strings.Replace(good, "example.com/m/x", "Example Com", 1),
		"inline list":       "module-sets:\n  a:\n    version: v0.1.0\n    modules: [x]\n",
	} {
		if _, err := ParseVersions(text); err == nil {
			t.Errorf("%s: accepted:\n%s", name, text)
		}
	}
}

func TestUpdateSetVersion_keepsTheRest(t *testing.T) {
	const text = "# top\nmodule-sets:\n  a:\n    version: v0.1.0 # first\n    modules:\n      - example.com/m/x\n  b:\n    version: v0.1.0\n    previous: none\n    modules:\n      - example.com/m/z\n"
	out, err := UpdateSetVersion(text, "b", "v0.2.0", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVersions(out)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := v.Set("a"), v.Set("b"); a.Version != "v0.1.0" || a.Previous != "" || b.Version != "v0.2.0" || b.Previous != "v0.1.0" {
		t.Fatalf("a=%+v b=%+v\n%s", a, b, out)
	}
	if !strings.Contains(out, "# top\n") || !strings.Contains(out, "# first") {
		t.Fatalf("comments lost:\n%s", out)
	}
	out, err = UpdateSetVersion(text, "a", "v0.2.0", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ParseVersions(out); err != nil || v.Set("a").Previous != "v0.1.0" || v.Set("b").Version != "v0.1.0" {
		t.Fatalf("added previous: %v\n%s", err, out)
	}
}

// After Prepare no released go.mod names a sibling at another version than
// its set's, nor reaches one by a directory replace; unreleased modules are
// left alone; Develop gives back the replaces and keeps the versions.
func TestPrepare_releasedGoModsResolveForAConsumer(t *testing.T) {
	r := copyRepo(t)
	released := r.Versions.Released()
	before := map[string]string{}
	for _, m := range r.Modules {
		b, _ := os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod"))
		before[m.Dir] = string(b)
	}
	if _, err := r.Prepare(); err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Modules {
		f := readMod(t, r, m)
		if _, ok := released[m.Path]; !ok {
			b, _ := os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod"))
			if string(b) != before[m.Dir] {
				t.Errorf("%s is never released, but Prepare changed its go.mod", m.Dir)
			}
			continue
		}
		for _, req := range f.Require {
			if v, ok := released[req.Mod.Path]; ok && req.Mod.Version != v {
				t.Errorf("%s requires %s@%s, its set is at %s", m.Dir, req.Mod.Path, req.Mod.Version, v)
			}
		}
		for _, rep := range f.Replace {
			if modfile.IsDirectoryPath(rep.New.Path) {
				t.Errorf("%s keeps replace %s => %s", m.Dir, rep.Old.Path, rep.New.Path)
			}
		}
	}
	again, err := r.Prepare()
	if err != nil || len(again) != 0 {
		t.Fatalf("second Prepare changed %v (%v); it must be idempotent", again, err)
	}
	if _, err := r.Develop(); err != nil {
		t.Fatal(err)
	}
	lock, _ := r.Module("github.com/redkit-go/redkit/lock")
	f := readMod(t, r, lock)
	reps := map[string]string{}
	for _, rep := range f.Replace {
		reps[rep.Old.Path] = rep.New.Path
	}
	for _, req := range f.Require {
		if v, ok := released[req.Mod.Path]; ok {
			if req.Mod.Version != v {
				t.Errorf("after Develop lock requires %s@%s, want %s", req.Mod.Path, req.Mod.Version, v)
			}
			sib, _ := r.Module(req.Mod.Path)
			if want := "../" + sib.Dir; reps[req.Mod.Path] != want {
				t.Errorf("after Develop lock replaces %s with %q, want %q", req.Mod.Path, reps[req.Mod.Path], want)
			}
		}
	}
}

func TestPrepare_refusesInternalOutsideItsSet(t *testing.T) {
	r := copyRepo(t)
	// Move lock into a set of its own, as if internal had a
	// compatibility promise it does not have.
	lib := r.Versions.SetOf("github.com/redkit-go/redkit/lock")
	var keep []string
	for _, p := range lib.Modules {
		if p != "github.com/redkit-go/redkit/lock" {
			keep = append(keep, p)
		}
	}
	lib.Modules = keep
	r.Versions.Sets = append(r.Versions.Sets, &Set{Name: "lock", Version: "v0.1.0", Modules: []string{"github.com/redkit-go/redkit/lock"}})
	_, err := r.Prepare()
	if err == nil || !strings.Contains(err.Error(), "internal") {
		t.Fatalf("Prepare = %v, want a refusal naming internal", err)
	}
}

func TestOpenRepo_everyModuleIsListed(t *testing.T) {
	r := copyRepo(t)
	dir := filepath.Join(r.Root, "newmod")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/redkit-go/redkit/newmod\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRepo(r.Root); err == nil || !strings.Contains(err.Error(), "newmod") {
		t.Fatalf("OpenRepo = %v, want an error naming the unlisted module", err)
	}
}

func TestBump_movesTheSetAndDatesItsChangelogs(t *testing.T) {
	r := copyRepo(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	lib := r.Versions.Set("library")
	cur := lib.Version
	if _, err := r.Bump("library", "v0.0.1", now); err == nil && cur != "v0.0.1" {
		t.Fatalf("Bump to a lower version was accepted")
	}
	if _, err := r.Bump("library", "v9.0.0", now); err != nil {
		t.Fatal(err)
	}
	r2, err := OpenRepo(r.Root)
	if err != nil {
		t.Fatal(err)
	}
	if s := r2.Versions.Set("library"); s.Version != "v9.0.0" || s.Previous != cur {
		t.Fatalf("library after bump: %+v", s)
	}
	if s := r2.Versions.Set("tooling"); s.Version != r.Versions.Set("tooling").Version {
		t.Fatalf("tooling moved: %+v", s)
	}
	b, err := os.ReadFile(filepath.Join(r.Root, "lock", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "## [Unreleased]\n\n## [v9.0.0] - 2030-01-02\n") {
		t.Fatalf("lock/CHANGELOG.md not dated:\n%s", b)
	}
}

func TestTestOnlyIn(t *testing.T) {
	got := TestOnlyIn([]string{"github.com/redis/go-redis/v9", "github.com/stretchr/testify", "go.opentelemetry.io/otel", "go.opentelemetry.io/otel/sdk/metric", "go.opentelemetry.io/otel/sdkx"})
	if strings.Join(got, " ") != "github.com/stretchr/testify go.opentelemetry.io/otel/sdk/metric" {
		t.Fatalf("TestOnlyIn = %v", got)
	}
}

// The proof itself: make release-proof runs it (REDKIT_RELEASE_PROOF=1).
// It takes a minute or two (compiling the consumers), so the plain go test
// run of the workspace skips it instead of running it twice.
func TestConsumerProof(t *testing.T) {
	if os.Getenv("REDKIT_RELEASE_PROOF") != "1" {
		t.Skip("run by make release-proof (REDKIT_RELEASE_PROOF=1)")
	}
	dir := t.TempDir()
	st, err := NewStage(repoRoot(t), dir, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.Proof(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resolved %v; lock-only build: %v", rep.Versions, rep.LockOnly)
}

// A release whose go.mod still requires a sibling at v0.0.0 (the state of
// every go.mod before release-prepare) cannot be consumed: the proof must
// say so, naming the missing version.
func TestConsumerProof_failsWhenAReleasedGoModKeepsV000(t *testing.T) {
	dir := t.TempDir()
	st, err := NewStage(repoRoot(t), dir, StageOptions{AfterPrepare: func(root string) error {
		r := &Repo{Root: root}
		return r.editGoMod(Module{Dir: "lock"}, func(f *modfile.File) error {
			return f.AddRequire("github.com/redkit-go/redkit/internal", "v0.0.0")
		}, new([]string))
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Proof(context.Background(), dir)
	if err == nil {
		t.Fatal("the proof passed with lock requiring internal@v0.0.0")
	}
	if !strings.Contains(err.Error(), "github.com/redkit-go/redkit/internal@v0.0.0") {
		t.Fatalf("the proof failed, but not on internal@v0.0.0: %v", err)
	}
}

// After a release the go.sum files hold the siblings' sums; a directory
// replace needs none, and make modules checks go.sum is tidy, so Develop
// removes them (and nothing else).
func TestDevelop_dropsSiblingSums(t *testing.T) {
	r := copyRepo(t)
	if _, err := r.Prepare(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(r.Root, "lock", "go.sum")
	before, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	sib := "github.com/redkit-go/redkit/internal v0.1.0 h1:UaC22ALk5Xaik0JV/Y5SEuwg2f9Y/DZMB54hLqVZ9DI=\n" +
		"github.com/redkit-go/redkit/internal v0.1.0/go.mod h1:toXmFBQrx6hNM5nqrzu/WRvZ1m3R/Kq5XLgm47qVO78=\n"
	if err := os.WriteFile(name, append([]byte(sib), before...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Develop(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("lock/go.sum after Develop:\n%s\nwant the go.sum without the sibling lines:\n%s", after, before)
	}
}
