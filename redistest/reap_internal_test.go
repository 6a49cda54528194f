package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeProc is `sleep 60` standing in for a recorded redis-server.
type fakeProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, set before exited is closed
}

func fakeServer(t *testing.T) (*exec.Cmd, *fakeProc) {
	t.Helper()
	p := &fakeProc{cmd: exec.Command("sleep", "60"), exited: make(chan struct{})}
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	require.Eventually(t, func() bool { return procStart(p.cmd.Process.Pid) != "" }, 10*time.Second, 5*time.Millisecond)
	return p.cmd, p
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func writePidfile(t *testing.T, dir string, child, owner int, ownerStart, childStart, dataDir string) string {
	t.Helper()
	path := filepath.Join(dir, strconv.Itoa(child))
	line := fmt.Sprintf("%d %s %s %s\n", owner, ownerStart, childStart, dataDir)
	require.NoError(t, os.WriteFile(path, []byte(line), 0o644))
	return path
}

func requireAlive(t *testing.T, cmd *exec.Cmd, p *fakeProc) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("process %d was killed: %v", cmd.Process.Pid, p.err)
	default:
	}
	require.NoError(t, cmd.Process.Signal(syscall.Signal(0)))
}

func requireKilled(t *testing.T, p *fakeProc) {
	t.Helper()
	select {
	case <-p.exited:
		err := p.err
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "want killed, got %v", err)
		ws := ee.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled())
		require.Equal(t, syscall.SIGKILL, ws.Signal())
	case <-time.After(30 * time.Second):
		t.Fatal("orphan was not killed")
	}
}

func TestReapDir_deadOwner_killsChildAndRemovesDir(t *testing.T) {
	dir := t.TempDir()
	cmd, done := fakeServer(t)
	data, err := os.MkdirTemp(t.TempDir(), "redistest-")
	require.NoError(t, err)
	pf := writePidfile(t, dir, cmd.Process.Pid, deadPID(t), "1", procStart(cmd.Process.Pid), data)

	reapDir(dir)
	requireKilled(t, done)
	require.NoFileExists(t, pf)
	require.NoDirExists(t, data)
}

func TestReapDir_liveOwner_keepsChild(t *testing.T) {
	dir := t.TempDir()
	cmd, done := fakeServer(t)
	data, err := os.MkdirTemp(t.TempDir(), "redistest-")
	require.NoError(t, err)
	pf := writePidfile(t, dir, cmd.Process.Pid, os.Getpid(), selfStart(), procStart(cmd.Process.Pid), data)

	reapDir(dir)
	time.Sleep(50 * time.Millisecond) // a wrongly sent SIGKILL would land by now
	requireAlive(t, cmd, done)
	require.FileExists(t, pf)
	require.DirExists(t, data)
}

func TestReapDir_reusedChildPID_notKilled(t *testing.T) {
	dir := t.TempDir()
	cmd, done := fakeServer(t)
	// The owner is dead, but the recorded start time is not this process's:
	// its PID was reused by someone else's process.
	pf := writePidfile(t, dir, cmd.Process.Pid, deadPID(t), "1", "1", "/nonexistent/redistest-x")

	reapDir(dir)
	time.Sleep(50 * time.Millisecond)
	requireAlive(t, cmd, done)
	require.NoFileExists(t, pf)
}

func TestRecordChild_writesOwner(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	cmd, _ := fakeServer(t)
	recordChild(cmd.Process.Pid, "/d/redistest-1")
	b, err := os.ReadFile(filepath.Join(pidDir(), strconv.Itoa(cmd.Process.Pid)))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d %s %s /d/redistest-1\n", os.Getpid(), selfStart(), procStart(cmd.Process.Pid)), string(b))
	forgetChild(cmd.Process.Pid)
	require.NoFileExists(t, filepath.Join(pidDir(), strconv.Itoa(cmd.Process.Pid)))
}

func TestReapDataDirs_deadOwnersOnly(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Join(p, "appendonlydir"), 0o755))
		return p
	}
	dead := mk(fmt.Sprintf("redistest-%d-1-123", deadPID(t)))
	reused := mk(fmt.Sprintf("redistest-%d-1-456", os.Getpid())) // our PID, another start: a dead owner's PID reused
	live := mk(fmt.Sprintf("redistest-%d-%s-789", os.Getpid(), selfStart()))
	old := mk("redistest-123456") // no owner in the name
	pids := mk("redistest-pids")
	other := mk("somethingelse-1-1-1")
	file := filepath.Join(tmp, "redistest-1-1-1")
	require.NoError(t, os.WriteFile(file, nil, 0o644))

	reapDataDirs(tmp)
	require.NoDirExists(t, dead)
	require.NoDirExists(t, reused)
	for _, kept := range []string{live, old, pids, other, file} {
		_, err := os.Stat(kept)
		require.NoError(t, err, "%s is kept", kept)
	}
}

func TestDataDirPattern_namesOwner(t *testing.T) {
	d, err := os.MkdirTemp(t.TempDir(), dataDirPattern())
	require.NoError(t, err)
	reapDataDirs(filepath.Dir(d))
	require.DirExists(t, d, "a live owner's directory stays")
	require.Regexp(t, fmt.Sprintf(`^redistest-%d-%s-\d+$`, os.Getpid(), selfStart()), filepath.Base(d))
}
