package release

import (
	"os"
	"path/filepath"
	"regexp"
)

// versionConst matches the constant a released module keeps its own
// version in (version.go: const Version = "vX.Y.Z"), which its telemetry
// records as the instrumentation scope version.
var versionConst = regexp.MustCompile(`(?m)^const Version = "([^"]*)"$`)

// VersionConstants returns, for each released module whose version.go
// holds a Version constant, that constant's value, by module path (a
// version.go without one, such as redistest's, is not the module's own
// version and is left alone).
func (r *Repo) VersionConstants() (map[string]string, error) {
	out := map[string]string{}
	for _, m := range r.ReleasedModules() {
		b, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(m.Dir), "version.go"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if sm := versionConst.FindSubmatch(b); sm != nil {
			out[m.Path] = string(sm[1])
		}
	}
	return out, nil
}

// SyncVersionConstants sets the Version constant of every released module
// whose version.go holds one to its set's version, and returns the files it
// changed, relative to the root.
func (r *Repo) SyncVersionConstants() ([]string, error) {
	released := r.Versions.Released()
	var changed []string
	for _, m := range r.ReleasedModules() {
		rel := filepath.ToSlash(filepath.Join(m.Dir, "version.go"))
		p := filepath.Join(r.Root, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return changed, err
		}
		nb := versionConst.ReplaceAll(b, []byte(`const Version = "`+released[m.Path]+`"`))
		if string(nb) == string(b) {
			continue
		}
		if err := os.WriteFile(p, nb, 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, rel)
	}
	return changed, nil
}
