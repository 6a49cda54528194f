package reliability_test

import (
	"testing"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Every module's Scripts lists the scripts it runs, by file name, each as
// Redis runs it: Redis compiles every one (SCRIPT LOAD), and the files the
// modules call are there.
func TestScripts_everyModule(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	for name, m := range map[string]struct {
		srcs map[string]string
		want []string
	}{
		"lock":   {lock.Scripts(), []string{"acquire.lua", "extend.lua", "release.lua", "sem_acquire.lua", "rw_acquire_w.lua"}},
		"idgen":  {idgen.Scripts(), []string{"reserve.lua", "lease_acquire.lua", "lease_renew.lua"}},
		"stock":  {stock.Scripts(), []string{"deduct.lua", "hold.lua", "checkpoint.lua"}},
		"wallet": {wallet.Scripts(), []string{"post.lua", "transfer.lua", "hold.lua", "xbegin.lua"}},
	} {
		for _, f := range m.want {
			if _, ok := m.srcs[f]; !ok {
				t.Errorf("%s: Scripts has no %s", name, f)
			}
		}
		for f, src := range m.srcs {
			if err := rdb.ScriptLoad(t.Context(), src).Err(); err != nil {
				t.Errorf("%s %s: %v", name, f, err)
			}
		}
	}
}
