package main

import (
	"strings"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
)

// -h shows -addr with a default the service accepts without API keys, and
// says that -rate-limit counts ID requests (not buys or payments).
func TestRun_help(t *testing.T) {
	help := exampletest.Help(t, run)
	exampletest.RequireLoopbackAddrs(t, help, "addr")
	rl := exampletest.FlagHelp(t, help, "rate-limit")
	if !strings.Contains(rl, "ID requests") || strings.Contains(rl, "buys") || strings.Contains(rl, "payments") {
		t.Errorf("-rate-limit's help does not say it counts ID requests: %s", rl)
	}
}
