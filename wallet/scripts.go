package wallet

import (
	"embed"
	"strings"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/script"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scripts are the package's Lua scripts. Every script is fence.Lua,
// scripts/lib.lua and its file; the files document their KEYS, ARGV and
// reply.
var scripts = script.NewBundle(scriptFiles, "scripts")

var (
	openScript       = newScript("open.lua")
	postScript       = newFastScript("post.lua")
	transferScript   = newFastScript("transfer.lua")
	closeScript      = newScript("close.lua")
	checkpointScript = newScript("checkpoint.lua")
	holdScript       = newScript("hold.lua")
	resolveScript    = newScript("resolve.lua")
	sweepScript      = newScript("sweep.lua")
	xbeginScript     = newScript("xbegin.lua")
	xcreditScript    = newScript("xcredit.lua")
	xfinishScript    = newScript("xfinish.lua")
	xdoneScript      = newScript("xdone.lua")
	headScript       = newScript("head.lua")
	xstaleScript     = newScript("xstale.lua")
)

// Scripts returns the Lua source of every script the package runs, as
// Redis runs it, by file name ("post.lua" is credit and debit, ...). Each
// file's header documents its KEYS, ARGV and reply, so a benchmark or an
// operator can run a script directly.
func Scripts() map[string]string { return scripts.Sources() }

func newScript(name string) *script.Script {
	return scripts.Script(name, fence.Lua, scripts.File("lib.lua"))
}

// newFastScript builds post.lua and transfer.lua: fence.Lua, lib.lua down
// to its line "-- @fast", the rest of lib.lua wrapped in the function
// redkit_lib (its closures are made only on the rarer paths that call it),
// fast.lua, then the file.
func newFastScript(name string) *script.Script {
	head, rest, ok := strings.Cut(scripts.File("lib.lua"), "\n-- @fast\n")
	if !ok {
		panic("wallet: no -- @fast line in lib.lua")
	}
	return scripts.Script(name, fence.Lua, head, "local function redkit_lib()\n"+rest+
		"\nreturn {account = account, marker = marker, conflict = conflict, replay = replay, reply = reply, "+
		"sweep_due = sweep_due}\nend", scripts.File("fast.lua"))
}
