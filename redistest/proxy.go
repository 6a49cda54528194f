package redistest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of a Redis server (or anything else) that
// injects network faults between a client and the server.
//
// Requests always pass straight through, so a command sent through the
// proxy reaches the server and runs; the faults act on the way back
// (SetLatency, HoldReplies, DropReplies) or on the connections themselves
// (ResetConnections, Cut). That is what makes the outcome of a command
// ambiguous for the client: it ran, but the client cannot know.
//
// The proxy reads the RESP it forwards and matches each reply to the
// command it answers, so that HoldReplies and DropReplies act only on
// replies of the user's commands that ran. These pass at once (after
// SetLatency), keeping their order on the connection:
//
//   - the replies to a new connection's handshake: the commands a client
//     sends before its first other command (HELLO, AUTH, SELECT, READONLY,
//     READWRITE, CLIENT SETNAME, SETINFO, TRACKING and MAINT_NOTIFICATIONS),
//     so a client that connects under the fault still sends its command;
//   - the replies to COMMAND and CLUSTER SLOTS, SHARDS and NODES, which
//     clients send on their own to learn the server;
//   - the replies to MULTI and to the commands queued after it (the reply
//     to EXEC says what the transaction did, or a null that nothing ran);
//   - errors that say the command did not run: NOSCRIPT (an EVALSHA of a
//     script the server does not have; go-redis then sends EVAL, whose
//     reply is the one lost), MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN,
//     BUSY, LOADING, MASTERDOWN, READONLY, NOREPLICAS, NOAUTH, OOM, MISCONF
//     and EXECABORT.
//
// On a connection whose replies cannot be matched to commands (one that
// subscribed, ran MONITOR or CLIENT REPLY, or whose traffic is not RESP,
// such as a proxy in front of PostgreSQL) every reply, pub/sub messages
// included, is held or dropped, and Dropped does not count them. Pushes
// (RESP3 out-of-band replies) are treated the same way on every
// connection.
//
// Its methods are safe for concurrent use; settings apply to replies that
// arrive from the server after the call.
type Proxy struct {
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	links   map[*link]struct{}
	latency time.Duration
	hold    time.Duration
	drop    bool
	cut     bool
	closed  bool
	// dropped counts the replies of commands that ran that DropReplies
	// discarded; unmatched, the reads it discarded on connections whose
	// replies cannot be matched to commands.
	dropped, unmatched int64
	pass               int // replies of commands that ran DropReplies still lets through

	wg sync.WaitGroup
}

// NewProxy starts a proxy to target for a test and closes it in tb.Cleanup.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target)
	return forTest(tb, p, err)
}

// StartProxy starts a proxy to target on a free loopback port. The caller
// must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), links: map[*link]struct{}{}}
	p.mu.Lock()
	p.serveLocked(ln)
	p.mu.Unlock()
	return p, nil
}

// Addr is the address clients dial instead of the target's.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetLatency delays every reply by d (0 removes the delay), like a slow or
// distant network. Replies keep their order; throughput is not limited.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// HoldReplies holds back the reply of every command that ran for d after
// the server sent it (0 stops holding), on top of SetLatency. The command
// has already run when its reply is held: with d longer than the client's
// read timeout, the client sees a timeout for a command that took effect.
// Replies to a new connection's handshake are not held (see Proxy), so a
// client that connects meanwhile sends its command, and it runs.
func (p *Proxy) HoldReplies(d time.Duration) {
	p.mu.Lock()
	p.hold = d
	p.mu.Unlock()
}

// DropReplies discards, while on, the reply of every command that ran.
// Commands still run; their clients wait until their read timeout. The
// replies to a new connection's handshake and the errors that say a
// command did not run pass (see Proxy), so a client that connects
// meanwhile sends its command, and each reply dropped belongs to a command
// that ran. Turning it off does not bring back the dropped replies, so a
// connection that lost a reply is out of step; clients close connections
// that time out.
func (p *Proxy) DropReplies(on bool) {
	p.mu.Lock()
	p.drop, p.pass = on, 0
	p.mu.Unlock()
}

// DropRepliesAfter(n) is DropReplies(true) that first lets the replies of
// n commands that ran through (on all connections, in the order the proxy
// reads them), so the reply lost is that of a call's n+1-th command. The
// replies DropReplies lets pass anyway do not count.
func (p *Proxy) DropRepliesAfter(n int) {
	p.mu.Lock()
	p.drop, p.pass = true, n
	p.mu.Unlock()
}

