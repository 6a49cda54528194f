package suite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/stock"
)

// buyers is the number of concurrent buyers of every flash-sale case.
const buyers = 64

// saleStock is the initial stock of a hot SKU: no run sells it out.
const saleStock = 1_000_000_000_000

// blogRetry is how long a blog-pattern buyer sleeps (jittered ±50%) after
// losing the SETNX race before trying again.
const blogRetry = 2 * time.Millisecond

// flashCases are the flash-sale rows: 64 buyers on one hot SKU.
func flashCases() []Case {
	return []Case{
		{
			Name: "flash/blog", What: "64 buyers, SETNX lock + GET + DECRBY + DEL per unit (retry after ~2ms)",
			Run: blogDecrement(saleStock, "units"),
		},
		{
			Name: "flash/lua", What: "64 buyers, one Lua check-and-decrement per unit",
			Yardstick: "flash/blog", Run: flashLua,
		},
		{
			Name: "server/stock-deduct", What: "redis-benchmark EVALSHA of redkit's deduct.lua, fresh order ID per call, 64 clients",
			Needs: "redis-benchmark", Run: rbStockDeduct,
		},
		{
			Name: "flash/deduct-goredis", What: "64 goroutines of one go-redis client, EVALSHA of redkit's deduct.lua as stock.Deduct sends it, fresh order ID per call",
			Yardstick: "server/stock-deduct", Run: goredisStockDeduct,
		},
		{
			Name: "flash/redkit-deduct", What: "64 buyers, stock.Deduct of one unit, fresh order ID per call",
			Yardstick: "flash/deduct-goredis", Also: []string{"server/stock-deduct", "flash/blog"},
			Run: flashDeduct,
		},
		aofCase("server/stock-deduct", "everysec", rbStockDeduct),
		aofCase("flash/redkit-deduct", "everysec", flashDeduct),
		aofCase("server/stock-deduct", "always", rbStockDeduct),
		aofCase("flash/redkit-deduct", "always", flashDeduct),
		{
			Name: "flash/redkit-deductbatch", What: "4 callers x DeductBatch of 100 one-unit orders; ops = orders",
			Yardstick: "flash/redkit-deduct", Also: []string{"server/stock-deduct", "flash/blog"},
			Run: flashDeductBatch,
		},
	}
}

// aofCase is the row name+"-aof-"+fsync: run on the server with AOF on and
// that appendfsync policy; a flash/ row is compared with the server/ row of
// the same policy.
func aofCase(name, fsync string, run runFunc) Case {
	c := Case{
		Name:  name + "-aof-" + fsync,
		What:  "as " + name + ", on a server with appendonly yes, appendfsync " + fsync,
		Needs: "aof-" + fsync,
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			on := *env
			on.Server = env.AOF[fsync]
			return run(ctx, &on, d)
		},
	}
	if strings.HasPrefix(name, "flash/") {
		c.Yardstick = "server/stock-deduct-aof-" + fsync
		c.Also = []string{"flash/redkit-deduct"}
	}
	return c
}

// flashDeduct runs 64 buyers of stock.Deduct on the case's server.
func flashDeduct(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	return redkitDeduct(ctx, rdb, rt, d, 1)
}

