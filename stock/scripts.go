package stock

import (
	"embed"

	"github.com/redkit-go/redkit/internal/script"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scripts are the package's Lua scripts; a fenced variant of deduct.lua,
// hold.lua and adjust.lua is built on first use (fence.go).
var scripts = script.NewBundle(scriptFiles, "scripts")

var (
	createScript     = scripts.Script("create.lua")
	adjustScript     = scripts.Script("adjust.lua")
	closeScript      = scripts.Script("close.lua")
	deductScript     = scripts.Script("deduct.lua")
	checkpointScript = scripts.Script("checkpoint.lua")
	trimScript       = scripts.Script("trim.lua")
	holdScript       = scripts.Script("hold.lua")
	reclaimScript    = scripts.Script("reclaim.lua")
	xferScript       = scripts.Script("xfer.lua")
	claimScript      = scripts.Script("claim.lua")
	forgetScript     = scripts.Script("forget.lua")
	consumeScript    = scripts.Script("consume.lua")
	consumedScript   = scripts.Script("consumed.lua")
)

// Scripts returns the Lua source of every script the package runs, as
// Redis runs it, by file name ("deduct.lua", ...). Each file's header
// documents its KEYS, ARGV and reply, so a benchmark or an operator can run
// a script directly.
func Scripts() map[string]string { return scripts.Sources() }
