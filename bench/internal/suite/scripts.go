package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// ScriptCost is the Redis time of one script, measured alone: the server's
// command statistics are reset, the script runs Calls times from one client
// on an otherwise idle server, and INFO commandstats gives the time inside
// the server per EVALSHA. Unlike a throughput figure it does not depend on
// the client machine or on what else runs there, so it is the steadiest
// figure a shared machine gives for the ceiling of one hot key.
type ScriptCost struct {
	Group    string  `json:"group"`    // lock, stock, wallet
	Name     string  `json:"name"`     // the operation, e.g. "Deduct (1 item)"
	Baseline string  `json:"baseline"` // name of the minimal script doing the same job, if any
	Calls    int64   `json:"calls"`    // EVALSHA calls counted
	USec     float64 `json:"usec_per_call"`
	// Others is the time per operation of every command other than
	// EVALSHA, in µs: mostly the commands the script itself calls (Redis
	// counts them apart, and their time is also inside USec), plus any sent
	// beside it (a WAIT, a pipelined read). USec − Others approximates the
	// script's own Lua work.
	Others float64 `json:"commands_usec_per_op"`
	Failed string  `json:"failed,omitempty"`
}

// scriptCase is one measured phase: setup runs unmeasured, then op runs n
// times in order from one goroutine with the statistics reset just before.
type scriptCase struct {
	group, name, baseline string
	setup                 func(ctx context.Context, rdb *redis.Client, n int) error
	op                    func(ctx context.Context, i int) error
}

// MeasureScripts measures every script case with calls operations each on
// rdb's server. It must be the only client of that server while it runs.
func MeasureScripts(ctx context.Context, rdb *redis.Client, calls int, only func(name string) bool) []ScriptCost {
	var out []ScriptCost
	cases, done := scriptCases()
	defer done()
	for _, c := range cases {
		full := c.group + "/" + c.name
		if only != nil && !only(full) {
			continue
		}
		out = append(out, measureScript(ctx, rdb, c, calls))
	}
	return out
}

func measureScript(ctx context.Context, rdb *redis.Client, c scriptCase, n int) ScriptCost {
	res := ScriptCost{Group: c.group, Name: c.name, Baseline: c.baseline}
	fail := func(what string, err error) ScriptCost {
		res.Failed = fmt.Sprintf("%s: %v", what, err)
		return res
	}
	if err := c.setup(ctx, rdb, n); err != nil {
		return fail("setup", err)
	}
	// One unmeasured call loads the script (EVALSHA's NOSCRIPT fallback is
	// an EVAL, counted apart), then the measured ones.
	if err := c.op(ctx, -1); err != nil {
		return fail("warm-up", err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return fail("CONFIG RESETSTAT", err)
	}
	for i := range n {
		if err := c.op(ctx, i); err != nil {
			return fail(fmt.Sprintf("call %d", i), err)
		}
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return fail("INFO commandstats", err)
	}
	stats := parseCommandStats(info)
	ev := stats["evalsha"]
	res.Calls = ev.calls
	if ev.calls > 0 {
		res.USec = float64(ev.usec) / float64(ev.calls)
	}
	var other int64
	for name, s := range stats {
		if name != "evalsha" && name != "config" && name != "info" {
			other += s.usec
		}
	}
	res.Others = float64(other) / float64(n)
	return res
}

type cmdStat struct{ calls, usec int64 }

// parseCommandStats reads the cmdstat_* lines of INFO commandstats, e.g.
// "cmdstat_evalsha:calls=10,usec=123,usec_per_call=12.30,...", by command.
func parseCommandStats(info string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var s cmdStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		out[name] = s
	}
	return out
}

