package lock

import (
	"cmp"
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/worker"
	"github.com/redkit-go/redkit/otelx"
	"go.opentelemetry.io/otel/trace"
)

// renewer is a Client's watchdog: one goroutine, running only while some
// lease needs renewing, that renews every lease at TTL/3. Leases that fall
// due together are renewed together: one extend script per slot group, all
// groups in one pipeline, so a process holding many locks pays one round
// trip per round of renewals, not one per lock.
type renewer struct {
	c *Client

	mu      sync.Mutex
	queue   leaseHeap
	running bool      // a loop runs; it clears this, under mu, as it decides to return
	armed   time.Time // when the sleeping loop wakes next; zero while it runs
	wake    chan struct{}
	w       worker.Worker
}

func newRenewer(c *Client) *renewer {
	return &renewer{c: c, wake: make(chan struct{}, 1)}
}

func interval(l *Lease) time.Duration { return l.r.cfg.ttl / 3 }

func (r *renewer) add(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.stopped {
		return
	}
	l.next = l.acquired.Add(interval(l))
	switch {
	case !r.running:
		if !r.w.Go(r.loop) {
			return // closed
		}
		r.running = true
	case !r.armed.IsZero() && l.next.Before(r.armed):
		select { // the loop sleeps past this lease's renewal: wake it
		case r.wake <- struct{}{}:
		default:
		}
	}
	heap.Push(&r.queue, l)
}

// remove stops renewing l; a renewal of l in flight is not waited for.
func (r *renewer) remove(l *Lease) {
	r.mu.Lock()
	l.stopped = true
	if l.index >= 0 {
		heap.Remove(&r.queue, l.index)
	}
	r.mu.Unlock()
}

// close stops the goroutine and waits for it; a renewal in flight is
// waited for, not cancelled.
func (r *renewer) close() { r.w.Stop() }

// loop renews leases as they fall due until the queue is empty or ctx,
// which close cancels, ends.
func (r *renewer) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if ctx.Err() != nil || len(r.queue) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		now := time.Now()
		if d := r.queue[0].next.Sub(now); d > 0 {
			r.armed = r.queue[0].next
			r.mu.Unlock()
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-r.wake:
			case <-ctx.Done():
			}
			r.mu.Lock()
			r.armed = time.Time{}
			r.mu.Unlock()
			continue
		}
		// Renew everything due within half an interval along with it.
		var batch []*Lease
		for len(r.queue) > 0 && !r.queue[0].next.After(now.Add(interval(r.queue[0])/2)) {
			l := heap.Pop(&r.queue).(*Lease)
			batch = append(batch, l)
		}
		r.mu.Unlock()

		retry := r.renew(batch)

		r.mu.Lock()
		now = time.Now()
		for _, l := range batch {
			if l.stopped || l.ctx.Err() != nil || !retry[l] && l.next.IsZero() {
				continue
			}
			if retry[l] {
				// Redis unreachable or slow: try again soon; the local
				// deadline ends the lease if nothing gets through in time.
				l.next = now.Add(max(interval(l)/4, time.Millisecond))
			}
			heap.Push(&r.queue, l)
		}
		r.mu.Unlock()
	}
}

// renew sends one pipeline of extend scripts, one per slot group, and
// applies the outcomes. It sets l.next for leases to renew again (the zero
// time for leases that must not be renewed any more) and returns the leases
// whose renewal failed.
func (r *renewer) renew(batch []*Lease) map[*Lease]bool {
	type group struct {
		leases []*Lease
		sends  []*ttlSend
		call   script.Call
	}
	start := time.Now()
	type groupKey struct {
		kind  *kind
		group string
	}
	groups := map[groupKey]*group{}
	var order []*group
	deadline := time.Time{}
	failed := map[*Lease]bool{}
	for _, l := range batch {
		ttl, ok := l.renewTTL(start)
		if !ok || l.ctx.Err() != nil {
			l.next = time.Time{} // WithMaxHold reached: let the lease run out
			continue
		}
		l.next = start.Add(interval(l))
		if l.r.peers != nil {
			// Redlock: one call per master, not batched.
			if err := l.renew(context.Background(), ttl); err != nil && l.ctx.Err() == nil {
				failed[l] = true
			}
			continue
		}
		gk := groupKey{l.r.kind, keys.Group(l.r.name)}
		g := groups[gk]
		if g == nil {
			g = &group{call: script.Call{Script: l.r.kind.extend}}
			groups[gk] = g
			order = append(order, g)
		}
		g.leases = append(g.leases, l)
		g.sends = append(g.sends, l.sending(ttl, start))
		g.call.Keys = append(g.call.Keys, l.r.key)
		g.call.Args = append(g.call.Args, l.owner, ttl.Milliseconds())
		if until := l.Until(); deadline.IsZero() || until.Before(deadline) {
			deadline = until
		}
	}
	if len(order) == 0 {
		return failed
	}
	calls := make([]script.Call, len(order))
	for i, g := range order {
		calls[i] = g.call
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var causes []trace.SpanContext
	for _, g := range order {
		for _, l := range g.leases {
			causes = append(causes, l.cause)
		}
	}
	ctx, span := r.c.tel.startRenewal(ctx, causes)
	cmds := script.Pipeline(ctx, r.c.rdb, calls)
	replies := make([][]int64, len(order))
	errs := make([]error, len(order))
	var (
		perr     error
		outcomes []string
	)
	for i, g := range order {
		replies[i], errs[i] = cmds[i].Int64Slice()
		if errs[i] == nil && len(replies[i]) != len(g.leases) {
			errs[i] = errUnexpectedReply
		}
		if errs[i] != nil {
			perr = cmp.Or(perr, errs[i])
			outcomes = append(outcomes, outcomeError)
			continue
		}
		for _, status := range replies[i] {
			outcomes = append(outcomes, renewOutcome(status, nil))
		}
	}
	otelx.End(span, roundOutcome(outcomes), perr)
	for i, g := range order {
		for j, l := range g.leases {
			var status int64
			if errs[i] == nil {
				status = replies[i][j]
			}
			if l.renewed(g.sends[j], status, errs[i]) != nil && errs[i] != nil {
				failed[l] = true
			}
		}
	}
	return failed
}

// leaseHeap orders leases by their next renewal.
type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}
