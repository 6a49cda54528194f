package lock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redkit-go/redkit/internal/keys"
)

var (
	semaphoreKind = &kind{
		acquire: lockScript("sem_acquire.lua"),
		extend:  lockScript("sem_extend.lua"),
		release: lockScript("sem_release.lua"),
	}
)

// MaxPermits bounds the permits of a Semaphore.
const MaxPermits = 1_000_000

// Semaphore lets up to a fixed number of owners hold it at once. Each permit
// is a Lease with the same lifecycle as a mutex lease — an owner ID, a TTL,
// the watchdog, a Context cancelled on loss, Release — so a permit whose
// holder dies is freed when its TTL runs out. Permits carry no fencing token
// (Fence().Token is 0): a semaphore does not exclude, so there is no order
// to fence by.
//
// Every user of one name must pass the same number of permits: the number
// is checked against the live permits at each acquire, not stored.
type Semaphore struct{ r *resource }

// Semaphore returns the semaphore called name (same grammar as Mutex names)
// with permits permits (1..MaxPermits). Options as for Mutex. An invalid
// name, permit count or option is returned by Acquire and TryAcquire.
func (c *Client) Semaphore(name string, permits int, opts ...Option) *Semaphore {
	r := c.resource(semaphoreKind, "sem", name, opts)
	if r.err == nil && (permits < 1 || permits > MaxPermits) {
		r.err = fmt.Errorf("%w: semaphore permits %d outside 1..%d", ErrInvalid, permits, MaxPermits)
	}
	r.extraArgs = []any{strconv.Itoa(permits)}
	if r.err == nil {
		// The waited-for mark: a release publishes only while it exists.
		mark := c.space.Key(keys.Group(name), "semw", name)
		r.acquireKeys = append(r.acquireKeys, mark)
		r.releaseKeys = append(r.releaseKeys, mark)
	}
	return &Semaphore{r: r}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.r.name }

// TryAcquire takes a permit if one is free and returns ErrNotAcquired at
// once otherwise. One round trip.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) { return s.r.tryAcquire(ctx) }

// Acquire takes a permit, waiting until one is free or ctx ends; it is woken
// by releases (one waiter per release in this process) and otherwise when
// the first held permit would expire. When ctx ends first the error matches
// both ErrNotAcquired and ctx.Err().
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) { return s.r.acquire(ctx) }