// WriteScriptTable prints the costs with the ratio of each to its baseline.
func WriteScriptTable(w io.Writer, costs []ScriptCost) error {
	base := map[string]float64{}
	for _, c := range costs {
		base[c.Group+"/"+c.Name] = c.USec
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "script\tEVALSHA calls\tµs/call\tcommands µs/op\tbaseline\t× baseline\t")
	for _, c := range costs {
		if c.Failed != "" {
			fmt.Fprintf(tw, "%s/%s\tFAILED: %s\t\t\t\t\t\n", c.Group, c.Name, c.Failed)
			continue
		}
		ratio, bname := "", ""
		if c.Baseline != "" {
			bname = c.Baseline
			if b := base[c.Group+"/"+c.Baseline]; b > 0 {
				ratio = fmt.Sprintf("%.2f", c.USec/b)
			}
		}
		fmt.Fprintf(tw, "%s/%s\t%d\t%.2f\t%.2f\t%s\t%s\t\n", c.Group, c.Name, c.Calls, c.USec, c.Others, bname, ratio)
	}
	return tw.Flush()
}

// Minimal scripts that do each job with no guarantee beyond the obvious one:
// the yardsticks the redkit scripts are compared against.
var (
	baseLockAcquire = redis.NewScript(`if redis.call('GET', KEYS[1]) then return 0 end
local t = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return t`)
	baseLockRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	baseDecrement = redis.NewScript(`local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local q = tonumber(ARGV[1])
if n < q then return -1 end
return redis.call('DECRBY', KEYS[1], q)`)
	baseIncrement = redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
)

// raiseScript is lock's redlock_raise.lua, run directly (its header gives
// KEYS and ARGV), with raiseOwner as the lock's 32-character owner ID.
var raiseScript = redis.NewScript(lock.Scripts()["redlock_raise.lua"])

const raiseOwner = "0123456789abcdef0123456789abcdef"

// baseValue is the value a group's baseline scripts (baseDecrement,
// baseIncrement) work on.
type baseValue struct {
	rdb *redis.Client
	key string
}

// set is a setup that gives the value a fresh key holding start.
func (b *baseValue) set(start int64) func(ctx context.Context, c *redis.Client, n int) error {
	return func(ctx context.Context, c *redis.Client, n int) error {
		b.rdb, b.key = c, prefix("scripts-base")+":value"
		return b.rdb.Set(ctx, b.key, start, 0).Err()
	}
}

// run is an op that runs script on the value with an argument of 1.
func (b *baseValue) run(script *redis.Script) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		return script.Run(ctx, b.rdb, []string{b.key}, 1).Err()
	}
}

// scriptCases returns every case and a func that closes the clients they
// made.
func scriptCases() ([]scriptCase, func()) {
	var (
		cases []scriptCase
		dones []func()
	)
	for _, group := range []func() ([]scriptCase, func()){lockScriptCases, stockScriptCases, walletScriptCases} {
		c, done := group()
		cases, dones = append(cases, c...), append(dones, done)
	}
	return cases, func() {
		for _, d := range dones {
			d()
		}
	}
}

