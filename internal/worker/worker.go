// Package worker owns background goroutines: it starts them with a context
// that ends when their owner stops them, and lets the owner wait for them,
// so a Close returns only once nothing it started still runs.
package worker

import (
	"context"
	"sync"
)

// Worker owns the background goroutines of one component. The zero value
// is ready; a Worker must not be copied after first use. Its methods are
// safe for concurrent use, and Start, Go and Done also from inside the
// goroutines it runs.
type Worker struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	started bool // Start ran its fn
	stopped bool
	wg      sync.WaitGroup
}

// init creates the context on first use. Called with w.mu.
func (w *Worker) init() {
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	}
}

// Start runs fn in a new goroutine the first time it is called, unless Stop
// was called first, and reports whether it did; later calls do nothing. fn
// gets a context that Stop cancels.
func (w *Worker) Start(fn func(ctx context.Context)) (started bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return false
	}
	w.started = true
	w.goLocked(fn)
	return true
}

// Go runs fn in a new goroutine, alongside any others, unless Stop was
// called, and reports whether it did. fn gets a context that Stop cancels.
func (w *Worker) Go(fn func(ctx context.Context)) (started bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.goLocked(fn)
	return true
}

func (w *Worker) goLocked(fn func(ctx context.Context)) {
	w.init()
	ctx := w.ctx
	w.wg.Go(func() { fn(ctx) })
}

// Stop cancels the context of every goroutine the Worker started and waits
// until they have all returned. Nothing starts after it. Calling it again,
// or concurrently, is safe: each call waits. It must not be called from a
// goroutine the Worker runs, which it would wait for.
func (w *Worker) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.init()
	w.cancel()
	w.mu.Unlock()
	w.wg.Wait()
}

// Done returns a channel that is closed when Stop is called.
func (w *Worker) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	return w.ctx.Done()
}
