package release

import (
	"os"
	"path/filepath"
	"testing"
)

// The modules whose telemetry records their version as the scope version.
var versionedModules = []string{
	"github.com/redkit-go/redkit/otelx",
	"github.com/redkit-go/redkit/idgen",
	"github.com/redkit-go/redkit/lock",
	"github.com/redkit-go/redkit/stock",
	"github.com/redkit-go/redkit/wallet",
}

// Each module's Version constant is the version versions.yaml gives its
// set, so the scope version of its telemetry names the release that made it.
func TestVersionConstants_agreeWithVersionsYAML(t *testing.T) {
	r, err := OpenRepo(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	consts, err := r.VersionConstants()
	if err != nil {
		t.Fatal(err)
	}
	released := r.Versions.Released()
	for _, p := range versionedModules {
		got, ok := consts[p]
		if !ok {
			t.Errorf("%s has no version.go with a Version constant", p)
			continue
		}
		if got != released[p] {
			t.Errorf("%s: Version = %q, versions.yaml: %q", p, got, released[p])
		}
	}
}

// Prepare rewrites the Version constants to a moved set's version.
func TestPrepare_setsVersionConstants(t *testing.T) {
	r, err := OpenRepo(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyOf := &Repo{Root: dir, Versions: r.Versions, Modules: r.Modules}
	for _, m := range r.ReleasedModules() {
		src := filepath.Join(r.Root, filepath.FromSlash(m.Dir), "version.go")
		b, err := os.ReadFile(src)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(m.Dir), "version.go")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, versionConst.ReplaceAll(b, []byte(`const Version = "v0.0.0-stale"`)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changed, err := copyOf.SyncVersionConstants()
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) < len(versionedModules) {
		t.Fatalf("changed %v, want every versioned module's version.go", changed)
	}
	consts, err := copyOf.VersionConstants()
	if err != nil {
		t.Fatal(err)
	}
	for p, v := range consts {
		if v != r.Versions.Released()[p] {
			t.Errorf("%s: after sync Version = %q", p, v)
		}
	}
}
