package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is printed whenever redis-server cannot be found.
const InstallHint = "redis-server not found: install it with " +
	"`sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server` " +
	"(or set REDISTEST_SERVER to its path)"

// ErrNotInstalled is returned by Start when no redis-server binary is available.
var ErrNotInstalled = errors.New("redistest: " + InstallHint)

// Options configure one redis-server process. The zero value is a plain
// in-memory server with AOF off on a free loopback port.
type Options struct {
	// AOF switches on the append-only file (appendonly yes).
	AOF bool
	// AppendFsync is "always", "everysec" (default when AOF is on) or "no".
	AppendFsync string
	// MaxmemoryPolicy sets maxmemory-policy (server default: noeviction).
	MaxmemoryPolicy string
	// Config holds extra directives, one "name value" pair per entry,
	// appended after the defaults so they win.
	Config []string
	// Port fixes the port; 0 picks a free one.
	Port int
	// Dir is the data directory; empty means a fresh temporary directory
	// that Close removes.
	Dir string
	// StartTimeout bounds how long Start waits for the server to accept
	// connections (default 10s).
	StartTimeout time.Duration
	// TLS, when set, makes the server accept TLS connections only, with
	// these certificates (see NewTLS): the port serves TLS and plain TCP is
	// off; replicas and Cluster nodes talk to each other over TLS too.
	// Client and the package's own control connections use TLS.ClientConfig.
	TLS *TLS
}

// Server is one running (or killed) redis-server child process.
//
// Its methods are safe for concurrent use. Faults (Kill, Pause, Restart)
// act on the real process, so a test sees what a production client would.
type Server struct {
	opts    Options
	addr    string
	port    int
	dir     string
	ownDir  bool
	binPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	clients []*redis.Client
	closed  bool
	// replicaOf is the primary's "host:port" while this server is a
	// replica; Restart writes it into the config so the role survives.
	replicaOf string
	// cluster makes the server a cluster node (cluster-enabled yes).
	cluster bool
}

// Binary returns the path of the redis-server executable redistest uses:
// $REDISTEST_SERVER if set, otherwise redis-server on $PATH.
func Binary() (string, error) {
	if p := os.Getenv("REDISTEST_SERVER"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%w (REDISTEST_SERVER=%s: %v)", ErrNotInstalled, p, err)
		}
		return found, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNotInstalled
	}
	return p, nil
}

// New starts a server for a test and stops it in t.Cleanup. A missing
// redis-server fails the test with the install command.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(context.Background(), opts)
	return forTest(tb, s, err)
}

// forTest returns x, started for a test, and closes it in tb.Cleanup; err,
// the start's error, fails the test instead.
func forTest[T io.Closer](tb testing.TB, x T, err error) T {
	tb.Helper()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = x.Close() })
	return x
}

// Start starts a redis-server process and waits until it answers PING.
// The caller must Close it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	return startServer(ctx, opts, nil)
}

// startServer starts a server; setup, when not nil, adjusts it before its
// config is written (replica or cluster node from its first second).
func startServer(ctx context.Context, opts Options, setup func(*Server)) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	reapOrphans()
	s := &Server{opts: opts, binPath: bin, port: opts.Port, dir: opts.Dir}
	if setup != nil {
		setup(s)
	}
	if s.dir == "" {
		d, err := os.MkdirTemp("", dataDirPattern())
		if err != nil {
			return nil, err
		}
		s.dir, s.ownDir = d, true
	}
	// A port picked by the kernel can be taken by someone else before the
	// server binds it; retry a few times on "address in use".
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if opts.Port == 0 {
			p, err := FreePort()
			if err != nil {
				return nil, err
			}
			s.port = p
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if lastErr = s.start(ctx); lastErr == nil {
			return s, nil
		}
		if opts.Port != 0 || !strings.Contains(lastErr.Error(), "in use") {
			break
		}
	}
	s.cleanupDir()
	return nil, lastErr
}

// FreePort returns a loopback TCP port that was free a moment ago, low
// enough that port+10000 (the cluster bus) is still a valid port.
func FreePort() (int, error) {
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if p+10000 <= 65535 {
			return p, nil
		}
	}
	return 0, errors.New("redistest: no free port below 55535")
}

