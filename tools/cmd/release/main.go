// Command release prepares, checks and proves redkit's module releases.
//
// Usage, from the repository root (the Makefile targets wrap these):
//
//	release prepare -set library [-version v0.2.0]
//	    Moves the set to the version in versions.yaml (the old one becomes
//	    previous), dates the set's changelogs, rewrites every released
//	    go.mod for a release commit (sibling requires at their sets'
//	    versions, no relative replace) and prints the tags to create. It
//	    pushes and tags nothing.
//	release develop
//	    After tagging: gives each released go.mod a relative replace for every
//	    sibling it requires again, so each module builds alone with
//	    GOWORK=off while its requires keep the released versions.
//	release tags -set library
//	    Prints the tags of the set's current version.
//	release proof [-keep] [-from-tags]
//	    In a temporary copy: prepare, commit, tag, serve the released modules
//	    from a file-based module proxy, and build and run consumers of them
//	    outside the workspace against a real redis-server. With -from-tags
//	    the proxy is built from the repository's own tags of the sets'
//	    versions (after a release, to check what was tagged).
//	release api-check
//	    gorelease for every released module against its set's previous
//	    version (the tag's files), or, before a set's first release, against
//	    the current tree.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redkit-go/redkit/tools/release"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	root := fs.String("root", "", "repository root (holds versions.yaml); default: the nearest directory up from here that has one")
	set := fs.String("set", "", "module set in versions.yaml")
	version := fs.String("version", "", "new version of the set (default: the one versions.yaml has)")
	keep := fs.Bool("keep", false, "keep the temporary directory and print its path")
	fromTags := fs.Bool("from-tags", false, "proof: serve the modules from the repository's existing tags of the sets' versions instead of staging a release")
	fs.BoolVar(&release.Verbose, "v", false, "print each go command of the proof and its time")
	_ = fs.Parse(args)
	var err error
	if *root == "" {
		if *root, err = findRoot(); err != nil {
			fmt.Fprintln(os.Stderr, "release "+cmd+":", err)
			os.Exit(1)
		}
	}
	switch cmd {
	case "prepare":
		err = prepare(*root, *set, *version)
	case "develop":
		err = develop(*root)
	case "tags":
		err = tags(*root, *set)
	case "proof":
		err = proof(*root, *keep, *fromTags)
	case "api-check":
		err = apiCheck(*root, *keep)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release "+cmd+":", err)
		os.Exit(1)
	}
}

// findRoot returns the nearest directory at or above the current one that
// holds versions.yaml, so the program works from the repository root and
// from tools/ (go run -C tools) alike.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "versions.yaml")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no versions.yaml here or above; pass -root")
		}
		dir = up
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release prepare -set NAME [-version vX.Y.Z] | develop | tags -set NAME | proof [-keep] [-from-tags] | api-check [-keep]")
	os.Exit(2)
}

func prepare(root, set, version string) error {
	if set == "" {
		return fmt.Errorf("-set is required (a set of versions.yaml)")
	}
	r, err := release.OpenRepo(root)
	if err != nil {
		return err
	}
	changed, err := r.Bump(set, version, time.Now())
	if err != nil {
		return err
	}
	// Read the versions again: Bump rewrote the file.
	if r, err = release.OpenRepo(root); err != nil {
		return err
	}
	mods, err := r.Prepare()
	if err != nil {
		return err
	}
	changed = append(changed, mods...)
	dir, cleanup, err := tempDir(false)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := r.FillSums(context.Background(), dir); err != nil {
		return err
	}
	changed = append(changed, "(go.sum of the released modules: the siblings' sums)")
	fmt.Println("changed:")
	for _, c := range changed {
		fmt.Println("  " + c)
	}
	t, err := r.Tags(set)
	if err != nil {
		return err
	}
	fmt.Println("commit these, then create the tags on that commit (nothing is pushed):")
	for _, tag := range t {
		fmt.Println("  git tag " + tag)
	}
	return nil
}

func develop(root string) error {
	r, err := release.OpenRepo(root)
	if err != nil {
		return err
	}
	changed, err := r.Develop()
	for _, c := range changed {
		fmt.Println("changed: " + c)
	}
	return err
}

func tags(root, set string) error {
	r, err := release.OpenRepo(root)
	if err != nil {
		return err
	}
	t, err := r.Tags(set)
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(t, "\n"))
	return nil
}

func tempDir(keep bool) (string, func(), error) {
	dir, err := os.MkdirTemp("", "redkit-release-")
	if err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Println("temporary directory:", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func proof(root string, keep, fromTags bool) error {
	dir, cleanup, err := tempDir(keep)
	if err != nil {
		return err
	}
	defer cleanup()
	var st *release.Stage
	if fromTags {
		st, err = release.StageFromTags(root, dir)
	} else {
		st, err = release.NewStage(root, dir, release.StageOptions{})
	}
	if err != nil {
		return err
	}
	fmt.Println("tags:", strings.Join(st.Tags, " "))
	rep, err := st.Proof(context.Background(), dir)
	if err != nil {
		return err
	}
	fmt.Println("consumer resolved:")
	for _, p := range sortedKeys(rep.Versions) {
		fmt.Printf("  %s %s\n", p, rep.Versions[p])
	}
	fmt.Println("lock@latest:", rep.LockLatest)
	fmt.Println("lock-only build modules:", strings.Join(rep.LockOnly, " "))
	if fromTags {
		// What the tags hold must also build on its own, go.sum included.
		if err := st.BuildAlone(context.Background(), dir); err != nil {
			return err
		}
		fmt.Println("every tagged module builds alone with its go.sum")
	}
	fmt.Println("proof: ok")
	return nil
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
