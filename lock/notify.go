package lock

import (
	"context"
	"crypto/subtle"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/worker"
)

// How long a waiter waits for the server to confirm its subscription before
// it goes on anyway (its wait is still capped by the holder's TTL).
const confirmWait = 2 * time.Second

// hub is a Client's release-notification subscriber: one pub/sub connection
// for a single server, one per slot (and primary) on a Cluster, started
// lazily. Per slot, not per primary: after a dropped connection go-redis
// re-sends every channel of a PubSub in one SSUBSCRIBE, which Redis refuses
// (CROSSSLOT) for channels of two slots, leaving all of them unsubscribed;
// and when a slot moves, the server drops its channels, which must not stay
// on a connection that other channels keep open. Each channel has a FIFO queue of local waiters; a
// release message wakes the first waiter that is not already awake, so a
// release costs this process at most one acquire attempt.
type hub struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient
	w       worker.Worker   // the receive loops and relocations
	done    <-chan struct{} // w's, closed by close

	mu     sync.Mutex
	closed bool
	conns  map[string]*subConn // by primary address and slot; "" for a single server
	chans  map[string]*chanState
}

type subConn struct {
	key     string
	addr    string // the primary it was opened to (Cluster)
	ps      *redis.PubSub
	started bool // the receive loop runs
	nchans  int
	unsubs  map[string]int // unsubscribe confirmations we still expect
}

type chanState struct {
	conn      *subConn
	confirmed chan struct{} // closed when the server confirmed the subscription
	isConf    bool
	broken    bool // its connection failed since: messages may have been lost
	broadcast bool // a message wakes every waiter
	waiters   []*waiter
	// orphans: owner IDs named by fair-mode messages that found no local
	// waiter yet (it was between its first attempt and join), by arrival.
	// A slice, not a map keyed by owner ID: see sameOwner.
	orphans []orphan
}

type orphan struct {
	owner string
	at    time.Time
}

type waiter struct {
	h       *hub
	channel string
	owner   string        // the owner ID a fair-mode release names
	wake    chan struct{} // one pending wake-up at most
}

func newHub(rdb redis.UniversalClient) *hub {
	h := &hub{
		rdb:   rdb,
		conns: make(map[string]*subConn),
		chans: make(map[string]*chanState),
	}
	h.cluster, _ = rdb.(*redis.ClusterClient)
	h.done = h.w.Done()
	return h
}

// listening returns a token for channel's subscription when it is
// confirmed now, and nil otherwise. Passed to join, it tells whether the
// subscription was in place the whole time since.
func (h *hub) listening(channel string) *chanState {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.chans[channel]; st != nil && st.isConf && st.conn != nil {
		return st
	}
	return nil
}

// join queues a waiter on channel and returns once the channel's
// subscription is confirmed (or confirmWait passed), so a release published
// after join returns wakes it. continuous reports that the subscription is
// still the one listening returned (not nil): every release since then has
// been delivered to this process's waiters.
func (h *hub) join(ctx context.Context, channel string, broadcast bool, owner string, since *chanState) (w *waiter, continuous bool, err error) {
	w = &waiter{h: h, channel: channel, owner: owner, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, false, ErrClosed
	}
	st := h.chans[channel]
	if st == nil {
		conn, err := h.connFor(ctx, channel)
		if err != nil {
			h.mu.Unlock()
			return nil, false, err
		}
		st = &chanState{conn: conn, confirmed: make(chan struct{}), broadcast: broadcast}
		if err := h.subscribe(ctx, conn, channel); err != nil {
			h.dropConnIfIdle(conn)
			h.mu.Unlock()
			return nil, false, err
		}
		h.chans[channel] = st
	}
	continuous = since != nil && st == since && st.isConf && st.conn != nil && !st.broken
	for i, o := range st.orphans {
		if sameOwner(o.owner, owner) {
			st.orphans = slices.Delete(st.orphans, i, i+1)
			w.wake <- struct{}{} // named by a release before it got here
			break
		}
	}
	st.waiters = append(st.waiters, w)
	confirmed := st.confirmed
	h.mu.Unlock()

	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-confirmed:
	case <-t.C:
	case <-ctx.Done():
		w.leave()
		return nil, false, ctx.Err()
	}
	return w, continuous, nil
}