// blogDecrement runs the pattern found in many blog posts, for a stock or a
// balance alike, on a value that starts at initial: take a SETNX lock, read
// the value, decrement it, delete the lock. A buyer that loses the SETNX
// race sleeps blogRetry and tries again. unit names what is counted in a
// violation.
func blogDecrement(initial int64, unit string) runFunc {
	return func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
		rdb, rt := client(env)
		defer rdb.Close()
		p := prefix("blog")
		valueKey, lockKey := p+":value", p+":lock"
		if err := rdb.Set(ctx, valueKey, initial, 0).Err(); err != nil {
			return Sample{}, err
		}
		var (
			holders Holders
			taken   atomic.Int64
		)
		s := drive(ctx, d, buyers, rt, false, func(runCtx context.Context, _ int) error {
			ctx := context.WithoutCancel(runCtx) // a call cut at the deadline would go uncounted
			ok, err := rdb.SetNX(ctx, lockKey, "1", lockTTL).Result()
			if err != nil {
				return err
			}
			if !ok {
				sleepJitter(runCtx, blogRetry)
				return errSkip
			}
			holders.Enter()
			err = func() error {
				left, err := rdb.Get(ctx, valueKey).Int64()
				if err != nil {
					return err
				}
				if left < 1 {
					return errors.New("nothing left")
				}
				if err := rdb.DecrBy(ctx, valueKey, 1).Err(); err != nil {
					return err
				}
				taken.Add(1)
				return nil
			}()
			holders.Exit()
			if derr := rdb.Del(ctx, lockKey).Err(); err == nil {
				err = derr
			}
			return err
		})
		left, err := rdb.Get(ctx, valueKey).Int64()
		if err != nil {
			return Sample{}, err
		}
		s.Ops = taken.Load()
		s.Violations = append(holders.Violations(), Conserved(unit, initial, s.Ops, left)...)
		return s, nil
	}
}

