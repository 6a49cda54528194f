package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/lock"
)

// LockTTL is the TTL of the workload's leases (renewed by the watchdog).
const LockTTL = 2 * time.Second

// StallTTL is the TTL of the lease a stalled holder takes, with its
// watchdog off, and StallFor how long it then stops (past the TTL) before
// its write.
const (
	StallTTL = 400 * time.Millisecond
	StallFor = 700 * time.Millisecond
)

// fencedLua reads or writes the protected counter of a lock name behind
// the fence check, once per operation ID: a resubmission returns the first
// answer. KEYS: fence, value, log, answers. ARGV: token, "r" or "w",
// operation ID, value to write, lease.
var fencedSrc = lock.FenceLua + `
redis.call('HINCRBY', KEYS[4], 'touch', 1) -- a write, so that WAIT after a resubmission covers the first one
local done = redis.call('HGET', KEYS[4], ARGV[3])
if done then return done end
local res
if not redkit_fence(KEYS[1], ARGV[1]) then
  res = 'stale'
elseif ARGV[2] == 'r' then
  res = 'v' .. (redis.call('GET', KEYS[2]) or '0')
else
  redis.call('SET', KEYS[2], ARGV[4])
  redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[5] .. ' ' .. ARGV[4] .. ' ' .. ARGV[3])
  res = 'ok'
end
redis.call('HSET', KEYS[4], ARGV[3], res)
return res`

var fencedLua = redis.NewScript(fencedSrc)

// lockLoad has clients take a mutex, read the counter it protects and write
// it back plus one, both fenced (lock.FenceLua), and release.
type lockLoad struct {
	prefix string
	names  []string
	ack    bool // pipeline WAIT 1 with every counter access
	rdbs   []redis.UniversalClient
	locks  []*lock.Client
	admin  redis.UniversalClient

	hist  *History
	prog  Progress
	lease atomic.Int64
	stall atomic.Int64 // stalls requested and not yet taken
	// maxHold is the longest fault of the run: a command sent before it may
	// run when it ends.
	maxHold time.Duration

	mu     sync.Mutex
	writes map[string]fencedWrite // acknowledged writes by operation ID
	unsure []unsureAccess
	// refused holds writes the fence refused for certain.
	refused map[string]bool
	tally   Tally
}

type fencedWrite struct {
	name  string
	token uint64
	lease int
	val   int64
}

func newLockLoad(tb testing.TB, d Deployment, prefix string, hist *History) *lockLoad {
	w := &lockLoad{
		prefix: prefix, names: []string{"lock-a", "lock-b"}, ack: d.ReplicaAck(), admin: d.Admin(tb), hist: hist,
		writes: map[string]fencedWrite{}, refused: map[string]bool{},
	}
	var opts []lock.Option
	opts = append(opts, lock.WithKeyPrefix(prefix), lock.WithTTL(LockTTL))
	if w.ack {
		opts = append(opts, lock.WithRequiredReplicaAck(1, AckTimeout))
	}
	for range 2 { // two processes
		rdb := d.Client(tb)
		w.rdbs = append(w.rdbs, rdb)
		locks, err := lock.New(rdb, opts...)
		if err != nil {
			tb.Fatalf("lock.New: %v", err)
		}
		w.locks = append(w.locks, locks)
	}
	return w
}

func (w *lockLoad) name() string                { return "lock" }
func (w *lockLoad) history() *History           { return w.hist }
func (w *lockLoad) model() porcupine.Model      { return LockModel }
func (w *lockLoad) progress() *Progress         { return &w.prog }
func (w *lockLoad) setup(context.Context) error { return nil }

func (w *lockLoad) close() {
	for _, l := range w.locks {
		_ = l.Close()
	}
}

// Stall makes the next client that takes a lock stop, with its lease's
// renewals, past the lease's TTL between its read and its write, as a
// process frozen by a GC pause or a VM migration would.
func (w *lockLoad) Stall() Fault {
	return Fault{
		Name: "lock holder paused past its lease", Durable: true,
		Start: func(context.Context) (func(context.Context) error, error) {
			w.stall.Add(1)
			return func(context.Context) error { return nil }, nil
		},
	}
}

func (w *lockLoad) keys(name string) []string {
	tag := "res-" + strings.TrimPrefix(name, "lock-")
	return []string{
		lock.FenceKey(w.prefix, tag, name),
		fmt.Sprintf("%s:res:{%s}:value:%s", w.prefix, tag, name),
		fmt.Sprintf("%s:res:{%s}:log:%s", w.prefix, tag, name),
		fmt.Sprintf("%s:res:{%s}:answers:%s", w.prefix, tag, name),
	}
}

func (w *lockLoad) record(op Op) {
	w.hist.Add(op)
}

