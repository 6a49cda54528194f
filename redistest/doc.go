// Package redistest starts real redis-server processes for tests, benchmarks
// and programs, and injects real faults into them.
//
// It never mocks Redis: every server is a child process of the caller,
// listening on a free loopback port with its data in a temporary directory.
// A missing redis-server is an error that carries the install command
// (ErrNotInstalled), never a silent skip.
//
// Entry points:
//
//   - New(tb, opts) for tests: the server is stopped in tb.Cleanup.
//   - Start(ctx, opts) + Close() for TestMain, benchmarks and programs.
//
// Faults act on the real process: Kill (SIGKILL), Restart (same port and
// data directory, so AOF data survives), Pause/Resume (SIGSTOP/SIGCONT).
//
// Every child is started with Pdeathsig so it dies with its parent, and is
// recorded in a pidfile (under $TMPDIR/redistest-pids) with its owner's PID
// and start time; leftovers are reaped at the next Start only when their
// owner is dead, so several test binaries can run at once.
//
// Set REDISTEST_SERVER to use a redis-server binary other than the one on
// $PATH.
package redistest
