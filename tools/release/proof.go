package release

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Verbose makes the proof print each command it runs and how long it took.
var Verbose bool

// TestOnly lists module paths (or path prefixes ending in "/") that only
// the modules' tests use. A consumer's build must contain none of them.
var TestOnly = []string{
	"github.com/stretchr/testify",
	"github.com/anishathalye/porcupine",
	"go.uber.org/goleak",
	"github.com/redkit-go/redkit/redistest",
	"pgregory.net/rapid",
	"go.opentelemetry.io/otel/sdk", // also matches go.opentelemetry.io/otel/sdk/metric
}

// GoEnv is the environment of a go command run as a consumer outside this
// repository: no workspace, requirements added as needed, a module cache of
// its own (so a module the stage served never lingers in the user's cache
// under a version a real release will reuse), the stage's proxy first, then
// the user's module cache as a read-only proxy (nothing already downloaded
// is fetched again), then the GOPROXY configured here for everything else.
// The stage's modules are not in the checksum database, so only they skip
// it.
func (st *Stage) GoEnv(dir string) ([]string, error) {
	goproxy, err := goEnv("GOPROXY")
	if err != nil {
		return nil, err
	}
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	proxies := []string{fileURL(st.Proxy)}
	if fi, err := os.Stat(filepath.Join(cache, "cache", "download")); err == nil && fi.IsDir() {
		proxies = append(proxies, fileURL(filepath.Join(cache, "cache", "download")))
	}
	if goproxy != "" && goproxy != "off" {
		proxies = append(proxies, goproxy)
	}
	var prefixes []string
	for _, m := range st.Repo.ReleasedModules() {
		prefixes = append(prefixes, m.Path)
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOMODCACHE="+filepath.Join(dir, "modcache"),
		"GOPROXY="+strings.Join(proxies, ","),
		"GOPRIVATE=",
		"GONOPROXY=",
		"GONOSUMDB="+strings.Join(prefixes, ","),
		"GONOSUMCHECK=",
		"GOTOOLCHAIN=local",
	)
	return env, nil
}

func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Consumer programs. Each is built outside the repository against the
// staged releases and run against a real redis-server; each prints "ok"
// last.
const consumerAll = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx/setup"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run(addr string) error {
	ctx := context.Background()
	tel, err := setup.Start(ctx, "consumer", setup.WithoutGlobal())
	if err != nil {
		return err
	}
	defer tel.Shutdown(ctx)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	locks, err := lock.New(rdb, lock.WithTracerProvider(tel.TracerProvider))
	if err != nil {
		return err
	}
	defer locks.Close()
	lease, err := locks.Mutex("consumer:payout").Acquire(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	fmt.Println("lock token:", lease.Fence().Token)
	if err := lease.Release(ctx); err != nil {
		return err
	}

	inv, err := stock.New(rdb)
	if err != nil {
		return err
	}
	defer inv.Close()
	if err := inv.Create(ctx, "shop-7/sku-1", 3); err != nil {
		return fmt.Errorf("stock: %w", err)
	}
	res, err := inv.Deduct(ctx, stock.Order{ID: "order-1", Buyer: "alice", Items: []stock.Item{{SKU: "shop-7/sku-1", Qty: 2}}})
	if err != nil {
		return fmt.Errorf("stock: %w", err)
	}
	fmt.Println("stock available:", res.Levels["shop-7/sku-1"].Available)

	led, err := wallet.New(rdb)
	if err != nil {
		return err
	}
	defer led.Close()
	if err := led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY")); err != nil {
		return fmt.Errorf("wallet: %w", err)
	}
	wr, err := led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
	if err != nil {
		return fmt.Errorf("wallet: %w", err)
	}
	fmt.Println("wallet posted:", wr.Balance.Posted)

	seq, err := idgen.NewSequence(rdb, "orders")
	if err != nil {
		return fmt.Errorf("idgen: %w", err)
	}
	a, err := seq.Next(ctx)
	if err != nil {
		return fmt.Errorf("idgen: %w", err)
	}
	b, err := seq.Next(ctx)
	if err != nil {
		return fmt.Errorf("idgen: %w", err)
	}
	fmt.Println("ids increase:", b > a)
	return nil
}
`

const consumerLock = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Args[1]})
	locks, err := lock.New(rdb)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	lease, err := locks.Mutex("consumer:lock-only").Acquire(ctx)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("lock token:", lease.Fence().Token)
	_ = lease.Release(ctx)
	locks.Close()
	fmt.Println("ok")
}
`