func (w *lockLoad) client(ctx context.Context, c int, rng *rand.Rand, more func(int) bool) {
	locks, rdb := w.locks[c%len(w.locks)], w.rdbs[c%len(w.rdbs)]
	for i := 0; more(i) && ctx.Err() == nil; {
		name := w.names[rng.IntN(len(w.names))]
		lease := int(w.lease.Add(1))
		stalled := false
		if n := w.stall.Load(); n > 0 && w.stall.CompareAndSwap(n, n-1) {
			stalled = true
		}
		m := locks.Mutex(name)
		if stalled {
			m = locks.Mutex(name, lock.WithTTL(StallTTL), lock.WithWatchdog(false))
		}
		call, callT := w.hist.Now(), time.Now()
		var l *lock.Lease
		var err error
		blocking := !stalled && rng.IntN(3) == 0
		if blocking {
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			l, err = m.Acquire(actx)
			cancel()
		} else {
			l, err = m.TryAcquire(ctx)
		}
		acq := Op{Client: c, Key: name, Input: LockIn{Kind: LockAcquire, Lease: lease}, Call: call, Return: w.hist.Now()}
		i++
		switch {
		case err == nil:
			acq.Output = LockOut{OK: true, Token: l.Fence().Token}
			w.prog.OK(callT)
		case errors.Is(err, lock.ErrNotAcquired) && !blocking:
			acq.Output = LockOut{}
			w.prog.OK(callT)
		default: // an acquire whose attempt may have run: the lock may have been taken, then cleaned up
			acq.Output, acq.Unknown, acq.Late = LockOut{Unknown: true}, true, w.late()
		}
		w.record(acq)
		if stalled && err != nil {
			w.stall.Add(1) // the next client that gets a lock stalls instead
		}
		if err != nil {
			if acq.Unknown {
				w.record(w.expire(c, name, lease, acq.Call, acq.Return))
				w.count(func(t *Tally) { t.Unknown++ })
			}
			continue
		}
		token := l.Fence().Token
		var val int64
		read := false
		if l.Err() == nil || stalled {
			var ok bool
			ok, val, i = w.access(ctx, c, rdb, name, lease, token, "r", 0, fmt.Sprintf("r%d-%d", c, i), i)
			read = ok
		}
		if stalled {
			time.Sleep(StallFor)
		}
		if read && (l.Err() == nil || stalled) {
			_, _, i = w.access(ctx, c, rdb, name, lease, token, "w", val+1, fmt.Sprintf("w%d-%d", c, i), i)
		}
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
		call = w.hist.Now()
		err = l.Release(context.WithoutCancel(ctx))
		rel := Op{Client: c, Key: name, Input: LockIn{Kind: LockRelease, Lease: lease}, Call: call, Return: w.hist.Now()}
		i++
		switch {
		case err == nil:
			rel.Output = LockOut{OK: true}
		case errors.Is(err, lock.ErrLeaseExpired) || errors.Is(err, lock.ErrLeaseTaken):
			rel.Output = LockOut{}
		default:
			// Not applied means the lock stays until its TTL.
			rel.Output, rel.Unknown, rel.Late = LockOut{Unknown: true}, true, w.late()+int64(LockTTL)
			w.count(func(t *Tally) { t.Unknown++ })
		}
		expire := w.expire(c, name, lease, acq.Call, rel.Return)
		if err == nil && w.ack {
			// Releases do not wait for the replica (lock's documentation):
			// one made around a failover may be lost, leaving the lock
			// held until its TTL.
			rel.Fragile, rel.Late = LockOut{Unknown: true}, w.late()+int64(LockTTL)
			expire.When = &[2]int64{rel.Call, rel.Return}
		}
		w.record(rel)
		if err != nil || expire.When != nil {
			// The lease ended without this release.
			w.record(expire)
		}
	}
}

// late bounds how long after a client gave up on a command the command
// may still run (a paused server runs what it had received when it
// resumes), plus slack.
func (w *lockLoad) late() int64 { return int64(w.maxHold + time.Second) }

// expire is the operation that lets the model end lease without a release,
// anywhere from its acquire's call until its TTL has passed since the last
// command that could have renewed it (sent by last) ran.
func (w *lockLoad) expire(c int, name string, lease int, call, last int64) Op {
	return Op{Client: c, Key: name, Input: LockIn{Kind: LockExpire, Lease: lease}, Output: LockOut{Unknown: true},
		Call: call, Return: last, Unknown: true, Late: w.late() + int64(LockTTL)}
}

func (w *lockLoad) count(f func(t *Tally)) {
	w.mu.Lock()
	f(&w.tally)
	w.mu.Unlock()
}

