package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Postmasters die with the process that started them (Pdeathsig), and their
// backends with them. For the cases Pdeathsig cannot cover (the starting
// thread exits, the owner is killed while a server is being set up), every
// postmaster is recorded in a pidfile with its owner's PID and start time;
// the first Start in any process kills the servers whose owner is gone, and
// only those, and removes their files and the clusters initdb made for
// them.
//
// The pidfile code is a copy of redistest's, which exports none of it: pgtest depends on pgx alone.

func pidDir() string { return filepath.Join(os.TempDir(), "pgtest-pids") }

// procStart returns the start time of a process in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or "" when it does not exist.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
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

func forgetChild(pid int) { _ = os.Remove(filepath.Join(pidDir(), strconv.Itoa(pid))) }

var reapOnce sync.Once

func reapOrphans() {
	reapOnce.Do(func() {
		reapServers()
		reapTemplates()
	})
}

func reapServers() {
	entries, err := os.ReadDir(pidDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path := filepath.Join(pidDir(), e.Name())
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
		if owner > 0 && f[1] != "" && procStart(owner) == f[1] {
			continue // owner alive: never touch a sibling's server
		}
		if cs := procStart(pid); cs != "" && cs == f[2] {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if len(f) >= 4 && strings.HasPrefix(filepath.Base(f[3]), "pgtest-") {
			_ = os.RemoveAll(f[3])
		}
		_ = os.Remove(path)
	}
}

// reapTemplates removes the clusters of dead owners; their directory names
// carry the owner's PID and start time.
func reapTemplates() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-template-*"))
	for _, d := range dirs {
		f := strings.Split(strings.TrimPrefix(filepath.Base(d), "pgtest-template-"), "-")
		if len(f) < 2 {
			continue
		}
		owner, _ := strconv.Atoi(f[0])
		if owner > 0 && procStart(owner) == f[1] {
			continue
		}
		_ = os.RemoveAll(d)
	}
}
