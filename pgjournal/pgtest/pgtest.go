// Package pgtest starts real PostgreSQL servers for tests: initdb and
// postgres from Debian's postgresql package, in a temporary directory, on a
// free loopback port, owned by the test process and reaped with it.
//
//	srv := pgtest.New(t)          // stopped and removed in t.Cleanup
//	pool := srv.Pool(t)           // a pgxpool.Pool on the server's database
//	srv.Restart(t)                // fast shutdown, start on the same port
//
// A missing PostgreSQL fails the test with the command that installs it; it
// never skips. PostgreSQL refuses to run as root: when the test runs as
// root, initdb and postgres run as the "postgres" user (created by the
// Debian package) and the data directory is handed to it; otherwise they
// run as the current user.
//
// The cluster is made once per test binary (initdb takes seconds) and
// copied for each server. Servers run with fsync off: they survive their
// own process dying (the kernel keeps what was written), not the machine.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// InstallHint is the command that installs what pgtest needs on Debian.
const InstallHint = "sudo apt-get update && sudo apt-get install -y postgresql"

// BinDir returns the directory holding initdb and postgres: $PGTEST_BINDIR
// when set, else the newest /usr/lib/postgresql/<version>/bin (where Debian
// puts them, off PATH). Tools found on PATH are not used: they may be
// wrappers of another installation.
func BinDir() (string, error) {
	if d := os.Getenv("PGTEST_BINDIR"); d != "" {
		if !isExec(filepath.Join(d, "initdb")) || !isExec(filepath.Join(d, "postgres")) {
			return "", fmt.Errorf("pgtest: no initdb and postgres in PGTEST_BINDIR=%s; install PostgreSQL: %s", d, InstallHint)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", fmt.Errorf("pgtest: PostgreSQL not found in /usr/lib/postgresql/*/bin; install it: %s", InstallHint)
	}
	sort.Slice(ok, func(i, j int) bool { return version(ok[i]) < version(ok[j]) })
	return ok[len(ok)-1], nil
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// runAs is the account initdb and postgres run under: nil for the current
// user, the "postgres" user when the current one is root.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the postgres user (from the postgresql package): %w; install it: %s", err, InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func chownTree(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}

var template struct {
	once sync.Once
	dir  string // holds "data", a fresh cluster
	err  error
}

// makeTemplate runs initdb once per process.
func makeTemplate() (string, error) {
	template.once.Do(func() {
		template.dir, template.err = initTemplate()
	})
	return template.dir, template.err
}

func initTemplate() (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	cred, err := runAs()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("pgtest-template-%d-%s-", os.Getpid(), selfStart()))
	if err != nil {
		return "", err
	}
	// The unprivileged account must reach the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if err := chownTree(dir, cred); err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	return dir, nil
}

// Server is one PostgreSQL server (a postmaster process and its data
// directory). Its methods are safe for concurrent use.
type Server struct {
	bin  string
	cred *syscall.Credential
	dir  string // temporary directory holding data/ and the log
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// New starts a server for a test and stops it and removes its files in
// tb.Cleanup. Any failure, a missing PostgreSQL included, fails the test.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(context.Background())
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Start starts a server; the caller must Close it.
func Start(ctx context.Context) (*Server, error) {
	reapOrphans()
	tmpl, err := makeTemplate()
	if err != nil {
		return nil, err
	}
	bin, _ := BinDir()
	cred, _ := runAs()
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, cred: cred, dir: dir}
	// The unprivileged account must reach the directory; the data
	// directory must be its own with mode 0700.
	err = os.Chmod(dir, 0o755)
	if err == nil {
		err = copyTree(filepath.Join(tmpl, "data"), s.dataDir())
	}
	if err == nil {
		err = chownTree(dir, cred)
	}
	if err == nil {
		err = os.Chmod(s.dataDir(), 0o700)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: copy cluster: %w", err)
	}
	// A port the kernel picked may be taken before postgres binds it.
	for attempt := 0; ; attempt++ {
		s.port, err = freePort()
		if err == nil {
			err = s.start(ctx)
		}
		if err == nil {
			return s, nil
		}
		if attempt == 4 || !strings.Contains(err.Error(), "in use") {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// start runs the postmaster in the foreground as the server's child, so it
// dies with the test process (Pdeathsig) and Kill is a real kill -9.
func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(s.port),
		"-c", "unix_socket_directories=",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=100",
		"-c", "shared_buffers=16MB",
	)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	recordChild(cmd.Process.Pid, s.dir)
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			forgetChild(cmd.Process.Pid)
			return fmt.Errorf("pgtest: postgres exited at start: %s", s.logTail())
		default:
		}
		c, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			_ = c.Close(ctx)
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("pgtest: postgres did not accept connections: %v: %s", err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// URL is the connection string of the server's "postgres" database as the
// superuser "postgres" (trust authentication, no TLS).
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URLVia is URL with the address replaced, for a proxy in front of the
// server.
func (s *Server) URLVia(addr string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
}

// Pool returns a pool on the server, closed in tb.Cleanup.
func (s *Server) Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	p, err := pgxpool.New(context.Background(), s.URL())
	if err != nil {
		tb.Fatalf("pgtest: pool: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Kill kills the postmaster and its backends with SIGKILL and waits for
// the postmaster, like a crash of the database server. StartAgain brings it
// back through crash recovery.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// Backends run in sessions of their own (PostgreSQL calls setsid), so
	// they are found by parent; one still attached to the shared memory
	// would make the next start fail.
	kids := children(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-exited
	for _, k := range kids {
		waitGone(k)
	}
	forgetChild(cmd.Process.Pid)
}

// children lists the PIDs whose parent is pid.
func children(pid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st := procStat(p); len(st) > 1 && st[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// procStat returns the fields of /proc/<pid>/stat after the command name
// (state, ppid, ...), or nil when the process is gone.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// waitGone waits until pid has exited (a zombie holds no shared memory).
func waitGone(pid int) {
	for range 1000 {
		if st := procStat(pid); st == nil || st[0] == "Z" || st[0] == "X" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts the server down (fast shutdown: open transactions are rolled
// back, connections closed) and waits for it.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		s.mu.Lock()
		s.cmd = cmd
		s.mu.Unlock()
		s.kill()
	}
	forgetChild(cmd.Process.Pid)
	return nil
}

// Restart stops the server (Stop) and starts it again on the same port
// with the same data.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	_ = s.Stop()
	if err := s.start(context.Background()); err != nil {
		tb.Fatalf("%v", err)
	}
}

// StartAgain starts a server that was stopped or killed, on the same port
// with the same data (after Kill, PostgreSQL runs crash recovery).
func (s *Server) StartAgain(tb testing.TB) {
	tb.Helper()
	if err := s.start(context.Background()); err != nil {
		tb.Fatalf("%v", err)
	}
}

// Close stops the server and removes its files.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// RemoveTemplate removes the cluster this process made with initdb for its
// servers (the next Start makes a new one). Call it when a test binary is
// done, in TestMain; a template left behind is removed by the first Start
// of a later process.
func RemoveTemplate() {
	if template.dir != "" {
		_ = os.RemoveAll(template.dir)
	}
}