func sleepJitter(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d/2 + rand.N(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

var checkAndDecrement = redis.NewScript(`
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
local q = tonumber(ARGV[1])
if left < q then return -1 end
return redis.call('DECRBY', KEYS[1], q)`)

// flashLua is the bare atomic alternative: one script checks and decrements.
func flashLua(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	stockKey := prefix("lua") + ":stock"
	if err := rdb.Set(ctx, stockKey, saleStock, 0).Err(); err != nil {
		return Sample{}, err
	}
	if err := checkAndDecrement.Load(ctx, rdb).Err(); err != nil {
		return Sample{}, err
	}
	s := drive(ctx, d, buyers, rt, true, func(ctx context.Context, _ int) error {
		left, err := checkAndDecrement.Run(context.WithoutCancel(ctx), rdb, []string{stockKey}, 1).Int64()
		if err == nil && left < 0 {
			err = errors.New("sold out")
		}
		return err
	})
	left, err := rdb.Get(ctx, stockKey).Int64()
	if err != nil {
		return Sample{}, err
	}
	s.Violations = Conserved("units", saleStock, s.Ops, left)
	return s, nil
}

// newHotSKU creates a SKU "hot" of saleStock units (split into buckets when
// buckets > 1) under a fresh prefix.
func newHotSKU(ctx context.Context, rdb redis.UniversalClient, buckets int) (*stock.Inventory, string, error) {
	p := prefix("stock")
	inv, err := stock.New(rdb, stock.WithKeyPrefix(p))
	if err != nil {
		return nil, "", err
	}
	var opts []stock.SKUOption
	if buckets > 1 {
		opts = append(opts, stock.WithBuckets(buckets))
	}
	// A Create that meets a slot migrating for longer than the Cluster
	// budget (the resharding cases) is called again, as a caller should:
	// the same settings make it safe to send twice.
	for try := 0; try < 10; try++ {
		if err = inv.Create(ctx, "hot", saleStock, opts...); !errors.Is(err, stock.ErrUnknownOutcome) {
			break
		}
	}
	if err != nil {
		_ = inv.Close()
		return nil, "", err
	}
	return inv, p, nil
}

// checkSKU compares the SKU's levels with what the buyers were told.
func checkSKU(ctx context.Context, inv *stock.Inventory, sold int64) ([]string, error) {
	lv, err := inv.Level(ctx, "hot")
	if err != nil {
		return nil, err
	}
	v := Conserved("units", saleStock, sold, lv.Available+lv.Reserved)
	if lv.Sold != sold {
		v = append(v, fmt.Sprintf("sold level %d, buyers told %d", lv.Sold, sold))
	}
	return v, nil
}

var orderSeq atomic.Int64

// redkitDeduct runs 64 buyers deducting one unit each per call from a hot SKU
// of the given bucket count.
func redkitDeduct(ctx context.Context, rdb redis.UniversalClient, rt *Counter, d time.Duration, buckets int) (Sample, error) {
	inv, _, err := newHotSKU(ctx, rdb, buckets)
	if err != nil {
		return Sample{}, err
	}
	defer inv.Close()
	warm := stock.Order{ID: "warm-up", Buyer: "warm-up", Items: []stock.Item{{SKU: "hot", Qty: 1}}}
	if _, err := inv.Deduct(ctx, warm); err != nil {
		return Sample{}, fmt.Errorf("warm-up: %w", err)
	}
	s := drive(ctx, d, buyers, rt, true, func(ctx context.Context, w int) error {
		o := stock.Order{ID: "o-" + strconv.FormatInt(orderSeq.Add(1), 10), Buyer: "buyer-" + strconv.Itoa(w),
			Items: []stock.Item{{SKU: "hot", Qty: 1}}}
		_, err := inv.Deduct(context.WithoutCancel(ctx), o)
		return err
	})
	s.Violations, err = checkSKU(ctx, inv, s.Ops+1)
	return s, err
}

// flashDeductBatch sends batches of 100 orders from 4 callers.
func flashDeductBatch(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	inv, _, err := newHotSKU(ctx, rdb, 1)
	if err != nil {
		return Sample{}, err
	}
	defer inv.Close()
	batch := 100
	if env.Quick {
		batch = 10
	}
	var sold atomic.Int64
	var errs errTally
	s := drive(ctx, d, 4, rt, false, func(ctx context.Context, w int) error {
		orders := make([]stock.Order, batch)
		for i := range orders {
			n := orderSeq.Add(1)
			orders[i] = stock.Order{ID: "o-" + strconv.FormatInt(n, 10), Buyer: "buyer-" + strconv.FormatInt(n%buyers, 10),
				Items: []stock.Item{{SKU: "hot", Qty: 1}}}
		}
		for _, r := range inv.DeductBatch(context.WithoutCancel(ctx), orders) {
			if r.Err == nil {
				sold.Add(1)
			} else {
				errs.add(r.Err)
			}
		}
		return errSkip
	})
	s.Ops = sold.Load()
	errs.fill(&s)
	s.Violations, err = checkSKU(ctx, inv, s.Ops)
	return s, err
}

// rbStockDeduct runs redkit's deduct script through redis-benchmark: the
// command stock.Deduct sends for a one-unit order on SKU "hot", with a fresh
// order ID per call. It checks afterwards that the calls really sold.
func rbStockDeduct(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	return capturedDeduct(ctx, env, func(call func(*redis.Client) error) (Sample, error) {
		return rbCaptured(ctx, env, d, call)
	})
}

// goredisStockDeduct sends the same command from 64 goroutines of go-redis.
func goredisStockDeduct(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	return capturedDeduct(ctx, env, func(call func(*redis.Client) error) (Sample, error) {
		return goredisCaptured(ctx, env, d, buyers, call)
	})
}

// capturedDeduct runs replay on the command stock.Deduct sends for one unit
// of a fresh hot SKU, and checks afterwards that the calls really sold.
func capturedDeduct(ctx context.Context, env *Env, replay func(call func(*redis.Client) error) (Sample, error)) (Sample, error) {
	rdb, _ := client(env)
	defer rdb.Close()
	inv, p, err := newHotSKU(ctx, rdb, 1)
	if err != nil {
		return Sample{}, err
	}
	defer inv.Close()
	// The command stock.Deduct sends, replayed with a fresh order ID per call.
	s, err := replay(func(c *redis.Client) error {
		capInv, err := stock.New(c, stock.WithKeyPrefix(p))
		if err != nil {
			return err
		}
		defer capInv.Close()
		_, err = capInv.Deduct(ctx, stock.Order{ID: rbTemplateID, Buyer: "rb-buyer", Items: []stock.Item{{SKU: "hot", Qty: 1}}})
		return err
	})
	if err != nil {
		return s, err
	}
	lv, err := inv.Level(ctx, "hot")
	if err != nil {
		return s, err
	}
	// The calibration run sold too; a few calls may draw a used order ID.
	if lv.Sold < s.Ops*99/100 {
		return s, fmt.Errorf("deduct.lua sold %d units in %d calls: the script's keys or arguments do not match", lv.Sold, s.Ops)
	}
	return s, nil
}
