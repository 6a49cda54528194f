package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redkit-go/redkit/examples/kit/httpx"
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
