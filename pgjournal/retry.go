package pgjournal

import (
	"context"
	"errors"
	"time"
)

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

type backoffNS struct{}

// backoff.Permanent marks an error the sinks do not retry.
var backoff backoffNS

func (backoffNS) Permanent(err error) error { return permanent{err} }

// retry runs f until ctx ends or f fails with a permanent error, waiting
// between failures (50ms doubling up to the configured maximum; a run that
// lasted longer than the wait starts again from 50ms).
func (b *Book) retry(ctx context.Context, f func() error) error {
	wait := 50 * time.Millisecond
	for {
		start := time.Now()
		err := f()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var p permanent
		if errors.As(err, &p) {
			return p.err
		}
		if err != nil {
			b.cfg.onError(err)
		}
		if time.Since(start) > wait {
			wait = 50 * time.Millisecond
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, b.cfg.backoff)
	}
}
