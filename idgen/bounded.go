package idgen

import (
	"context"
	"fmt"
	"sync/atomic"
)

// bounded runs f, a Redis call, in a goroutine of its own and returns its
// result, or an error wrapping ctx's as soon as ctx ends, whichever comes
// first. go-redis bounds a socket read by the client's ReadTimeout, not by
// ctx's deadline, unless the client was built with ContextTimeoutEnabled: on
// a frozen server (a stopped process, a lost reply) the call itself would
// hold its caller for ReadTimeout, or for ever with ReadTimeout -1, whatever
// the caller's deadline.
//
// An abandoned call goes on until go-redis returns; then late, when not nil,
// gets its result (and no one else does), and bounded reports abandoned. Every Redis call of this package
// may be abandoned: a reservation or lease whose reply nobody waits for only
// skips values or holds a node until late gives it back or its TTL ends.
func bounded[T any](ctx context.Context, f func(context.Context) (T, error), late func(T, error)) (v T, abandoned bool, err error) {
	if ctx.Done() == nil {
		v, err = f(ctx)
		return v, false, err
	}
	type result struct {
		v   T
		err error
	}
	const (
		waiting = iota
		delivered
		givenUp
	)
	var state atomic.Int32
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		if state.CompareAndSwap(waiting, delivered) {
			ch <- result{v, err}
			return
		}
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, false, r.err
	case <-ctx.Done():
		if !state.CompareAndSwap(waiting, givenUp) {
			r := <-ch // f has returned; its result is on its way
			return r.v, false, r.err
		}
		return v, true, fmt.Errorf("idgen: no reply from Redis: %w", ctx.Err())
	}
}
