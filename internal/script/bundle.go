package script

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"sync"
)

// Bundle is the scripts of one module: the .lua files of one embedded
// directory, each built into a Script with the shared chunks it needs.
// Every module loads its scripts through a Bundle, so there is one way a
// script's source is put together and one way to list what runs
// (Sources, which each module publishes as Scripts).
type Bundle struct {
	files map[string]string // "x.lua" -> contents

	mu    sync.Mutex
	built map[string]string // "x.lua" -> the full source of its Script
}

// NewBundle reads every *.lua file of dir in fsys, typically an embed.FS
// with "//go:embed scripts/*.lua". It panics when it cannot: for an
// embedded directory that is a build defect, found by any test.
func NewBundle(fsys fs.FS, dir string) *Bundle {
	names, err := fs.Glob(fsys, path.Join(dir, "*.lua"))
	if err != nil || len(names) == 0 {
		panic(fmt.Sprintf("script: no .lua files in %s: %v", dir, err))
	}
	b := &Bundle{files: map[string]string{}, built: map[string]string{}}
	for _, n := range names {
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(fmt.Sprintf("script: %v", err))
		}
		b.files[path.Base(n)] = string(src)
	}
	return b
}

// File returns the contents of the file name ("deduct.lua"); it panics
// when the bundle has none, so a misspelt name fails at package
// initialisation.
func (b *Bundle) File(name string) string {
	src, ok := b.files[name]
	if !ok {
		panic("script: no " + name + " in the bundle")
	}
	return src
}

// Script returns the Script of file name with the given chunks prepended
// in order (each ended by a newline), and records its full source for
// Sources.
func (b *Bundle) Script(name string, prelude ...string) *Script {
	var sb strings.Builder
	for _, p := range prelude {
		sb.WriteString(p)
		if !strings.HasSuffix(p, "\n") {
			sb.WriteString("\n")
		}
	}
	sb.WriteString(b.File(name))
	return b.record(name, sb.String())
}

// Linked returns the Script of file name with the local functions of file
// lib that it calls, directly or through one another, and only those:
// Redis runs the whole chunk on every call, and each function defined is
// a closure built per call. They go at the line "-- @common" of name when
// it has one (a fast path above it runs without building them), else at
// the top, in their order in lib. lib is a sequence of blocks separated by
// blank lines, each defining one "local function".
func (b *Bundle) Linked(name, lib string) *Script {
	return b.record(name, link(b.File(name), b.File(lib)))
}

func (b *Bundle) record(name, src string) *Script {
	b.mu.Lock()
	b.built[name] = src
	b.mu.Unlock()
	return New(src)
}

// Sources returns the full source of every script built from the bundle,
// by file name: what Redis runs, each file's header documenting its KEYS,
// ARGV and reply, for running a script outside Go (redis-cli,
// redis-benchmark after SCRIPT LOAD).
func (b *Bundle) Sources() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.built)
}

// link is Linked on sources.
func link(src, lib string) string {
	var names, defs []string
	for _, block := range strings.Split(lib, "\n\n") {
		_, rest, ok := strings.Cut(block, "local function ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "(")
		names, defs = append(names, name), append(defs, block)
	}
	need := make([]bool, len(names))
	for changed := true; changed; {
		changed = false
		for i, name := range names {
			if need[i] {
				continue
			}
			used := strings.Contains(src, name+"(")
			for j := range names {
				used = used || need[j] && strings.Contains(defs[j], name+"(") && j != i
			}
			if used {
				need[i], changed = true, true
			}
		}
	}
	var sb strings.Builder
	head, tail, marked := strings.Cut(src, "\n-- @common\n")
	if marked {
		sb.WriteString(head)
		sb.WriteString("\n")
	} else {
		tail = src
	}
	for i, def := range defs {
		if need[i] {
			sb.WriteString(def)
			sb.WriteString("\n\n")
		}
	}
	sb.WriteString(tail)
	return sb.String()
}
