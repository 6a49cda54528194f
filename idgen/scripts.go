package idgen

import (
	"embed"

	"github.com/redkit-go/redkit/internal/script"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scripts are the package's Lua scripts; the lease scripts are prefixed by
// scripts/lease_common.lua.
var scripts = script.NewBundle(scriptFiles, "scripts")

// Scripts returns the Lua source of every script the package runs, as
// Redis runs it, by file name ("reserve.lua", ...). Each file's header
// documents its KEYS, ARGV and reply, so a benchmark or an operator can run
// a script directly.
func Scripts() map[string]string { return scripts.Sources() }
