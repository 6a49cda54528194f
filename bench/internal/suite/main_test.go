package suite

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"testing"

	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/redistest"
)

// shared is the server and cluster every test of the package uses.
var shared Env

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(mainRun{m})
}

type mainRun struct{ m *testing.M }

func (r mainRun) Run() int {
	ctx := context.Background()
	s, err := redistest.Start(ctx, redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	c, err := redistest.StartCluster(ctx, redistest.ClusterOptions{Masters: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	shared = Env{Server: s, Cluster: c, RedisBenchmark: FindRedisBenchmark(), Quick: true, AOF: map[string]*redistest.Server{}}
	for _, fsync := range []string{"everysec", "always"} {
		a, err := redistest.Start(ctx, redistest.Options{AOF: true, AppendFsync: fsync})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer a.Close()
		shared.AOF[fsync] = a
	}
	return r.m.Run()
}

func regexpMust(t *testing.T, s string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return re
}