// wantAll is what consumerAll prints against an empty Redis.
const wantAll = "lock token: 1\nstock available: 1\nwallet posted: 5000\nids increase: true\nok\n"

// ProofReport is what a proof saw.
type ProofReport struct {
	Versions   map[string]string // module path -> version the consumer resolved
	LockOnly   []string          // modules providing packages to a lock-only build
	LockLatest string            // the version lock@latest resolved to
}

// Proof builds and runs the consumer programs against the stage's modules
// and a redis-server on a free loopback port, all inside dir (which must
// be outside any Go workspace). It fails when a consumer cannot resolve a
// released module, when a program does not build or does not print what a
// working library prints, or when a lock-only consumer's build holds a
// test-only module.
func (st *Stage) Proof(ctx context.Context, dir string) (*ProofReport, error) {
	env, err := st.GoEnv(dir)
	if err != nil {
		return nil, err
	}
	addr, stop, err := StartRedis(ctx, filepath.Join(dir, "redis"))
	if err != nil {
		return nil, err
	}
	defer stop()
	rep := &ProofReport{Versions: map[string]string{}}

	// lock alone first, as the README says (@latest): the quickest check,
	// and the one that fails when lock's go.mod names a sibling version
	// that does not exist (a consumer of several modules can mask that,
	// since minimal version selection takes the highest required version).
	lockSet := st.Repo.Versions.SetOf("github.com/redkit-go/redkit/lock")
	if lockSet == nil {
		return nil, fmt.Errorf("versions.yaml releases no lock")
	}
	lockWant := lockSet.Version
	lo := filepath.Join(dir, "lockonly")
	if err := newConsumer(ctx, env, lo, consumerLock, []string{"github.com/redkit-go/redkit/lock@latest"}); err != nil {
		return rep, err
	}
	v, err := run(ctx, env, lo, "go", "list", "-m", "-f", "{{.Version}}", "github.com/redkit-go/redkit/lock")
	if err != nil {
		return rep, err
	}
	rep.LockLatest = strings.TrimSpace(v)
	if rep.LockLatest != lockWant {
		return rep, fmt.Errorf("lock@latest resolved to %s, want %s", rep.LockLatest, lockWant)
	}
	deps, err := run(ctx, env, lo, "go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
	if err != nil {
		return rep, err
	}
	seen := map[string]bool{}
	for _, l := range strings.Fields(deps) {
		if !seen[l] {
			seen[l] = true
			rep.LockOnly = append(rep.LockOnly, l)
		}
	}
	sort.Strings(rep.LockOnly)
	if bad := TestOnlyIn(rep.LockOnly); len(bad) > 0 {
		return rep, fmt.Errorf("a lock-only consumer builds test-only modules: %s", strings.Join(bad, ", "))
	}
	if got, err := buildAndRun(ctx, env, lo, addr); err != nil {
		return rep, err
	} else if !strings.HasSuffix(got, "ok\n") {
		return rep, fmt.Errorf("lock-only consumer printed:\n%s", got)
	}
	// Every released library module, by explicit version.
	all := filepath.Join(dir, "consumer")
	var gets []string
	want := map[string]string{}
	for _, p := range []string{"lock", "stock", "wallet", "idgen", "otelx/setup"} {
		path := "github.com/redkit-go/redkit/" + p
		s := st.Repo.Versions.SetOf(path)
		if s == nil {
			return nil, fmt.Errorf("versions.yaml releases no %s", path)
		}
		gets = append(gets, path+"@"+s.Version)
		want[path] = s.Version
	}
	if err := newConsumer(ctx, env, all, consumerAll, gets); err != nil {
		return nil, err
	}
	out, err := run(ctx, env, all, "go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if p, v, ok := strings.Cut(l, " "); ok && strings.HasPrefix(p, "github.com/redkit-go/redkit/") {
			rep.Versions[p] = v
		}
	}
	for p, v := range want {
		if rep.Versions[p] != v {
			return rep, fmt.Errorf("consumer resolved %s@%s, want %s", p, rep.Versions[p], v)
		}
	}
	got, err := buildAndRun(ctx, env, all, addr)
	if err != nil {
		return rep, err
	}
	if got != wantAll {
		return rep, fmt.Errorf("consumer printed:\n%s\nwant:\n%s", got, wantAll)
	}
	if err := st.proveTemplates(ctx, env, dir, addr); err != nil {
		return rep, err
	}
	return rep, nil
}

