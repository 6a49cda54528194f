package stock

import (
	"embed"
	"io/fs"
	"maps"

	"github.com/redkit-go/redkit/internal/script"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

var sources = func() map[string]string {
	m := map[string]string{}
	files, _ := fs.Glob(scriptFS, "scripts/*.lua")
	for _, f := range files {
		b, _ := scriptFS.ReadFile(f)
		m[f[len("scripts/"):]] = string(b)
	}
	return m
}()

func load(name string) *script.Script { return script.New(sources[name]) }

var (
	createScript     = load("create.lua")
	adjustScript     = load("adjust.lua")
	closeScript      = load("close.lua")
	deductScript     = load("deduct.lua")
	checkpointScript = load("checkpoint.lua")
	trimScript       = load("trim.lua")
	holdScript       = load("hold.lua")
	reclaimScript    = load("reclaim.lua")
	xferScript       = load("xfer.lua")
	claimScript      = load("claim.lua")
	forgetScript     = load("forget.lua")
)

// Scripts returns the Lua source of every script the package runs, by file
// name ("deduct.lua", ...). Each file's header documents its KEYS, ARGV and
// reply, so a benchmark or an operator can run a script directly.
func Scripts() map[string]string { return maps.Clone(sources) }