func lockScriptCases() ([]scriptCase, func()) {
	var (
		rdb     *redis.Client
		locks   *lock.Client
		leases  []*lock.Lease
		pfx     string
		redlock *lock.Redlock
	)
	// newLocks makes a fresh client with the watchdog off, so no renewal
	// runs during a measurement.
	newLocks := func(extra ...lock.Option) func(ctx context.Context, c *redis.Client, n int) error {
		return func(ctx context.Context, c *redis.Client, n int) error {
			if locks != nil {
				_ = locks.Close()
			}
			rdb, pfx = c, prefix("scripts-lock")
			opts := append([]lock.Option{lock.WithKeyPrefix(pfx), lock.WithWatchdog(false), lock.WithTTL(time.Minute)}, extra...)
			var err error
			if locks, err = lock.New(c, opts...); err != nil {
				return err
			}
			leases = make([]*lock.Lease, n)
			return nil
		}
	}
	keep := func(ctx context.Context, c *redis.Client, n int) error { rdb = c; return nil }
	name := func(i int) string { return "n" + strconv.Itoa(i) }
	acquire := func(get func(string) (*lock.Lease, error)) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			l, err := get(name(i))
			if err != nil {
				return err
			}
			if i >= 0 {
				leases[i] = l
			} else {
				return l.Release(ctx)
			}
			return nil
		}
	}
	// The warm-up call (i < 0) of a release or extend phase uses a lease
	// of its own, so every script is loaded before the measured calls.
	release := func(ctx context.Context, i int) error {
		if i < 0 {
			return nil // the acquire phase's warm-up released its lease
		}
		return leases[i].Release(ctx)
	}
	extend := func(ctx context.Context, i int) error {
		if i < 0 {
			i = 0
		}
		return leases[i].Extend(ctx)
	}
	basePfx := ""
	done := func() {
		if locks != nil {
			_ = locks.Close()
		}
		if redlock != nil {
			_ = redlock.Close()
		}
	}
	return []scriptCase{
		{group: "lock", name: "baseline acquire (GET, INCR fence, SET PX)",
			setup: func(ctx context.Context, c *redis.Client, n int) error {
				rdb, basePfx = c, prefix("scripts-base")
				return nil
			},
			op: func(ctx context.Context, i int) error {
				k := basePfx + ":" + strconv.Itoa(i)
				return baseLockAcquire.Run(ctx, rdb, []string{k, k + ":fence"}, "owner-0123456789abcdef", 60000).Err()
			}},
		{group: "lock", name: "baseline release (GET, DEL)", setup: keep,
			op: func(ctx context.Context, i int) error {
				k := basePfx + ":" + strconv.Itoa(i)
				return baseLockRelease.Run(ctx, rdb, []string{k}, "owner-0123456789abcdef").Err()
			}},
		{group: "lock", name: "Mutex acquire", baseline: "baseline acquire (GET, INCR fence, SET PX)",
			setup: newLocks(), op: acquire(func(n string) (*lock.Lease, error) {
				return locks.Mutex(n).TryAcquire(context.Background())
			})},
		{group: "lock", name: "Mutex extend", setup: keep, op: extend},
		{group: "lock", name: "Mutex release", baseline: "baseline release (GET, DEL)", setup: keep, op: release},
		// A lease whose lock expired and was taken by another owner: the
		// release finds it held by another and compares the holder's token
		// with its own.
		{group: "lock", name: "Mutex release, taken by another owner", baseline: "baseline release (GET, DEL)",
			setup: func(ctx context.Context, c *redis.Client, n int) error {
				if err := newLocks(lock.WithTTL(10*time.Millisecond))(ctx, c, n); err != nil {
					return err
				}
				other, err := lock.New(c, lock.WithKeyPrefix(pfx), lock.WithWatchdog(false), lock.WithTTL(time.Minute))
				if err != nil {
					return err
				}
				defer other.Close()
				for i := range n {
					if leases[i], err = locks.Mutex(name(i)).TryAcquire(ctx); err != nil {
						return err
					}
				}
				time.Sleep(20 * time.Millisecond) // every lease has expired
				for i := range n {
					if _, err := other.Mutex(name(i)).TryAcquire(ctx); err != nil {
						return err
					}
				}
				// Load the release script with a lease of its own.
				l, err := locks.Mutex("warm-up").TryAcquire(ctx)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			},
			op: func(ctx context.Context, i int) error {
				if i < 0 {
					return nil
				}
				if err := leases[i].Release(ctx); !errors.Is(err, lock.ErrLeaseTaken) {
					return fmt.Errorf("release of a taken lock: %v", err)
				}
				return nil
			}},
		{group: "lock", name: "fair Mutex acquire", baseline: "baseline acquire (GET, INCR fence, SET PX)",
			setup: newLocks(lock.WithFair(true)), op: acquire(func(n string) (*lock.Lease, error) {
				return locks.Mutex(n).TryAcquire(context.Background())
			})},
		{group: "lock", name: "fair Mutex release", baseline: "baseline release (GET, DEL)", setup: keep, op: release},
		{group: "lock", name: "RWMutex write acquire", baseline: "baseline acquire (GET, INCR fence, SET PX)",
			setup: newLocks(), op: acquire(func(n string) (*lock.Lease, error) {
				return locks.RWMutex(n).TryAcquire(context.Background())
			})},
		{group: "lock", name: "RWMutex write release", baseline: "baseline release (GET, DEL)", setup: keep, op: release},
		{group: "lock", name: "RWMutex read acquire",
			setup: newLocks(), op: acquire(func(n string) (*lock.Lease, error) {
				return locks.RWMutex(n).TryAcquireRead(context.Background())
			})},
		{group: "lock", name: "RWMutex read release", setup: keep, op: release},
		// A Redlock master runs the Mutex's acquire script, so a Redlock
		// over this one server measures one master's part of an acquire;
		// the fence adds the raise, only on a master whose counter is
		// behind the lease's token (lock/doc.go, "Redlock's fencing token").
		{group: "lock", name: "Redlock acquire (one master's part)", baseline: "baseline acquire (GET, INCR fence, SET PX)",
			setup: func(ctx context.Context, c *redis.Client, n int) error {
				if redlock != nil {
					_ = redlock.Close()
				}
				rdb, pfx = c, prefix("scripts-redlock")
				var err error
				redlock, err = lock.NewRedlock([]redis.UniversalClient{c}, lock.WithKeyPrefix(pfx), lock.WithWatchdog(false), lock.WithTTL(time.Minute))
				leases = make([]*lock.Lease, n)
				return err
			},
			op: acquire(func(n string) (*lock.Lease, error) {
				return redlock.Mutex(n).TryAcquire(context.Background())
			})},
		{group: "lock", name: "Redlock release (one master's part)", baseline: "baseline release (GET, DEL)", setup: keep, op: release},
		// The second round of an acquire whose masters drew different
		// counters, on a master that holds the lock and is behind: every
		// call raises the counter.
		{group: "lock", name: "Redlock raise (a master behind)", baseline: "baseline acquire (GET, INCR fence, SET PX)",
			setup: func(ctx context.Context, c *redis.Client, n int) error {
				rdb, basePfx = c, prefix("scripts-raise")
				return c.Set(ctx, basePfx+":lock", raiseOwner+":1", time.Hour).Err()
			},
			op: func(ctx context.Context, i int) error {
				return raiseScript.Run(ctx, rdb, []string{basePfx + ":lock", basePfx + ":tokens"}, raiseOwner, i+2).Err()
			}},
		{group: "lock", name: "Semaphore acquire",
			setup: newLocks(), op: acquire(func(n string) (*lock.Lease, error) {
				return locks.Semaphore(n, 4).TryAcquire(context.Background())
			})},
		{group: "lock", name: "Semaphore release", setup: keep, op: release},
	}, done
}