// access runs one fenced read or write until it has an answer, records it
// and returns whether the fence accepted it, the value read, and the
// operation count.
func (w *lockLoad) access(ctx context.Context, c int, rdb redis.UniversalClient, name string, lease int, token uint64, kind string, val int64, id string, i int) (bool, int64, int) {
	keys := w.keys(name)
	args := []any{token, kind, id, val, lease}
	call, callT := w.hist.Now(), time.Now()
	var res string
	unacked := false
	known, calls, err := settle(ctx, func() error {
		var err error
		res, unacked, err = w.run(ctx, rdb, keys, args)
		if err == nil && unacked {
			return errUnacked
		}
		return err
	}, func(err error) bool { return err == nil })
	op := Op{Client: c, Key: name, Call: call, Return: w.hist.Now(), Input: LockIn{Kind: LockRead, Lease: lease, Token: token}}
	if kind == "w" {
		op.Input = LockIn{Kind: LockWrite, Lease: lease, Token: token, Val: val}
	}
	var out LockOut
	if calls > 1 {
		w.count(func(t *Tally) { t.Retried++ })
	}
	switch {
	case !known:
		// The counter keeps every answer under its operation ID: verify
		// looks it up and records the operation then.
		w.mu.Lock()
		w.tally.Unknown++
		if errors.Is(err, errUnacked) {
			w.tally.Unacked++
		}
		w.unsure = append(w.unsure, unsureAccess{op: op, id: id, answers: keys[3]})
		w.mu.Unlock()
		return false, 0, i + 1
	case res == "stale":
		w.prog.OK(callT)
		if kind == "w" {
			w.mu.Lock()
			w.refused[id] = true
			w.mu.Unlock()
		}
	case res == "ok":
		out.OK = true
		w.prog.OK(callT)
		w.mu.Lock()
		w.writes[id] = fencedWrite{name: name, token: token, lease: lease, val: val}
		w.tally.Acked++
		w.mu.Unlock()
	default:
		out = outputOf(res)
		w.prog.OK(callT)
	}
	op.Output = out
	w.record(op)
	return out.OK, out.Val, i + 1
}

// unsureAccess is a fenced read or write whose answer the client never got.
type unsureAccess struct {
	op          Op
	id, answers string
}

// outputOf turns a stored answer of fencedLua into the model's output.
func outputOf(res string) LockOut {
	switch {
	case res == "stale":
		return LockOut{}
	case res == "ok":
		return LockOut{OK: true}
	}
	v, _ := strconv.ParseInt(strings.TrimPrefix(res, "v"), 10, 64)
	return LockOut{OK: true, Val: v}
}

var errUnacked = errors.New("reliability: write not acknowledged by the replica")

// run sends the fenced script, with WAIT 1 in the same pipeline when the
// deployment has a replica to wait for.
func (w *lockLoad) run(ctx context.Context, rdb redis.UniversalClient, keys []string, args []any) (string, bool, error) {
	if !w.ack {
		res, err := fencedLua.Run(ctx, rdb, keys, args...).Text()
		return res, false, err
	}
	pipe := rdb.Pipeline()
	ev := pipe.Eval(ctx, fencedSrc, keys, args...)
	wait := pipe.Do(ctx, "WAIT", 1, AckTimeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return "", false, err
	}
	n, _ := wait.Int64()
	return ev.Val().(string), n < 1, nil
}

// verify reads each counter's log of accepted writes and checks that the
// writes follow each other (each wrote the value before it plus one) in
// token order with one lease per token, and that every acknowledged write
// is there.
func (w *lockLoad) verify(ctx context.Context) Tally {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tally
	for _, u := range w.unsure {
		res, err := w.admin.HGet(ctx, u.answers, u.id).Result()
		switch {
		case errors.Is(err, redis.Nil): // it never ran
		case err != nil:
			t.problem("lock: look up the answer to %s: %v", u.id, err)
		default: // it ran, at the latest when a late command could
			u.op.Output, u.op.Return = outputOf(res), u.op.Return+w.late()
			w.record(u.op)
		}
	}
	t.Ops = w.hist.Len()
	seen := map[string]bool{}
	for _, name := range w.names {
		k := w.keys(name)
		entries, err := w.admin.LRange(ctx, k[2], 0, -1).Result()
		if err != nil {
			t.problem("lock: read log of %s: %v", name, err)
			continue
		}
		var prevVal int64
		var prevToken uint64
		prevLease := -1
		leaseOfToken := map[uint64]int{}
		for _, e := range entries {
			f := strings.Fields(e)
			if len(f) != 4 {
				t.problem("lock: malformed log entry %q", e)
				continue
			}
			token, _ := strconv.ParseUint(f[0], 10, 64)
			lease, _ := strconv.Atoi(f[1])
			val, _ := strconv.ParseInt(f[2], 10, 64)
			id := f[3]
			seen[id] = true
			if w.refused[id] {
				t.problem("lock: write %s was refused as stale but is in the log", id)
			}
			switch {
			case val != prevVal+1:
				t.Mutex++
				t.detail("lock %s: lease %d (token %d) wrote %d after %d by lease %d (token %d): a lost update",
					name, lease, token, val, prevVal, prevLease, prevToken)
			case token < prevToken:
				t.Mutex++
				t.detail("lock %s: token %d accepted after token %d", name, token, prevToken)
			}
			if other, ok := leaseOfToken[token]; ok && other != lease {
				t.Mutex++
				t.detail("lock %s: token %d used by leases %d and %d", name, token, other, lease)
			}
			leaseOfToken[token] = lease
			prevVal, prevToken, prevLease = val, token, lease
		}
	}
	for id, wr := range w.writes {
		if !seen[id] {
			t.Lost++
			t.detail("lock %s: acknowledged write %s (lease %d, token %d, value %d) is not in the log", wr.name, id, wr.lease, wr.token, wr.val)
		}
	}
	return t
}