// connFor returns the subscriber connection for channel. Called with h.mu.
func (h *hub) connFor(ctx context.Context, channel string) (*subConn, error) {
	key, addr := "", ""
	if h.cluster != nil {
		master, err := h.cluster.MasterForKey(ctx, channel)
		if err != nil {
			return nil, err
		}
		addr = master.Options().Addr
		key = addr + "#" + strconv.Itoa(hashSlot(channelTag(channel)))
	}
	if c := h.conns[key]; c != nil {
		return c, nil
	}
	c := &subConn{key: key, addr: addr, unsubs: make(map[string]int)}
	if h.cluster != nil {
		c.ps = h.cluster.SSubscribe(ctx)
	} else {
		c.ps = h.rdb.Subscribe(ctx)
	}
	h.conns[key] = c
	return c, nil
}

// subscribe adds channel to conn and starts conn's receive loop after the
// first subscription (a Cluster connection is routed by its first
// channel). Called with h.mu.
func (h *hub) subscribe(ctx context.Context, c *subConn, channel string) error {
	var err error
	if h.cluster != nil {
		err = c.ps.SSubscribe(ctx, channel)
	} else {
		err = c.ps.Subscribe(ctx, channel)
	}
	if err != nil {
		return err
	}
	c.nchans++
	if !c.started {
		c.started = h.w.Go(func(ctx context.Context) { h.receive(ctx, c) })
	}
	return nil
}

// dropConnIfIdle closes a Cluster connection without channels, which would
// otherwise reconnect to a random node. Called with h.mu.
func (h *hub) dropConnIfIdle(c *subConn) {
	if h.cluster == nil || c.nchans > 0 {
		return
	}
	delete(h.conns, c.key)
	_ = c.ps.Close()
}

// receive delivers the messages of one connection until it is closed; life,
// cancelled by close, ends its pause after a broken connection.
func (h *hub) receive(life context.Context, c *subConn) {
	ctx := context.Background()
	quiet := 0
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				// Nothing for a while: ping, so a dead connection is
				// noticed; after a ping went unanswered, wake everyone.
				quiet++
				if quiet > 1 {
					h.wakeAll(c)
				}
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = c.ps.Ping(pctx)
				cancel()
				continue
			}
			// The connection broke; go-redis reconnects and resubscribes on
			// the next receive (every channel of this slot in one
			// command). Messages may have been lost meanwhile. On a
			// Cluster the break may be a failover that go-redis's map
			// has not seen, or a master killed for good: the map is
			// reloaded first (retry.Reload, at once), so the reconnect
			// finds the slot's new primary instead of meeting MOVED on
			// the old one, or a refused dial on a dead one.
			h.wakeAll(c)
			retry.Reload(life, h.rdb)
			select {
			case <-life.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		quiet = 0
		switch msg := msg.(type) {
		case *redis.Message:
			h.wakeOne(msg.Channel, msg.Payload)
		case *redis.Subscription:
			h.subscription(c, msg)
		}
	}
}

func (h *hub) subscription(c *subConn, s *redis.Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.Kind == "unsubscribe" || s.Kind == "sunsubscribe" {
		if c.unsubs[s.Channel] > 0 {
			c.unsubs[s.Channel]--
			if c.unsubs[s.Channel] == 0 {
				delete(c.unsubs, s.Channel)
			}
			return // the confirmation of our own unsubscribe
		}
	}
	st := h.chans[s.Channel]
	if st == nil || st.conn != c {
		return
	}
	switch s.Kind {
	case "subscribe", "ssubscribe":
		if !st.isConf {
			st.isConf = true
			close(st.confirmed)
		}
	case "sunsubscribe":
		// The server dropped the subscription: the channel's slot now
		// lives on another shard. Wake the waiters, whose release message
		// may have been lost, and subscribe again where the slot lives now.
		h.wakeState(st)
		st.conn = nil
		c.nchans--
		h.dropConnIfIdle(c)
		h.w.Go(func(ctx context.Context) { h.relocate(ctx, s.Channel, st, c.addr) })
	}
}

