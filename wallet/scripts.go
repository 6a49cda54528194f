package wallet

import (
	_ "embed"

	"github.com/redkit-go/redkit/internal/fence"
	"github.com/redkit-go/redkit/internal/script"
)

// Every script is fence.Lua, lib.lua and its body; the bodies document
// their KEYS, ARGV and reply.
var (
	//go:embed scripts/lib.lua
	libLua string
	//go:embed scripts/fast.lua
	fastLua string
	//go:embed scripts/open.lua
	openLua string
	//go:embed scripts/post.lua
	postLua string
	//go:embed scripts/transfer.lua
	transferLua string
	//go:embed scripts/close.lua
	closeLua string
	//go:embed scripts/checkpoint.lua
	checkpointLua string
	//go:embed scripts/hold.lua
	holdLua string
	//go:embed scripts/resolve.lua
	resolveLua string
	//go:embed scripts/sweep.lua
	sweepLua string
	//go:embed scripts/xbegin.lua
	xbeginLua string
	//go:embed scripts/xcredit.lua
	xcreditLua string
	//go:embed scripts/xfinish.lua
	xfinishLua string
	//go:embed scripts/xdone.lua
	xdoneLua string
	//go:embed scripts/head.lua
	headLua string
	//go:embed scripts/xstale.lua
	xstaleLua string
)

var (
	openScript       = newScript(openLua)
	postScript       = newFastScript(postLua)
	transferScript   = newFastScript(transferLua)
	closeScript      = newScript(closeLua)
	checkpointScript = newScript(checkpointLua)
	holdScript       = newScript(holdLua)
	resolveScript    = newScript(resolveLua)
	sweepScript      = newScript(sweepLua)
	xbeginScript     = newScript(xbeginLua)
	xcreditScript    = newScript(xcreditLua)
	xfinishScript    = newScript(xfinishLua)
	xdoneScript      = newScript(xdoneLua)
	headScript       = newScript(headLua)
	xstaleScript     = newScript(xstaleLua)
)

// PostingScriptSource returns the full Lua source of the credit/debit
// script (its KEYS and ARGV are documented in its header), for running it
// outside Go, e.g. with redis-benchmark after SCRIPT LOAD.
func PostingScriptSource() string { return postScript.Source() }

func newScript(body string) *script.Script { return script.New(fence.Lua + "\n" + libLua + body) }

// newFastScript builds post.lua and transfer.lua: fence.Lua, lib.lua
// wrapped in the function redkit_lib (its closures are made only on the
// rarer paths that call it), fast.lua, then the body.
func newFastScript(body string) *script.Script {
	return script.New(fence.Lua + "\nlocal function redkit_lib()\n" + libLua +
		"\nreturn {account = account, marker = marker, conflict = conflict, replay = replay, reply = reply, " +
		"sweep_due = sweep_due}\nend\n" + fastLua + body)
}
