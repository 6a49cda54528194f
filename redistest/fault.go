package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// busyScript spins, reading TIME, until ARGV[1] microseconds have passed. It
// writes nothing, so SCRIPT KILL could stop it.
const busyScript = `
local s = redis.call('TIME')
local want = tonumber(ARGV[1])
while true do
  local t = redis.call('TIME')
  if (t[1] - s[1]) * 1000000 + (t[2] - s[2]) >= want then return 1 end
end`

// Busy occupies the server with a Lua script that runs for d, as a slow
// script of another client would. It returns once other clients get BUSY
// replies, which needs busy-reply-threshold (lua-time-limit) below d in the
// server's Config; the returned channel yields the script's own error (nil)
// when it has ended.
func (s *Server) Busy(ctx context.Context, d time.Duration) (<-chan error, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1, TLSConfig: s.tlsConfig(),
		ReadTimeout: d + 3*time.Second})
	ended := make(chan struct{})
	var res error
	go func() {
		defer close(ended)
		defer c.Close()
		res = c.Eval(context.WithoutCancel(ctx), busyScript, nil, d.Microseconds()).Err()
	}()
	// On a loaded machine the script may start well after this call: the
	// wait is for it to start (bounded), and ends early if it ran without
	// a BUSY reply being seen.
	err := poll(ctx, d+10*time.Second, func() (bool, error) {
		select {
		case <-ended:
			return false, fmt.Errorf("redistest: the busy script ended (%v) before a BUSY reply was seen", res)
		default:
		}
		_, err := s.do(ctx, "PING")
		return err != nil && strings.HasPrefix(err.Error(), "BUSY "), nil
	}, "BUSY replies")
	if err != nil {
		<-ended
		return nil, fmt.Errorf("%w (is busy-reply-threshold below %v?)", err, d)
	}
	done := make(chan error, 1)
	go func() {
		<-ended
		done <- res
	}()
	return done, nil
}

// MoveSlot moves the slot of key, with every key in it, to another master
// (the next one in slot order), the way redis-cli --cluster reshard does:
// SETSLOT IMPORTING and MIGRATING, MIGRATE of the keys, then SETSLOT NODE on
// every master. It returns once every node agrees on the new owner. Clients
// are not told: their next command for the slot meets MOVED. FailoverShard
// still picks shards by their original slot ranges.
func (c *Cluster) MoveSlot(ctx context.Context, key string) (to *Server, err error) {
	to, _, err = c.moveSlot(ctx, key, MoveOptions{Batch: 100})
	return to, err
}

func (c *Cluster) moveSlot(ctx context.Context, key string, o MoveOptions) (to *Server, moved int, err error) {
	slot := KeySlot(key)
	masters := c.Masters()
	if len(masters) < 2 {
		return nil, 0, errors.New("redistest: MoveSlot needs two masters")
	}
	var from *Server
	for i, m := range masters {
		nodes, err := m.clusterNodes(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, n := range nodes {
			if strings.Contains(n.flags, "myself") && servesSlot(n.slots, slot) {
				from, to = m, masters[(i+1)%len(masters)]
			}
		}
	}
	if from == nil {
		return nil, 0, fmt.Errorf("redistest: no master serves slot %d", slot)
	}
	id := func(s *Server) (string, error) {
		v, err := s.do(ctx, "CLUSTER", "MYID")
		str, _ := v.(string)
		return str, err
	}
	fromID, err := id(from)
	if err != nil {
		return nil, 0, err
	}
	toID, err := id(to)
	if err != nil {
		return nil, 0, err
	}
	if _, err := to.do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID); err != nil {
		return nil, 0, fmt.Errorf("redistest: SETSLOT IMPORTING: %w", err)
	}
	if _, err := from.do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID); err != nil {
		return nil, 0, fmt.Errorf("redistest: SETSLOT MIGRATING: %w", err)
	}
	for first := true; ; first = false {
		if !first && o.Pause > 0 {
			t := time.NewTimer(o.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				// Finish the move all the same: a slot left half
				// migrated would break every later test step.
				ctx = context.WithoutCancel(ctx)
			case <-t.C:
			}
		}
		v, err := from.do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, o.Batch)
		if err != nil {
			return nil, moved, fmt.Errorf("redistest: GETKEYSINSLOT: %w", err)
		}
		ks, _ := v.([]any)
		if len(ks) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS"}
		args = append(args, ks...)
		if _, err := from.do(ctx, args...); err != nil {
			return nil, moved, fmt.Errorf("redistest: MIGRATE: %w", err)
		}
		moved += len(ks)
	}
	for _, m := range append([]*Server{to, from}, masters...) {
		if _, err := m.do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID); err != nil {
			return nil, moved, fmt.Errorf("redistest: SETSLOT NODE on %s: %w", m.Addr(), err)
		}
	}
	return to, moved, c.waitStable(ctx)
}