// relocate subscribes channel on its new primary once the Cluster client
// sees the slot served by a node other than old. Until then, or if that
// fails, the channel's waiters rely on their TTL cap. It gives up when
// life, cancelled by close, ends.
func (h *hub) relocate(life context.Context, channel string, st *chanState, old string) {
	for range 100 {
		select {
		case <-life.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
		retry.Reload(ctx, h.cluster)
		master, err := h.cluster.MasterForKey(ctx, channel)
		if err != nil || master.Options().Addr == old {
			cancel()
			continue
		}
		h.mu.Lock()
		if h.closed || h.chans[channel] != st || st.conn != nil {
			h.mu.Unlock()
			cancel()
			return
		}
		c, err := h.connFor(ctx, channel)
		if err == nil {
			err = h.subscribe(ctx, c, channel)
		}
		if err == nil {
			st.conn = c
			h.wakeState(st)
		} else if c != nil {
			h.dropConnIfIdle(c)
		}
		h.mu.Unlock()
		cancel()
		if err == nil {
			return
		}
	}
}

// wakeOne wakes the waiter a release message names (fair mode: the payload
// is an owner ID), or else the first waiter not already woken.
func (h *hub) wakeOne(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.chans[channel]
	if st == nil {
		return
	}
	if len(payload) == 32 {
		for _, w := range st.waiters {
			if sameOwner(w.owner, payload) {
				select {
				case w.wake <- struct{}{}:
				default:
				}
				return
			}
		}
		now := time.Now()
		st.orphans = slices.DeleteFunc(st.orphans, func(o orphan) bool { return now.Sub(o.at) > confirmWait })
		for i := range st.orphans {
			if sameOwner(st.orphans[i].owner, payload) {
				st.orphans[i].at = now
				return
			}
		}
		st.orphans = append(st.orphans, orphan{owner: payload, at: now})
		return
	}
	if st.broadcast {
		h.wakeState(st)
		return
	}
	for _, w := range st.waiters {
		select {
		case w.wake <- struct{}{}:
			return
		default: // already woken; try the next one
		}
	}
}

func (h *hub) wakeAll(c *subConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.chans {
		if st.conn == c || st.conn == nil {
			st.broken = true
			h.wakeState(st)
		}
	}
}

func (h *hub) wakeState(st *chanState) {
	for _, w := range st.waiters {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// woken returns the channel that receives the waiter's wake-ups; nil (never
// ready) for a nil waiter.
func (w *waiter) woken() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// leave removes the waiter from its queue, hands a wake-up it did not use to
// the next waiter, and unsubscribes when the queue is empty.
func (w *waiter) leave() {
	if w == nil {
		return
	}
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.chans[w.channel]
	if st == nil {
		return
	}
	for i, x := range st.waiters {
		if x == w {
			st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		for _, x := range st.waiters {
			select {
			case x.wake <- struct{}{}:
				return
			default:
			}
		}
	default:
	}
	if len(st.waiters) > 0 || h.closed {
		return
	}
	delete(h.chans, w.channel)
	if st.conn == nil {
		return // dropped by the server, not yet subscribed elsewhere
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
	defer cancel()
	h.unsubscribe(ctx, st.conn, w.channel)
}

// unsubscribe removes channel from c. Called with h.mu.
func (h *hub) unsubscribe(ctx context.Context, c *subConn, channel string) {
	c.nchans--
	c.unsubs[channel]++
	if h.cluster != nil {
		_ = c.ps.SUnsubscribe(ctx, channel)
	} else {
		_ = c.ps.Unsubscribe(ctx, channel)
	}
	h.dropConnIfIdle(c)
}

// close stops every receive loop and waits for them.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for _, c := range h.conns {
		_ = c.ps.Close()
	}
	h.mu.Unlock()
	h.w.Stop()
}

// sameOwner compares owner IDs in constant time, so the time a comparison
// takes tells nothing about how much of an owner ID a message got right.
func sameOwner(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// channelTag is the hash tag of a Cluster channel name, which decides its
// slot as for a key: the bytes between the first '{' and the next '}', or
// the whole name.
func channelTag(channel string) string {
	if i := strings.IndexByte(channel, '{'); i >= 0 {
		if j := strings.IndexByte(channel[i+1:], '}'); j > 0 {
			return channel[i+1 : i+1+j]
		}
	}
	return channel
}
