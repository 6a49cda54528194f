package main

import (
	"strings"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
)

// -h shows -serve with an address the service accepts without API keys,
// and says what -rate-limit counts here.
func TestRun_help(t *testing.T) {
	help := exampletest.Help(t, run)
	exampletest.RequireLoopbackAddrs(t, help, "serve")
	if rl := exampletest.FlagHelp(t, help, "rate-limit"); !strings.Contains(rl, "payments") || strings.Contains(rl, "buys") {
		t.Errorf("-rate-limit's help does not say it counts payments: %s", rl)
	}
}