// servesSlot reports whether a CLUSTER NODES slot list ("0-5460 5462")
// holds slot.
func servesSlot(slots string, slot int) bool {
	for _, r := range strings.Fields(slots) {
		if strings.HasPrefix(r, "[") {
			continue // a slot being imported or migrated
		}
		lo, hi, found := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		if slot >= a && slot <= b {
			return true
		}
	}
	return false
}

// Fataler is the part of testing.TB that LostReply needs; a *rapid.T has
// it too.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// LostReply runs call while px drops replies, waits until the reply of a
// command that ran was dropped (Dropped grew: a command of call ran and its
// client will time out), runs then (the fault that follows: Cut, Kill,
// Busy, MoveSlot...), lets replies through again and returns call's result.
//
// It fails the test if call returns before such a reply was dropped: when
// nothing reached the server, when every reply was one that passes (a
// handshake's, or an error that says the command did not run), or when
// the only replies dropped could not be matched to commands (see Proxy).
// Whatever px drops meanwhile for other callers counts too: a test makes
// sure that the command that ran is call's, by its effect in Redis.
func LostReply(tb Fataler, px *Proxy, call func() error, then func()) error {
	tb.Helper()
	return LostReplyAfter(tb, px, 0, call, then)
}

// LostReplyAfter is LostReply losing the reply to call's skip+1-th command
// (see DropRepliesAfter): a call that reads before it writes loses the
// write's reply.
func LostReplyAfter(tb Fataler, px *Proxy, skip int, call func() error, then func()) error {
	tb.Helper()
	n, u := px.Dropped(), px.droppedUnmatched()
	px.DropRepliesAfter(skip)
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for px.Dropped() == n {
		select {
		case err := <-errc:
			px.DropReplies(false)
			why := ""
			if d := px.droppedUnmatched() - u; d > 0 {
				why = fmt.Sprintf("; %d replies that the proxy could not match to commands were dropped", d)
			}
			tb.Fatalf("redistest: the call returned (%v) before the reply of a command that ran was dropped%s", err, why)
			return err
		case <-tick.C:
		}
	}
	then()
	px.DropReplies(false)
	return <-errc
}

// SlowLoading makes every later Restart of s answer LOADING for about d
// before it serves the data, as a primary restarting with a large AOF does:
// it writes 500 filler keys ("redistest:filler:<n>"), rewrites the AOF so
// they are in its RDB base, and starts the server with key-load-delay and a
// small loading-process-events-interval-bytes, so it answers clients while
// it loads. s needs AOF on.
func (s *Server) SlowLoading(ctx context.Context, d time.Duration) error {
	const n = 500
	if !s.opts.AOF {
		return errors.New("redistest: SlowLoading needs Options.AOF")
	}
	if _, err := s.do(ctx, "EVAL", `local n = tonumber(ARGV[1])
for i = 1, n do
  redis.call('SET', 'redistest:filler:' .. i, string.rep('x', 64))
end
return n`, 0, n); err != nil {
		return fmt.Errorf("redistest: filler keys: %w", err)
	}
	if _, err := s.do(ctx, "BGREWRITEAOF"); err != nil {
		return fmt.Errorf("redistest: BGREWRITEAOF: %w", err)
	}
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		info, err := s.info(ctx, "persistence")
		return err == nil && infoField(info, "aof_rewrite_in_progress") == "0" &&
			infoField(info, "aof_rewrite_scheduled") == "0", nil
	}, "AOF rewrite")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.opts.Config = append(slices.Clone(s.opts.Config), "key-load-delay "+strconv.FormatInt(max(d.Microseconds()/n, 1), 10),
		"loading-process-events-interval-bytes 1024")
	s.mu.Unlock()
	return nil
}
