package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is one kind of failure the controller can inject.
type Fault struct {
	Name string
	// Durable says the modules promise that every acknowledged write
	// survives this fault, so a lost acknowledged write fails the test.
	Durable bool
	// Blur says a node that stops being primary may still answer reads
	// around the fault; such reads are not checked (History.Blur).
	Blur bool
	// Hold is how long the fault lasts before it is ended.
	Hold time.Duration
	// Start begins the fault and returns the function that ends it.
	Start func(ctx context.Context) (end func(context.Context) error, err error)
}

// Progress tells the controller when a workload works again after a fault:
// the first operation issued after the fault ended that succeeded.
type Progress struct {
	mu        sync.Mutex
	mark      time.Time
	recovered time.Time
}

// OK records a successful operation called at call.
func (p *Progress) OK(call time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mark.IsZero() && p.recovered.IsZero() && !call.Before(p.mark) {
		p.recovered = time.Now()
	}
}

func (p *Progress) arm(t time.Time) {
	p.mu.Lock()
	p.mark, p.recovered = t, time.Time{}
	p.mu.Unlock()
}

func (p *Progress) since() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recovered.IsZero() {
		return 0, false
	}
	return p.recovered.Sub(p.mark), true
}

// Injection is one fault as it happened.
type Injection struct {
	Fault      Fault
	Start, End int64 // history clock: fault begun, fault ended
	// Recovery is, per workload, the time from the end of the fault to the
	// completion of the first operation issued after it that succeeded;
	// missing when none did before the next fault or the end of the run.
	Recovery map[string]time.Duration
	// Cut says the run ended before every workload recovered: a missing
	// recovery then means nothing.
	Cut bool
	Err error
}

// controller injects one fault at a time, in random order, with quiet
// periods in between, until stop is closed.
type controller struct {
	faults   []Fault
	rng      *rand.Rand
	clock    func() int64
	blur     func(from, to int64)
	progress map[string]*Progress
	quiet    [2]time.Duration
	limit    int // most faults to inject; 0: no limit
	done     atomic.Int64
	finished atomic.Bool
}

// waiting reports whether fewer than n faults were injected and recovered
// from while the controller still runs.
func (c *controller) waiting(n int) bool { return int(c.done.Load()) < n && !c.finished.Load() }

func (c *controller) run(ctx context.Context, stop <-chan struct{}) []Injection {
	defer c.finished.Store(true)
	var out []Injection
	order := c.rng.Perm(len(c.faults))
	for i := 0; c.limit == 0 || i < c.limit; i++ {
		if i%len(order) == 0 && i > 0 {
			order = c.rng.Perm(len(c.faults))
		}
		if !c.sleep(ctx, stop, c.quiet[0]+time.Duration(c.rng.Int64N(int64(c.quiet[1]-c.quiet[0])+1))) {
			return out
		}
		f := c.faults[order[i%len(order)]]
		inj := Injection{Fault: f, Start: c.clock(), Recovery: map[string]time.Duration{}}
		end, err := f.Start(ctx)
		if err == nil {
			time.Sleep(f.Hold)
			ended := time.Now()
			inj.End = c.clock()
			for _, p := range c.progress {
				p.arm(ended)
			}
			err = end(ctx)
		}
		if err != nil {
			inj.Err = fmt.Errorf("fault %q: %w", f.Name, err)
			out = append(out, inj)
			return out
		}
		// Wait until every workload has done something again (or stops).
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			done := true
			for name, p := range c.progress {
				if d, ok := p.since(); ok {
					inj.Recovery[name] = d
				} else {
					done = false
				}
			}
			if done {
				break
			}
			if !c.sleep(ctx, stop, 5*time.Millisecond) {
				inj.Cut = true
				break
			}
		}
		if f.Blur {
			c.blur(inj.Start-int64(ReadTimeout), c.clock()+int64(ReadTimeout))
		}
		out = append(out, inj)
		c.done.Add(1)
	}
	return out
}

// during runs work(0) to work(n-1) on n goroutines while the controller
// injects its faults, stops it when they return, and returns the
// injections, failing tb on any that went wrong.
func (c *controller) during(tb testing.TB, n int, work func(i int)) []Injection {
	stop := make(chan struct{})
	var injections []Injection
	var faults sync.WaitGroup
	if len(c.faults) > 0 {
		faults.Go(func() { injections = c.run(tb.Context(), stop) })
	}
	var workers sync.WaitGroup
	for i := range n {
		workers.Go(func() { work(i) })
	}
	workers.Wait()
	close(stop)
	faults.Wait()
	for _, inj := range injections {
		if inj.Err != nil {
			tb.Errorf("%v", inj.Err)
		}
	}
	return injections
}

// sleep waits d and reports whether to go on.
func (c *controller) sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
