package lock

import (
	"context"

	"github.com/redkit-go/redkit/internal/keys"
)

var (
	rwWriterKind = &kind{
		acquire:   lockScript("rw_acquire_w.lua"),
		extend:    extendScript,
		release:   lockScript("rw_release_w.lua"),
		withdraw:  true,
		broadcast: true,
	}
	rwReaderKind = &kind{
		acquire:   lockScript("rw_acquire_r.lua"),
		extend:    semaphoreKind.extend,
		release:   semaphoreKind.release,
		broadcast: true,
	}
)

// RWMutex is a named readers–writer lock: any number of readers, or one
// writer. It prefers writers: once a writer waits, new readers wait too, so
// a steady stream of readers cannot starve writers. Write leases carry
// fencing tokens (strictly increasing per name, like a Mutex's); read leases
// carry none (Token 0). Leases have the Mutex lease lifecycle.
type RWMutex struct{ w, r *resource }

// RWMutex returns the readers–writer lock called name (same grammar as
// Mutex names; a separate lock from a Mutex of the same name). Options as
// for Mutex.
func (c *Client) RWMutex(name string, opts ...Option) *RWMutex {
	w := c.resource(rwWriterKind, "rw", name, opts)
	r := c.resource(rwReaderKind, "rwr", name, opts)
	if w.err == nil {
		g := keys.Group(name)
		mark := c.space.Key(g, "rww", name)
		// The writer's fence counter is the Mutex's of the same name: both
		// hand out fences named name, so a resource fenced by both sees
		// one strictly increasing sequence.
		counter := c.counterKey(g)
		w.acquireKeys = []string{w.key, r.key, mark, counter}
		w.releaseKeys = []string{w.key, counter, mark}
		r.acquireKeys = []string{r.key, w.key, mark}
		// A read lease's release publishes while a writer waits (its mark
		// exists): readers never wait for readers.
		r.releaseKeys = []string{r.key, mark}
		r.channel, r.channelArg = w.channel, w.channelArg
	}
	return &RWMutex{w: w, r: r}
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.w.name }

// TryAcquire takes the lock for writing if nobody holds it, and returns
// ErrNotAcquired at once otherwise.
func (m *RWMutex) TryAcquire(ctx context.Context) (*Lease, error) { return m.w.tryAcquire(ctx) }

// Acquire takes the lock for writing, waiting until the writer and all
// readers have released it (or their leases expired) or ctx ends. While it
// waits, new readers wait too.
func (m *RWMutex) Acquire(ctx context.Context) (*Lease, error) { return m.w.acquire(ctx) }

// TryAcquireRead takes the lock for reading unless a writer holds it or
// waits for it, and returns ErrNotAcquired at once otherwise.
func (m *RWMutex) TryAcquireRead(ctx context.Context) (*Lease, error) { return m.r.tryAcquire(ctx) }

// AcquireRead takes the lock for reading, waiting while a writer holds it or
// waits for it, until ctx ends.
func (m *RWMutex) AcquireRead(ctx context.Context) (*Lease, error) { return m.r.acquire(ctx) }