func stockScriptCases() ([]scriptCase, func()) {
	var (
		inv  *stock.Inventory
		base baseValue
	)
	const huge = int64(1) << 40
	fresh := func(buyerLimit int64) func(ctx context.Context, c *redis.Client, n int) error {
		return func(ctx context.Context, c *redis.Client, n int) error {
			if inv != nil {
				_ = inv.Close()
			}
			var err error
			if inv, err = stock.New(c, stock.WithKeyPrefix(prefix("scripts-stock"))); err != nil {
				return err
			}
			var opts []stock.SKUOption
			if buyerLimit > 0 {
				opts = append(opts, stock.WithBuyerLimit(buyerLimit))
			}
			return inv.Create(ctx, "hot", huge, opts...)
		}
	}
	keep := func(ctx context.Context, c *redis.Client, n int) error { return nil }
	order := func(kind string, i int) stock.Order {
		id := kind + strconv.Itoa(i)
		return stock.Order{ID: id, Buyer: "b" + strconv.Itoa(i), Items: []stock.Item{{SKU: "hot", Qty: 1}}}
	}
	call := func(f func(ctx context.Context, o stock.Order) (stock.Result, error), kind string) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			_, err := f(ctx, order(kind, i))
			return err
		}
	}
	reserve := func(ctx context.Context, o stock.Order) (stock.Result, error) { return inv.Reserve(ctx, o, time.Hour) }
	deduct := func(ctx context.Context, o stock.Order) (stock.Result, error) { return inv.Deduct(ctx, o) }
	done := func() {
		if inv != nil {
			_ = inv.Close()
		}
	}
	return []scriptCase{
		{group: "stock", name: "baseline check-and-decrement", setup: base.set(huge), op: base.run(baseDecrement)},
		{group: "stock", name: "Deduct (1 item)", baseline: "baseline check-and-decrement",
			setup: fresh(0), op: call(deduct, "d")},
		{group: "stock", name: "Refund", setup: keep, op: call(func(ctx context.Context, o stock.Order) (stock.Result, error) {
			return inv.Refund(ctx, o)
		}, "d")},
		{group: "stock", name: "Deduct (1 item, buyer limit)", baseline: "baseline check-and-decrement",
			setup: fresh(5), op: call(deduct, "d")},
		{group: "stock", name: "Reserve", setup: fresh(0), op: call(reserve, "r")},
		{group: "stock", name: "Confirm", setup: keep, op: call(func(ctx context.Context, o stock.Order) (stock.Result, error) {
			return inv.Confirm(ctx, o)
		}, "r")},
		{group: "stock", name: "Reserve (for Cancel)", setup: keep, op: call(reserve, "c")},
		{group: "stock", name: "Cancel", setup: keep, op: call(func(ctx context.Context, o stock.Order) (stock.Result, error) {
			return inv.Cancel(ctx, o)
		}, "c")},
		{group: "stock", name: "Restock", setup: keep, op: func(ctx context.Context, i int) error {
			_, err := inv.Restock(ctx, "rs"+strconv.Itoa(i), "hot", 1)
			return err
		}},
	}, done
}

