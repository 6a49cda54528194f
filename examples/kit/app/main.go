package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/examples/kit/redisconn"
)

// ErrUsage reports bad flags or arguments; the program has already said
// why on stderr.
var ErrUsage = errors.New("usage")

// Main runs a command's run function with a context that ends on SIGINT or
// SIGTERM (a second signal kills the process at once), the command-line
// arguments, stdout and stderr, and exits: 0 on success or after -h, 2 on
// ErrUsage, 1 on any other error, which it prints as "name: error".
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // after the first signal, a second one kills at once
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, ErrUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, name+":", httpx.OnePrefix(err.Error()))
		os.Exit(1)
	}
}

// ParseFlags parses args with fs, which must have been made with
// flag.ContinueOnError, and refuses positional arguments. It returns
// flag.ErrHelp for -h and ErrUsage for anything wrong, after fs has said
// what on its output.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return ErrUsage
	}
	return nil
}

// UsageError says on fs's output that a flag's value is wrong (err says
// which and why) and returns ErrUsage.
func UsageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	return ErrUsage
}

// Launch is how a template starts once its flags are parsed: it serves
// HTTP on Serve, or, with Serve empty, does a run of its own (a simulated
// sale, a load test, a demo) and exits.
type Launch struct {
	Flags  *flag.FlagSet // parsed; its name is the service's
	Serve  string        // listen address; "" for the run of its own
	Server ServerConfig
	Scopes []string // every scope of the service's API keys; MetricsScope is added
	// CheckRun checks the settings of the run of its own; nil: none.
	CheckRun func() error
}

// Start handles -new-key (PrintNewKey), gets the API keys a service needs
// before it serves (Credentials) or has CheckRun check the run's settings
// (a failure is ErrUsage), and starts the App (Start) on the Redis that
// $REDIS_URL names, logging to stderr. edge is what the service's routes
// need (httpx.NewMux); the zero Edge when not serving.
//
// A nil App means the run is over: -new-key printed a key (err is nil), or
// err says why the service cannot start. Otherwise Close the App.
func (l Launch) Start(ctx context.Context, stdout, stderr io.Writer) (a *App, edge httpx.Edge, err error) {
	scopes := l.Scopes
	if !slices.Contains(scopes, MetricsScope) {
		scopes = append(slices.Clip(scopes), MetricsScope)
	}
	if done, err := PrintNewKey(l.Flags, l.Server, scopes, stdout); done {
		return nil, edge, err
	}
	if l.Serve != "" {
		if edge.Auth, err = Credentials(l.Serve, l.Server, scopes, stderr); err != nil {
			return nil, edge, err
		}
	} else if l.CheckRun != nil {
		if err := l.CheckRun(); err != nil {
			return nil, edge, UsageError(l.Flags, err)
		}
	}
	a, err = Start(ctx, l.Flags.Name(), os.Getenv(redisconn.Env), slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return nil, httpx.Edge{}, err
	}
	if l.Serve != "" {
		edge.Limit, edge.Log = a.RateLimit(l.Server), a.Log
	}
	return a, edge, nil
}

// Problems is what a run of its own returns after its checks: nil when
// they found no problem, otherwise an error that lists them.
func Problems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%d check(s) failed: %v", len(problems), problems)
}