// Templates are the example services a user copies out of the repository;
// each must build on its own from released modules.
var Templates = []string{"flashsale", "wallet", "idservice"}

// proveTemplates copies each template, tests included, into a module of
// its own, resolves its imports from the stage (examples/kit at its set's
// version) and builds it and its tests; the flash sale then runs against
// addr. A template that imported a package of the examples module, or an
// internal package, would not build here.
func (st *Stage) proveTemplates(ctx context.Context, env []string, dir, addr string) error {
	kit := "github.com/redkit-go/redkit/examples/kit"
	s := st.Repo.Versions.SetOf(kit)
	if s == nil {
		return fmt.Errorf("versions.yaml releases no %s", kit)
	}
	for _, name := range Templates {
		dst := filepath.Join(dir, "template-"+name)
		if err := os.CopyFS(dst, os.DirFS(filepath.Join(st.Repo.Root, "examples", name))); err != nil {
			return err
		}
		if _, err := run(ctx, env, dst, "go", "mod", "init", "example.com/"+name); err != nil {
			return err
		}
		if _, err := run(ctx, env, dst, "go", "get", kit+"@"+s.Version); err != nil {
			return err
		}
		if _, err := run(ctx, env, dst, "go", "mod", "tidy"); err != nil {
			return err
		}
		if _, err := run(ctx, env, dst, "go", "vet", "."); err != nil {
			return fmt.Errorf("template %s copied out of the repository: %w", name, err)
		}
		bin := filepath.Join(dst, name+".bin")
		if _, err := run(ctx, env, dst, "go", "build", "-o", bin, "."); err != nil {
			return fmt.Errorf("template %s copied out of the repository: %w", name, err)
		}
		if name == "flashsale" {
			runEnv := append(env[:len(env):len(env)], "REDIS_URL=redis://"+addr)
			if out, err := run(ctx, runEnv, dst, bin); err != nil {
				return fmt.Errorf("template %s copied out of the repository: %w\n%s", name, err, out)
			}
		}
	}
	return nil
}

// TestOnlyIn returns the module paths in mods that TestOnly names.
func TestOnlyIn(mods []string) []string {
	var bad []string
	for _, m := range mods {
		for _, t := range TestOnly {
			if m == t || strings.HasPrefix(m, t+"/") {
				bad = append(bad, m)
				break
			}
		}
	}
	return bad
}

func newConsumer(ctx context.Context, env []string, dir, src string, gets []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	if _, err := run(ctx, env, dir, "go", "mod", "init", "example.com/"+filepath.Base(dir)); err != nil {
		return err
	}
	if _, err := run(ctx, env, dir, "go", append([]string{"get"}, gets...)...); err != nil {
		return err
	}
	_, err := run(ctx, env, dir, "go", "mod", "tidy")
	return err
}

func buildAndRun(ctx context.Context, env []string, dir, addr string) (string, error) {
	bin := filepath.Join(dir, "consumer.bin")
	if _, err := run(ctx, env, dir, "go", "build", "-o", bin, "."); err != nil {
		return "", err
	}
	return run(ctx, env, dir, bin, addr)
}

func run(ctx context.Context, env []string, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if Verbose {
		fmt.Fprintf(os.Stderr, "%s: %s %s (%.1fs)\n", filepath.Base(dir), filepath.Base(name), strings.Join(args, " "), time.Since(start).Seconds())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s (in %s): %w\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// StartRedis starts redis-server on a free loopback port with its files
// in dir, and returns its address and a function that stops it.
func StartRedis(ctx context.Context, dir string) (addr string, stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		addr = "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "yes", "--daemonize", "no")
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("redis-server: %w", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		stop = func() {
			_ = cmd.Process.Kill()
			<-done
		}
		// Wait until it answers (or exits: another process took the port).
		for {
			select {
			case <-done:
				lastErr = fmt.Errorf("redis-server exited: %s", logs.String())
			case <-ctx.Done():
				stop()
				return "", nil, ctx.Err()
			default:
				if c, derr := net.Dial("tcp", addr); derr == nil {
					c.Close()
					return addr, stop, nil
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			break
		}
	}
	return "", nil, lastErr
}