func walletScriptCases() ([]scriptCase, func()) {
	var (
		led  *wallet.Ledger
		base baseValue
	)
	const funds = int64(1) << 45
	keep := func(ctx context.Context, c *redis.Client, n int) error { return nil }
	tx := func(kind string, i int) string { return kind + strconv.Itoa(i) }
	done := func() {
		if led != nil {
			_ = led.Close()
		}
	}
	return []scriptCase{
		{group: "wallet", name: "baseline check-and-debit", setup: base.set(funds), op: base.run(baseDecrement)},
		{group: "wallet", name: "baseline credit (INCRBY)", setup: keep, op: base.run(baseIncrement)},
		{group: "wallet", name: "Credit", baseline: "baseline credit (INCRBY)",
			setup: func(ctx context.Context, c *redis.Client, n int) error {
				if led != nil {
					_ = led.Close()
				}
				var err error
				if led, err = wallet.New(c, wallet.WithKeyPrefix(prefix("scripts-wallet"))); err != nil {
					return err
				}
				return openFunded(ctx, led, "g/a", "g/b")
			},
			op: func(ctx context.Context, i int) error {
				_, err := led.Credit(ctx, wallet.Tx{ID: tx("c", i), Account: "g/a", Amount: 1})
				return err
			}},
		{group: "wallet", name: "Credit (currency, memo)", baseline: "baseline credit (INCRBY)", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Credit(ctx, wallet.Tx{ID: tx("cm", i), Account: "g/a", Amount: 1, Currency: "EUR", Memo: "top-up"})
				return err
			}},
		{group: "wallet", name: "Debit", baseline: "baseline check-and-debit", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Debit(ctx, wallet.Tx{ID: tx("d", i), Account: "g/a", Amount: 1})
				return err
			}},
		{group: "wallet", name: "Transfer (same group)", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Transfer(ctx, wallet.Transfer{ID: tx("t", i), From: "g/a", To: "g/b", Amount: 1})
				return err
			}},
		{group: "wallet", name: "Hold", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Hold(ctx, wallet.HoldReq{ID: tx("h", i), Account: "g/a", Amount: 1, TTL: time.Hour})
				return err
			}},
		{group: "wallet", name: "Capture", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Capture(ctx, "g/a", tx("h", i), 1)
				return err
			}},
		{group: "wallet", name: "Hold (for Void)", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Hold(ctx, wallet.HoldReq{ID: tx("v", i), Account: "g/a", Amount: 1, TTL: time.Hour})
				return err
			}},
		{group: "wallet", name: "Void", setup: keep,
			op: func(ctx context.Context, i int) error {
				_, err := led.Void(ctx, "g/a", tx("v", i))
				return err
			}},
	}, done
}