func (s *Server) configLines() []string {
	lines := []string{
		"port " + strconv.Itoa(s.port),
		"bind 127.0.0.1",
		"dir " + s.dir,
		"save \"\"",
		"daemonize no",
		"protected-mode no",
		"logfile " + filepath.Join(s.dir, "redis.log"),
		"pidfile " + filepath.Join(s.dir, "redis.pid"),
		"enable-debug-command local",
		"repl-diskless-sync-delay 0",
	}
	if s.opts.TLS != nil {
		lines = append(s.opts.TLS.configLines(strconv.Itoa(s.port)), lines[1:]...)
	}
	if s.opts.AOF {
		fsync := s.opts.AppendFsync
		if fsync == "" {
			fsync = "everysec"
		}
		lines = append(lines, "appendonly yes", "appendfsync "+fsync)
	} else {
		lines = append(lines, "appendonly no")
		if s.opts.AppendFsync != "" {
			lines = append(lines, "appendfsync "+s.opts.AppendFsync)
		}
	}
	if s.opts.MaxmemoryPolicy != "" {
		lines = append(lines, "maxmemory-policy "+s.opts.MaxmemoryPolicy)
	}
	s.mu.Lock()
	replicaOf := s.replicaOf
	s.mu.Unlock()
	if host, port, err := net.SplitHostPort(replicaOf); err == nil {
		lines = append(lines, "replicaof "+host+" "+port)
	}
	if s.cluster {
		// The bus port is set explicitly: Redis would otherwise use
		// port+10000 and refuse to start above 55535.
		lines = append(lines,
			"cluster-enabled yes",
			"cluster-config-file "+filepath.Join(s.dir, "nodes.conf"),
			"cluster-port "+strconv.Itoa(s.port+10000),
			"cluster-node-timeout 5000",
		)
	}
	return append(lines, s.opts.Config...)
}

func (s *Server) start(ctx context.Context) error {
	conf := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(s.configLines(), "\n")+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(s.binPath, conf)
	cmd.Dir = s.dir
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.binPath, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	recordChild(cmd.Process.Pid, s.dir)

	s.mu.Lock()
	s.cmd, s.exited, s.paused = cmd, exited, false
	s.mu.Unlock()

	timeout := s.opts.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			forgetChild(cmd.Process.Pid)
			return fmt.Errorf("redistest: redis-server exited at start: %s", s.logTail())
		default:
		}
		if err := ping(s.addr, s.tlsConfig()); err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			<-exited
			forgetChild(cmd.Process.Pid)
			return fmt.Errorf("redistest: redis-server on %s not ready: %s", s.addr, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ping(addr string, tlsConfig *tls.Config) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	if tlsConfig != nil {
		cfg := tlsConfig.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		c = tls.Client(c, cfg)
	}
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("not ready: %q", strings.TrimSpace(line))
	}
	return nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, " | ")
}

// Addr is the server's host:port on loopback.
func (s *Server) Addr() string { return s.addr }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir is the server's data directory (AOF files live here).
func (s *Server) Dir() string { return s.dir }

// Options returns the options the server was started with.
func (s *Server) Options() Options { return s.opts }

// Client returns a new go-redis client for the server, closed by Close.
// Extra options are applied on top of Addr.
func (s *Server) Client(opt ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.addr, TLSConfig: s.tlsConfig()}
	for _, f := range opt {
		f(o)
	}
	c := redis.NewClient(o)
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

// tlsConfig is the client TLS configuration for the server, nil without TLS.
func (s *Server) tlsConfig() *tls.Config {
	if s.opts.TLS == nil {
		return nil
	}
	return s.opts.TLS.ClientConfig()
}

// PID returns the current process ID, or 0 when the server is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil || s.isExited() {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) isExited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to die. Data not
// yet written to the AOF is lost, exactly as in a crash.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("redistest: not started")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	forgetChild(cmd.Process.Pid)
	return nil
}

// Restart starts the server again on the same port and data directory,
// after Kill or a crash. With AOF on, acknowledged writes (per the
// appendfsync policy) are loaded back.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	running := s.cmd != nil && !s.isExited()
	s.mu.Unlock()
	if running {
		if err := s.Kill(); err != nil {
			return err
		}
	}
	var err error
	// The old socket may linger briefly in the kernel; retry "in use".
	for i := 0; i < 50; i++ {
		if err = s.start(ctx); err == nil || !strings.Contains(err.Error(), "in use") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Pause stops the process with SIGSTOP: connections stay open but nothing
// is answered, like a long GC pause or a frozen VM.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.isExited() {
		return errors.New("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	if paused {
		// kill(2) returns before a process running on another CPU has
		// stopped; a write sent in that window could still be served.
		waitStopped(s.cmd.Process.Pid)
	}
	return nil
}

// waitStopped polls /proc until the process is in the stopped state, for at
// most a few seconds. Where /proc is unavailable it returns at once.
func waitStopped(pid int) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// The state follows the parenthesised command name: "pid (comm) T ...".
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] == 'T' || b[i+2] == 't' {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Close stops the server, closes the clients made by Client and removes a
// temporary data directory. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	clients := s.clients
	s.clients = nil
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	if cmd != nil && cmd.Process != nil {
		if paused {
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		forgetChild(cmd.Process.Pid)
	}
	s.cleanupDir()
	return nil
}

func (s *Server) cleanupDir() {
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}