// Dropped returns how many replies of commands that ran DropReplies has
// discarded so far. A test waits for it to grow to know that a command ran
// and its reply is gone, before it injects the next fault. It does not
// count what was dropped on connections whose replies cannot be matched to
// commands (see Proxy).
func (p *Proxy) Dropped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// droppedUnmatched returns how many reads DropReplies has discarded on
// connections whose replies cannot be matched to commands.
func (p *Proxy) droppedUnmatched() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unmatched
}

// ResetConnections aborts every open connection with a TCP RST (linger 0),
// as a crashed middlebox or a rebooted peer would. New connections work.
func (p *Proxy) ResetConnections() {
	for _, l := range p.snapshot() {
		l.close(true)
	}
}

// Cut(true) closes every open connection and refuses new ones (the listener
// is closed, so dials get "connection refused"), like a network partition
// between the client and the server. Cut(false) listens again on the same
// address.
func (p *Proxy) Cut(on bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("redistest: proxy closed")
	}
	if on == p.cut {
		p.mu.Unlock()
		return nil
	}
	p.cut = on
	ln := p.ln
	if on {
		p.ln = nil
	}
	p.mu.Unlock()
	if on {
		_ = ln.Close()
		for _, l := range p.snapshot() {
			l.close(false)
		}
		return nil
	}
	// Our own port was free a moment ago; retry briefly in case the kernel
	// still holds it.
	var err error
	for i := 0; i < 50; i++ {
		var nl net.Listener
		if nl, err = net.Listen("tcp", p.addr); err == nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.closed || p.cut {
				_ = nl.Close() // closed or cut again meanwhile
				return nil
			}
			p.serveLocked(nl)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redistest: proxy relisten on %s: %w", p.addr, err)
}

// Close stops the proxy, closes every connection and waits for all of its
// goroutines to end. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, l := range p.snapshot() {
		l.close(false)
	}
	p.wg.Wait()
	return nil
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

// serveLocked accepts connections on ln until it is closed; p.mu is held.
func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed by Cut or Close
			}
			p.accept(c)
		}
	}()
}

func (p *Proxy) accept(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The target is down: pass that on as a reset, not a silent hang.
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{}), replies: make(chan chunk, 256), track: &tracker{}}
	p.mu.Lock()
	if p.closed || p.cut {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(3)
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}
	go func() { // requests: recorded, then straight through
		defer p.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				l.track.sent(buf[:n])
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		l.close(false)
		forget()
	}()
	go func() { // replies: read from the server, matched, stamped, queued
		defer p.wg.Done()
		defer close(l.replies)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				for _, c := range p.route(l.track.received(buf[:n])) {
					select {
					case l.replies <- c:
					case <-l.done:
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // replies: deliver each one when its delay is over
		defer p.wg.Done()
		for c := range l.replies {
			if d := time.Until(c.at); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-l.done:
					t.Stop()
					return
				}
			}
			if _, err := client.Write(c.data); err != nil {
				break
			}
		}
		// The server closed its side (or the client went away): pass it on.
		l.close(false)
		forget()
	}()
}

// route applies the faults to the replies read at once from the server:
// each reply that passes gets its delivery time; the others are counted.
// Replies that pass together with one delay are joined into one chunk.
func (p *Proxy) route(parts []part) []chunk {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []chunk
	for _, r := range parts {
		at := now.Add(p.latency)
		switch r.kind {
		case replyRan:
			if p.drop && p.pass == 0 {
				p.dropped++
				continue
			}
			if p.drop {
				p.pass--
			}
			at = at.Add(p.hold)
		case replyUnknown:
			if p.drop {
				p.unmatched++
				continue
			}
			at = at.Add(p.hold)
		}
		if k := len(out) - 1; k >= 0 && out[k].at.Equal(at) {
			out[k].data = append(out[k].data, r.data...)
			continue
		}
		out = append(out, chunk{data: r.data, at: at})
	}
	return out
}

type chunk struct {
	data []byte
	at   time.Time
}

// link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn
	replies        chan chunk
	done           chan struct{}
	once           sync.Once
	track          *tracker
}

func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			if tc, ok := l.client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			if tc, ok := l.server.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}
