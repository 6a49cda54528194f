package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/internal/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Stop cancels fn's context and returns only after fn has returned.
func TestWorker_stopWaits(t *testing.T) {
	var w worker.Worker
	var returned atomic.Bool
	running := make(chan struct{})
	require.True(t, w.Start(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // slow to wind down
		returned.Store(true)
	}))
	<-running
	w.Stop()
	require.True(t, returned.Load(), "Stop returned before fn did")
	goleak.VerifyNone(t)
}

// Stop waits for every goroutine started by Go, also those started by
// another one of them.
func TestWorker_stopWaitsForGo(t *testing.T) {
	var w worker.Worker
	var returned atomic.Int32
	var up sync.WaitGroup
	up.Add(3)
	slow := func(ctx context.Context) {
		up.Done()
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		returned.Add(1)
	}
	require.True(t, w.Go(slow))
	require.True(t, w.Go(func(ctx context.Context) {
		if !w.Go(slow) {
			t.Error("Go from a running goroutine refused")
		}
		slow(ctx)
	}))
	up.Wait()
	w.Stop()
	require.Equal(t, int32(3), returned.Load(), "Stop returned before every goroutine did")
	goleak.VerifyNone(t)
}

// Start, and Go, after Stop run nothing and report false.
func TestWorker_nothingAfterStop(t *testing.T) {
	var w worker.Worker
	w.Stop() // never started: nothing to wait for
	var ran atomic.Bool
	fn := func(context.Context) { ran.Store(true) }
	require.False(t, w.Start(fn))
	require.False(t, w.Go(fn))
	w.Stop()
	time.Sleep(20 * time.Millisecond)
	require.False(t, ran.Load(), "fn ran after Stop")
	goleak.VerifyNone(t)
}

// Start runs fn once, however many calls race, and not again after fn
// returned.
func TestWorker_startOnce(t *testing.T) {
	var w worker.Worker
	var runs atomic.Int32
	fn := func(ctx context.Context) {
		runs.Add(1)
		<-ctx.Done()
	}
	var wg sync.WaitGroup
	var won atomic.Int32
	for range 50 {
		wg.Go(func() {
			if w.Start(fn) {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	w.Stop()
	require.Equal(t, int32(1), runs.Load(), "fn ran more than once")
	require.Equal(t, int32(1), won.Load(), "more than one Start reported true")

	var w2 worker.Worker
	done := make(chan struct{})
	require.True(t, w2.Start(func(context.Context) { close(done) }))
	<-done
	require.False(t, w2.Start(func(context.Context) { t.Error("second Start ran fn") }))
	w2.Stop()
	goleak.VerifyNone(t)
}

// Go runs each fn, concurrently.
func TestWorker_goRunsEach(t *testing.T) {
	var w worker.Worker
	var all sync.WaitGroup
	all.Add(3)
	for range 3 {
		require.True(t, w.Go(func(ctx context.Context) {
			all.Done()
			<-ctx.Done()
		}))
	}
	all.Wait() // all three run at once, or this never returns
	w.Stop()
	goleak.VerifyNone(t)
}

// Concurrent Stops all wait; Done is closed by Stop and is the context's.
func TestWorker_concurrentStopAndDone(t *testing.T) {
	var w worker.Worker
	done := w.Done()
	select {
	case <-done:
		t.Fatal("Done closed before Stop")
	default:
	}
	var returned atomic.Bool
	var gotCtx context.Context
	running := make(chan struct{})
	w.Start(func(ctx context.Context) {
		gotCtx = ctx
		close(running)
		<-ctx.Done()
		time.Sleep(30 * time.Millisecond)
		returned.Store(true)
	})
	<-running
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			w.Stop()
			if !returned.Load() {
				t.Error("a concurrent Stop returned before fn did")
			}
		})
	}
	wg.Wait()
	<-done
	require.ErrorIs(t, gotCtx.Err(), context.Canceled)
	require.Equal(t, done, w.Done())
	goleak.VerifyNone(t)
}
