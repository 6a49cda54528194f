package lock

import (
	"embed"

	"github.com/redkit-go/redkit/internal/script"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scripts are the package's Lua scripts. Each is linked with the functions
// of scripts/common.lua it calls, and only those (script.Bundle.Linked).
var scripts = script.NewBundle(scriptFiles, "scripts")

func lockScript(name string) *script.Script { return scripts.Linked(name, "common.lua") }

// Scripts returns the Lua source of every script the package runs, as
// Redis runs it, by file name ("acquire.lua", ...). Each file's header
// documents its KEYS, ARGV and reply, so a benchmark or an operator can run
// a script directly.
func Scripts() map[string]string { return scripts.Sources() }
