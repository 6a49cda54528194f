package pgtest_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/pgjournal/pgtest"
)

type removeTemplate struct{ m *testing.M }

func (r removeTemplate) Run() int {
	defer pgtest.RemoveTemplate()
	return r.m.Run()
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(removeTemplate{m}) }

func TestServer_survivesRestartAndKill(t *testing.T) {
	srv := pgtest.New(t)
	ctx := t.Context()
	exec := func(sql string) {
		t.Helper()
		c, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		c, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec("CREATE TABLE t (x int)")
	exec("INSERT INTO t VALUES (1)")
	srv.Restart(t)
	exec("INSERT INTO t VALUES (2)")
	srv.Kill()
	if _, err := pgx.Connect(ctx, srv.URL()); err == nil {
		t.Fatal("connected to a killed server")
	}
	srv.StartAgain(t)
	if n := count(); n != 2 {
		t.Fatalf("rows after kill and recovery: %d, want 2", n)
	}
}

func TestServer_separateClusters(t *testing.T) {
	a, b := pgtest.New(t), pgtest.New(t)
	ctx := t.Context()
	ca, err := pgx.Connect(ctx, a.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := cb.Exec(ctx, "SELECT 1 FROM only_a"); err == nil {
		t.Fatal("a table of one server is visible on another")
	}
}

// A missing PostgreSQL is an error naming the install command, which New
// turns into a test failure (never a skip).
func TestBinDir_missingNamesInstall(t *testing.T) {
	t.Setenv("PGTEST_BINDIR", t.TempDir())
	_, err := pgtest.BinDir()
	if err == nil || !strings.Contains(err.Error(), pgtest.InstallHint) {
		t.Fatalf("BinDir with no binaries: %v, want the install command", err)
	}
}
