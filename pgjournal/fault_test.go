package pgjournal_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

const childEnv = "PGJOURNAL_TEST_CHILD"

// runChild is the test binary re-run as a sink process that the test
// kills with SIGKILL: PGJOURNAL_TEST_CHILD="<pg url>|<redis addr>|<key
// prefix>|<schema>|<sku,sku,...>".
func runChild() int {
	f := strings.Split(os.Getenv(childEnv), "|")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	book, err := pgjournal.Open(ctx, pool, pgjournal.WithSchema(f[3]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rdb := redis.NewClient(&redis.Options{Addr: f[1]})
	inv, err := stock.New(rdb, stock.WithKeyPrefix(f[2]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = book.SinkStock(ctx, inv, stock.Consumer{Group: "book", Name: "sink", SKUs: strings.Split(f[4], ","),
		Poll: 5 * time.Millisecond, MinIdle: time.Hour})
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func startChild(t *testing.T, f *fixture, pgURL, redisAddr string, skus ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{pgURL, redisAddr, f.prefix, f.schema, strings.Join(skus, ",")}, "|"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// lockProjection takes an exclusive lock on stock_levels in a transaction
// of its own and returns its release: a sink that reaches its batch's
// first statement waits there, mid-transaction.
func (f *fixture) lockProjection() (release func()) {
	f.t.Helper()
	ctx := context.Background()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+f.schema+".stock_levels IN ACCESS EXCLUSIVE MODE"); err != nil {
		f.t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// waitLockWaiter waits until some session waits for a lock.
func (f *fixture) waitLockWaiter() {
	f.t.Helper()
	waitFor(f.t, "a sink blocked mid-transaction", func() bool {
		return f.int("SELECT count(*) FROM pg_locks WHERE NOT granted") > 0
	})
}

// A sink process killed with SIGKILL in the middle of a batch's
// transaction, and one killed after its commit but before it acknowledged
// the batch in Redis: the next sink gets the batch again and books nothing
// twice.
func TestSinkStock_killedMidBatch(t *testing.T) {
	rs := redistest.New(t, redistest.Options{})
	f := newFixture(t, sharedPG, rs)
	skus := []string{"k/a", "k/b"}
	stockWork(t, f.inv, "k1", 100, skus...)

	// 1. Killed mid-transaction: the projection is locked, so the child
	// has read a batch and begun booking it when it is killed.
	release := f.lockProjection()
	child := startChild(t, f, sharedPG.URL(), rs.Addr(), skus...)
	f.waitLockWaiter()
	kill9(t, child)
	release()
	if n := f.int("SELECT count(*) FROM $S.stock_entries"); n != 0 {
		t.Fatalf("%d entries booked by a transaction that never committed", n)
	}

	// 2. Killed after the commit, before the acknowledgement: the child
	// reaches Redis through a proxy that is cut while its transaction is
	// held, then the transaction is let through; the child commits and
	// cannot acknowledge.
	proxy := redistest.NewProxy(t, rs.Addr())
	release = f.lockProjection()
	child = startChild(t, f, sharedPG.URL(), proxy.Addr(), skus...)
	f.waitLockWaiter()
	if err := proxy.Cut(true); err != nil {
		t.Fatal(err)
	}
	release()
	waitFor(t, "the child's commit", func() bool { return f.int("SELECT count(*) FROM $S.stock_entries") > 0 })
	kill9(t, child)
	pending, err := f.rdb.XPending(t.Context(), f.journalKey(skus[0]), "book").Result()
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.rdb.XPending(t.Context(), f.journalKey(skus[1]), "book").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count+other.Count == 0 {
		t.Fatal("the killed child acknowledged its batch: the fault did not happen")
	}

	// 3. Killed at arbitrary moments while orders keep coming.
	done := make(chan struct{})
	go func() { defer close(done); moreStockWork(t, f.inv, "k2", 300, skus...) }()
	for i := range 5 {
		child = startChild(t, f, sharedPG.URL(), rs.Addr(), skus...)
		time.Sleep(time.Duration(20+15*i) * time.Millisecond)
		kill9(t, child)
	}
	<-done
	f.catchUp(skus, nil)
	f.checkBook(skus, nil)
}

// PostgreSQL restarted twice while the sink books a stream of orders.
func TestSink_postgresRestart(t *testing.T) {
	pg := pgtest.New(t)
	f := newFixture(t, pg, sharedRedis)
	var errs atomic.Int64
	f.book = reopen(t, f, pgjournal.WithErrorHandler(func(error) { errs.Add(1) }), pgjournal.WithMaxBackoff(50*time.Millisecond))
	skus := []string{"r/a", "r/b"}
	accounts := []string{"r/x", "r/y"}
	stockWork(t, f.inv, "r1", 50, skus...)
	walletWork(t, f.led, "r1", 50, accounts...)
	stopS := runSink(t, f.stockSink(skus...))
	stopW := runSink(t, f.walletSink(accounts...))
	done := make(chan struct{})
	go func() {
		defer close(done)
		moreStockWork(t, f.inv, "r2", 300, skus...)
		moreWalletWork(t, f.led, "r2", 300, accounts...)
	}()
	pg.Restart(t)
	time.Sleep(50 * time.Millisecond)
	pg.Kill()
	pg.StartAgain(t)
	<-done
	// The test's own queries below share the pool; drop the connections
	// the restarts broke (the sinks recover from them by retrying).
	f.pool.Reset()
	f.drain(skus, accounts, stopS, stopW)
	if errs.Load() == 0 {
		t.Fatal("the sinks saw no error: the restarts did not reach them")
	}
	f.checkBook(skus, accounts)
}

// The connection drops while replies are lost: a COMMIT that ran is
// reported to the sink as a failure; the batch comes again and is found
// booked.
func TestSink_droppedConnectionMidCommit(t *testing.T) {
	pg := pgtest.New(t)
	proxy := redistest.NewProxy(t, pg.Addr())
	f := newFixture(t, pg, sharedRedis)
	pool, err := pgxpool.New(t.Context(), pg.URLVia(proxy.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var errs atomic.Int64
	book, err := pgjournal.Open(t.Context(), pool, pgjournal.WithSchema(f.schema),
		pgjournal.WithErrorHandler(func(error) { errs.Add(1) }), pgjournal.WithMaxBackoff(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f.book = book
	skus := []string{"d/a"}
	accounts := []string{"d/x", "d/y"}
	stockWork(t, f.inv, "d1", 20, skus...)
	walletWork(t, f.led, "d1", 20, accounts...)
	stopS := runSink(t, f.stockSink(skus...))
	stopW := runSink(t, f.walletSink(accounts...))
	for i := range 6 {
		// Writes keep the sinks busy, so the replies dropped include
		// those of commits.
		moreStockWork(t, f.inv, fmt.Sprintf("d2-%d", i), 30, skus...)
		moreWalletWork(t, f.led, fmt.Sprintf("d2-%d", i), 30, accounts...)
		proxy.DropReplies(true)
		time.Sleep(30 * time.Millisecond)
		proxy.ResetConnections()
		proxy.DropReplies(false)
	}
	f.drain(skus, accounts, stopS, stopW)
	if errs.Load() == 0 {
		t.Fatal("the sinks saw no error: the faults did not reach them")
	}
	f.checkBook(skus, accounts)
}

func reopen(t *testing.T, f *fixture, opts ...pgjournal.Option) *pgjournal.Book {
	t.Helper()
	b, err := pgjournal.Open(t.Context(), f.pool, append([]pgjournal.Option{pgjournal.WithSchema(f.schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
