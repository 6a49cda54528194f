package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Children die with the process that started them (Pdeathsig). For the case
// Pdeathsig cannot cover (the starting thread exits, or the owner is killed
// while the child is being set up), every child is recorded in a pidfile
// with its owner's PID and start time; the next Start in any process reaps
// the children whose owner is gone, and only those, so test binaries of
// several packages can run at once.
//
// A data directory outlives its pidfile when its server was killed for good
// (Kill forgets the pidfile) or was never recorded, and its owner then died
// without Close. So each temporary data directory carries its owner in its
// name, "redistest-<owner pid>-<owner start>-<random>", and the next Start
// removes those whose owner is gone.

func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// pidDir holds one file per live child: name = child PID, content =
// "<owner pid> <owner start> <child start> <data dir>".
func pidDir() string {
	return filepath.Join(os.TempDir(), "redistest-pids")
}

// procStart returns the start time of a process in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or "" when it does not exist.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	// The command name (field 2) may contain spaces; skip past its ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3; field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

var selfStart = sync.OnceValue(func() string { return procStart(os.Getpid()) })

func recordChild(pid int, dir string) {
	if err := os.MkdirAll(pidDir(), 0o755); err != nil {
		return
	}
	line := fmt.Sprintf("%d %s %s %s\n", os.Getpid(), selfStart(), procStart(pid), dir)
	_ = os.WriteFile(filepath.Join(pidDir(), strconv.Itoa(pid)), []byte(line), 0o644)
}

func forgetChild(pid int) {
	_ = os.Remove(filepath.Join(pidDir(), strconv.Itoa(pid)))
}

var reapOnce sync.Once

// reapOrphans kills redis-server processes left behind by owners that have
// died, and removes their data directories. It runs once per process, at
// the first Start.
func reapOrphans() {
	reapOnce.Do(func() {
		reapDir(pidDir())
		reapDataDirs(os.TempDir())
	})
}

// dataDirPattern is the os.MkdirTemp pattern of a server's temporary data
// directory: it names this process as the owner.
func dataDirPattern() string {
	if selfStart() == "" {
		return "redistest-" // no /proc: reapDataDirs cannot tell the owner
	}
	return fmt.Sprintf("redistest-%d-%s-", os.Getpid(), selfStart())
}

// reapDataDirs removes the data directories in tmp whose owner is dead.
// Directories of live owners and those it cannot read an owner from (not
// made by dataDirPattern) are left alone.
func reapDataDirs(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		f := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(f) != 4 || f[0] != "redistest" {
			continue
		}
		owner, err := strconv.Atoi(f[1])
		if err != nil || owner <= 0 || f[2] == "" || procStart(owner) == f[2] {
			continue // not ours, or the owner is alive
		}
		_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
	}
}

// reapDir reaps the children recorded in dir whose owner is dead.
func reapDir(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			_ = os.Remove(path)
			continue
		}
		owner, _ := strconv.Atoi(f[0])
		if owner > 0 && procStart(owner) == f[1] && f[1] != "" {
			continue // owner alive: never touch a sibling's server
		}
		if childStart := procStart(pid); childStart != "" && childStart == f[2] {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(f) >= 4 && strings.Contains(filepath.Base(f[3]), "redistest-") {
			_ = os.RemoveAll(f[3])
		}
		_ = os.Remove(path)
	}
}
