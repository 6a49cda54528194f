package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

func TestServer_PauseResume(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	ctx := t.Context()
	c := s.Client(func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond; o.MaxRetries = -1 })
	require.NoError(t, c.Ping(ctx).Err())

	require.NoError(t, s.Pause())
	err := c.Ping(ctx).Err()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout from a paused server, got %v", err)

	require.NoError(t, s.Resume())
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 10*time.Millisecond)
}

func TestServer_Close_whilePaused(t *testing.T) {
	s, err := redistest.Start(t.Context(), redistest.Options{})
	require.NoError(t, err)
	pid := s.PID()
	require.NoError(t, s.Pause())
	require.NoError(t, s.Close())
	require.Zero(t, s.PID())
	requireGone(t, pid)
	require.NoError(t, s.Close(), "Close is idempotent")
}

func TestServer_KillRestart_withoutAOFLosesData(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	c := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	pid := s.PID()
	require.NoError(t, s.Kill())
	require.Zero(t, s.PID())
	requireGone(t, pid)
	require.Error(t, c.Ping(ctx).Err())
	require.NoError(t, s.Restart(ctx))
	require.NotEqual(t, pid, s.PID())
	require.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil)
}

func TestServer_Options(t *testing.T) {
	s := redistest.New(t, redistest.Options{
		AOF: true, AppendFsync: "always", MaxmemoryPolicy: "allkeys-lru",
		Config: []string{"maxmemory 10mb"},
	})
	c := s.Client()
	ctx := t.Context()
	for name, want := range map[string]string{
		"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "allkeys-lru",
		"maxmemory": "10485760", "enable-debug-command": "local",
	} {
		got, err := c.ConfigGet(ctx, name).Result()
		require.NoError(t, err)
		require.Equal(t, want, got[name], name)
	}
	require.DirExists(t, s.Dir())
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", s.Port()), s.Addr())
}

// requireGone waits until pid is no longer a live process (gone or a
// zombie waiting for its parent to reap it).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
	}, 30*time.Second, 10*time.Millisecond, "process %d still alive", pid)
}

// TestHelperProcess is not a real test: TestServer_diesWithOwner and
// TestServer_deadOwnerLeavesNoDataDir run the test binary again with it,
// to own servers and be killed, or to start and close one.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("REDISTEST_HELPER")
	if mode == "" {
		return // only the child process runs it
	}
	// Start from a locked thread that never exits, so Pdeathsig is tied to
	// this process's death, not to a thread's.
	runtime.LockOSThread()
	s, err := redistest.Start(context.Background(), redistest.Options{})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	switch mode {
	case "close":
		_ = s.Close()
		fmt.Println("closed")
		return
	case "killed":
		// A second server, killed for good: its pidfile is gone, its data
		// directory is not.
		k, err := redistest.Start(context.Background(), redistest.Options{AOF: true})
		if err == nil {
			err = k.Kill()
		}
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
	}
	fmt.Println(s.PID(), s.Addr())
	select {} // wait to be killed
}

// helper runs the test binary's TestHelperProcess in mode with tmp as its
// TMPDIR and returns it running, with its standard output.
func helper(t *testing.T, mode, tmp string) (*exec.Cmd, *bufio.Reader, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REDISTEST_HELPER="+mode, "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var once sync.Once
	wait := func() { once.Do(func() { _ = cmd.Wait() }) }
	t.Cleanup(func() { _ = cmd.Process.Kill(); wait() })
	return cmd, bufio.NewReader(out), wait
}

// dataDirs returns the servers' data directories in tmp.
func dataDirs(t *testing.T, tmp string) []string {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "redistest-") && e.Name() != "redistest-pids" {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestServer_deadOwnerLeavesNoDataDir: a test binary killed while it owns
// a running server and one it killed for good leaves both data directories
// behind; the next Start, in another binary, removes them.
func TestServer_deadOwnerLeavesNoDataDir(t *testing.T) {
	tmp := t.TempDir()
	cmd, out, wait := helper(t, "killed", tmp)
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscan(line, &pid)
	require.NoError(t, err, "helper said %q", line)
	require.Len(t, dataDirs(t, tmp), 2)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	wait()
	requireGone(t, pid)
	require.Len(t, dataDirs(t, tmp), 2, "a dead binary cannot clean up")

	_, out, wait = helper(t, "close", tmp)
	line, err = out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "closed\n", line)
	wait()
	require.Empty(t, dataDirs(t, tmp), "the next Start removed the dead binary's data directories")
}

func TestServer_diesWithOwner(t *testing.T) {
	// A private TMPDIR keeps the helper's pidfile away from other test
	// processes, whose reaping would otherwise also kill the orphan.
	cmd, out, wait := helper(t, "running", t.TempDir())
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	var pid int
	var addr string
	_, err = fmt.Sscan(line, &pid, &addr)
	require.NoError(t, err, "helper said %q", line)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	require.NoError(t, c.Ping(t.Context()).Err())

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	wait()
	requireGone(t, pid)
	require.Eventually(t, func() bool { return c.Ping(t.Context()).Err() != nil }, 30*time.Second, 10*time.Millisecond)
}

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper()        {}
func (f *fatalTB) Cleanup(func()) {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestServer_missingBinary(t *testing.T) {
	t.Setenv("REDISTEST_SERVER", "/nonexistent/redis-server")
	_, err := redistest.Start(t.Context(), redistest.Options{})
	require.ErrorIs(t, err, redistest.ErrNotInstalled)
	require.ErrorContains(t, err, "apt-get install -y redis-server")
	require.ErrorContains(t, err, "/nonexistent/redis-server")

	_, err = redistest.StartPair(t.Context(), redistest.Options{})
	require.ErrorIs(t, err, redistest.ErrNotInstalled)
	_, err = redistest.StartCluster(t.Context(), redistest.ClusterOptions{})
	require.ErrorIs(t, err, redistest.ErrNotInstalled)

	ftb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.New(ftb, redistest.Options{})
		ftb.msg = "New returned"
	}()
	<-done
	require.Contains(t, ftb.msg, "apt-get install -y redis-server", "New must fail the test with the install command")
}
