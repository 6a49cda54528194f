package lock

import (
	"context"
	"time"
)

// Hooks for the tests in package lock_test.

// AttemptAs runs one acquire attempt with the given owner ID, as a re-sent
// acquire would.
func (m *Mutex) AttemptAs(ctx context.Context, owner string) (*Lease, time.Duration, error) {
	return m.r.attempt(ctx, owner, modeTry)
}

// ReleaseAs runs the release script for owner, as the first send of a
// release would: 1 released, 0 expired, 2 taken.
func (m *Mutex) ReleaseAs(ctx context.Context, owner string) (int64, error) {
	status, _, _, err := m.r.release(ctx, owner, 0)
	return status, err
}

// ResendRelease sends l's release again, as a retry after an earlier send
// of the same release (one whose reply was lost), and decides it as
// Lease.Release does: 1 released, 0 expired, 2 taken.
func (m *Mutex) ResendRelease(ctx context.Context, l *Lease) (int64, error) {
	status, _, answered, err := m.r.release(ctx, l.owner, l.token)
	return releaseStatus(status, answered.Before(l.Until()), true), err
}

// HashSlot is the Redis Cluster slot of a hash tag.
func HashSlot(tag string) int { return hashSlot(tag) }

// ExtendAs runs the extend script for owner: 1 extended, 0 expired, 2 taken.
func (m *Mutex) ExtendAs(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	return m.r.extend(ctx, owner, ttl)
}

func (m *Mutex) LockKey() string    { return m.r.key }
func (m *Mutex) CounterKey() string { return m.r.acquireKeys[1] }
func (m *Mutex) Channel() string    { return m.r.channel }
func (l *Lease) Owner() string      { return l.owner }

func NewOwner() string { return newOwner() }

// SetBeforeSubscribe sets a function Acquire calls after its first failed
// attempt, before it subscribes to release notifications.
func (c *Client) SetBeforeSubscribe(f func()) { c.beforeSubscribe = f }

func (m *RWMutex) Channel() string { return m.w.channel }

// EnqueueAs runs a waiting acquire attempt for owner: in fair mode it joins
// the queue and then never heartbeats, like a crashed waiter.
func (m *Mutex) EnqueueAs(ctx context.Context, owner string) (*Lease, time.Duration, error) {
	return m.r.attempt(ctx, owner, modeWait)
}

func (m *Mutex) QueueKey() string { return m.r.acquireKeys[2] }

// Waiters returns how many local waiters wait on m's channel.
func (c *Client) Waiters(m *Mutex) int {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if st := c.hub.chans[m.r.channel]; st != nil {
		return len(st.waiters)
	}
	return 0
}

// ScriptSource returns the source Redis runs for the mutex's release script.
func (m *Mutex) ReleaseSource() string { return m.r.kind.release.Source() }
