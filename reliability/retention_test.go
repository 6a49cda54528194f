package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// soakWindow is the idempotency window of the running soak: a minute (the
// smallest the options accept) in the long tier, a couple of seconds in the
// short one, which lowers the floor through internal/valid (a door only
// this repository's code can open).
var soakWindow = time.Minute

// kindStat is what a key pattern holds after the soak.
type kindStat struct {
	keys, persistent, bytes int64
	maxTTL                  time.Duration // longest remaining expiry
	samples                 []string      // a few keys without expiry, with their length
}

// length is a key's type and element count, for the survey's samples.
func length(ctx context.Context, rdb *redis.Client, k string) string {
	typ, _ := rdb.Type(ctx, k).Result()
	var n int64
	switch typ {
	case "hash":
		n, _ = rdb.HLen(ctx, k).Result()
	case "zset":
		n, _ = rdb.ZCard(ctx, k).Result()
	case "stream":
		n, _ = rdb.XLen(ctx, k).Result()
	case "set":
		n, _ = rdb.SCard(ctx, k).Result()
	case "list":
		n, _ = rdb.LLen(ctx, k).Result()
	default:
		n = 1
	}
	return fmt.Sprintf("%s (%s %d)", k, typ, n)
}

// keyKind is the pattern of a redkit key: "<module>:<kind>" from
// "<prefix>:<module>:v<N>:{<tag>}:<kind>", with the tag left out.
func keyKind(key string) string {
	parts := strings.SplitN(key, ":", 4)
	if len(parts) < 4 {
		return key
	}
	module, rest := parts[1], parts[3]
	if i := strings.LastIndex(rest, "}:"); i >= 0 {
		kind, _, _ := strings.Cut(rest[i+2:], ":")
		return module + ":" + kind
	}
	if strings.HasPrefix(rest, "{") && strings.HasSuffix(rest, "}") {
		return module + ":(tag only)"
	}
	return module + ":" + rest
}

// survey scans every key and totals, per pattern, the keys, the keys without
// expiry and MEMORY USAGE.
func survey(t *testing.T, rdb *redis.Client) map[string]*kindStat {
	ctx := context.Background()
	out := map[string]*kindStat{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		if ttl == -2*time.Nanosecond || ttl == -2*time.Millisecond {
			continue // gone between SCAN and PTTL
		}
		mem, err := rdb.MemoryUsage(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		s := out[keyKind(k)]
		if s == nil {
			s = &kindStat{}
			out[keyKind(k)] = s
		}
		s.keys++
		s.bytes += mem
		if ttl < 0 {
			s.persistent++
			if len(s.samples) < 3 {
				s.samples = append(s.samples, length(ctx, rdb, k))
			}
		} else {
			s.maxTTL = max(s.maxTTL, ttl)
		}
	}
	require.NoError(t, iter.Err())
	return out
}

func printSurvey(t *testing.T, title string, m map[string]*kindStat) {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%-36s %8s %10s %10s %8s %10s\n", title, "pattern", "keys", "no-expiry", "bytes", "B/key", "max-ttl")
	for _, k := range kinds {
		s := m[k]
		fmt.Fprintf(&b, "%-36s %8d %10d %10d %8d %10s\n", k, s.keys, s.persistent, s.bytes, s.bytes/max(s.keys, 1), s.maxTTL.Round(time.Second))
		for _, x := range s.samples {
			fmt.Fprintf(&b, "    e.g. %s\n", x)
		}
	}
	t.Log(b.String())
	if p := os.Getenv("RETENTION_OUT"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(b.String())
			_ = f.Close()
		}
	}
}

// soakSize is the soak's amount of work.
type soakSize struct {
	skus, buyers, orders   int
	groups, accounts, txs  int
	lockNames, fairWaiters int
	segments, seqIDs       int
	snowflakes             int
	holdTTL                time.Duration // of the holds and reservations meant to expire late
	settle                 time.Duration // idled past two windows: the hold, lock and lease TTLs
}

// TestChaos_Retention is the retention soak (long tier): every module's
// mixed workload with the shortest windows the options allow, crashes
// (clients closed under waiting and in-flight callers), refusals and
// give-ups, then idle past the windows; then every key is surveyed and the
// keys without expiry must be only what the state of record needs, counted
// per SKU, account, slot, service and name, never per operation. The
// survey (per pattern: keys, keys without expiry, MEMORY USAGE, longest
// expiry left, a few keys without expiry with their length) is logged and
// appended to $RETENTION_OUT when set; the modules' README tables "What
// stays in Redis" come from it. TestRetention_short runs the same soak in
// make test with a 2-second window.
func TestChaos_Retention(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("long tier: RUN_CHAOS=1 (make chaos)")
	}
	scale := chaosScale(t)
	soak(t, time.Minute, soakSize{
		skus: 6, buyers: scaled(300, scale), orders: scaled(3000, scale),
		groups: 4, accounts: 5, txs: scaled(3000, scale),
		lockNames: scaled(400, scale), fairWaiters: 8,
		segments: 3, seqIDs: scaled(2000, scale), snowflakes: 20,
		holdTTL: 10 * time.Second, settle: 10 * time.Second,
	})
}

// TestRetention_short is the retention soak of make test: the same
// workloads, smaller, with a 2-second idempotency window.
func TestRetention_short(t *testing.T) {
	defer valid.LowerIdemWindowFloor(time.Second)()
	soak(t, 2*time.Second, soakSize{
		skus: 6, buyers: 40, orders: 300,
		groups: 4, accounts: 5, txs: 300,
		lockNames: 40, fairWaiters: 4,
		segments: 3, seqIDs: 200, snowflakes: 4,
		holdTTL: 2 * time.Second, settle: 7 * time.Second,
	})
}

func soak(t *testing.T, window time.Duration, sz soakSize) {
	old := soakWindow
	soakWindow = window
	defer func() { soakWindow = old }()
	srv := redistest.New(t, redistest.Options{})
	admin := srv.Client()

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); soakStock(t, srv, sz) }()
	go func() { defer wg.Done(); soakWallet(t, srv, sz) }()
	go func() { defer wg.Done(); soakLock(t, srv, sz) }()
	go func() { defer wg.Done(); soakIDs(t, srv, sz) }()
	wg.Wait()
	if t.Failed() {
		return
	}
	printSurvey(t, "after the workload", survey(t, admin))
	// One service process stays up through the idle, serving none of the
	// soak's accounts: its background recovery finishes the transfers cut
	// midway and releases the holds whose Ledger restarted.
	live, err := wallet.New(admin, wallet.WithIdempotencyWindow(soakWindow), wallet.WithRecovery(time.Second))
	require.NoError(t, err)
	defer live.Close()

	// Idle past the window, the hold TTLs and the lock TTLs.
	// A cross-group transfer's inbound record lives two windows.
	time.Sleep(2*soakWindow + sz.settle)
	// Key expiry in Redis is lazy for keys nobody reads; the survey's PTTL
	// reads every key, so an expired key is not counted.
	after := survey(t, admin)
	printSurvey(t, "after idling past the windows", after)

	for k, s := range after {
		// The node table keeps an expiry of its own, well past any lease
		// (lease_acquire.lua), so that a restart on a slow clock finds the
		// high-water marks: state of record per service. The wallet's
		// recovery turn belongs to the Ledger still running.
		if s.keys > s.persistent && k != "idgen:nodes" && k != "wallet:turn" {
			t.Errorf("%s: %d keys with an expiry remain after idling past every window", k, s.keys-s.persistent)
		}
	}
	stat := func(k string) kindStat {
		if s := after[k]; s != nil {
			return *s
		}
		return kindStat{}
	}
	// stock: the journal is held back by the abandoned group for the
	// holdback (1h at least), so its tail stays; at most one journal,
	// holds and level key per SKU and bucket, per-buyer counters only for
	// the live SKU with a buyer limit.
	perSKU := int64(sz.skus + 3) // sku-0 has 4 buckets
	for _, k := range []string{"stock:sku", "stock:journal", "stock:holds"} {
		require.LessOrEqual(t, stat(k).keys, perSKU, k)
	}
	require.LessOrEqual(t, stat("stock:buyers").keys, int64(1), "stock:buyers: only the live SKU with a buyer limit")
	// wallet: one account hash and one journal per account, nothing else
	// once every transfer finished and every hold expired a window ago.
	accounts := int64(sz.groups * sz.accounts)
	require.LessOrEqual(t, stat("wallet:acct").keys, accounts)
	require.LessOrEqual(t, stat("wallet:journal").keys, accounts)
	// The hold records of an account whose Ledger restarted while a hold
	// was open, and a transfer across groups cut midway on a source nobody
	// calls again, are finished by the live Ledger's background recovery.
	for _, k := range []string{"wallet:holds", "wallet:hidx", "wallet:xpend", "wallet:xin", "wallet:tx", "wallet:xout"} {
		if n := stat(k).keys; n > 0 {
			t.Errorf("%s: %d keys (%d B) remain a window after every hold expired and every caller stopped: %v",
				k, n, stat(k).bytes, stat(k).samples)
		}
	}
	// lock: at most one fence counter per hash slot, nothing per name.
	require.LessOrEqual(t, stat("lock:tokens").keys, int64(min(sz.lockNames+sz.fairWaiters, 16384)))
	for k := range after {
		if strings.HasPrefix(k, "lock:") && k != "lock:tokens" {
			t.Errorf("%s: %d lock keys remain with nobody holding or waiting", k, stat(k).keys)
		}
	}
	// idgen: a counter per Segment and Sequence name, a node table per
	// service.
	require.LessOrEqual(t, stat("idgen:seq").keys, int64(sz.segments+1))
	require.LessOrEqual(t, stat("idgen:nodes").keys, int64(1))
}

func soakStock(t *testing.T, srv *redistest.Server, sz soakSize) {
	ctx := context.Background()
	rdb := srv.Client()
	inv, err := stock.New(rdb, stock.WithIdempotencyWindow(soakWindow), stock.WithReclaimInterval(500*time.Millisecond))
	require.NoError(t, err)
	defer inv.Close()
	skus := make([]string, sz.skus)
	for i := range skus {
		skus[i] = fmt.Sprintf("sku-%d", i)
		var opts []stock.SKUOption
		if i == 0 {
			opts = append(opts, stock.WithBuckets(4))
		}
		if i == 1 || i == len(skus)-1 {
			// The last SKU is closed at the end: its per-buyer
			// counters must go with it.
			opts = append(opts, stock.WithBuyerLimit(1000))
		}
		require.NoError(t, inv.Create(ctx, skus[i], 1_000_000, opts...))
	}
	// Consumers: one group read to the end and its consumer names used
	// once, one group abandoned after a first read.
	consume := func(group, name string, d time.Duration) {
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_ = inv.Consume(cctx, stock.Consumer{Group: group, Name: name, SKUs: skus, Poll: 10 * time.Millisecond},
			func(context.Context, []stock.Entry) error { return nil })
	}
	consume("abandoned", "once", 300*time.Millisecond)
	for i := range sz.orders {
		sku := skus[i%len(skus)]
		o := stock.Order{ID: fmt.Sprintf("o-%d", i), Buyer: fmt.Sprintf("b-%d", i%sz.buyers), Items: []stock.Item{{SKU: sku, Qty: 1}}}
		switch i % 5 {
		case 0, 1:
			_, _ = inv.Deduct(ctx, o)
		case 2:
			// Reserved and abandoned: expires with its TTL.
			_, _ = inv.Reserve(ctx, o, time.Second)
		case 3:
			if _, err := inv.Reserve(ctx, o, sz.holdTTL); err == nil {
				_, _ = inv.Confirm(ctx, o)
				if i%2 == 1 {
					_, _ = inv.Refund(ctx, o)
				}
			}
		case 4:
			_, _ = inv.Restock(ctx, fmt.Sprintf("r-%d", i), sku, 1)
		}
		if i%500 == 0 {
			consume("warehouse", fmt.Sprintf("pod-%d", i), 200*time.Millisecond)
		}
	}
	consume("warehouse", "final", time.Second)
	for _, s := range skus {
		_, _ = inv.Checkpoint(ctx, s)
		_, _ = inv.Trim(ctx, s)
	}
	// The sale of the last SKU ends.
	require.NoError(t, inv.CloseSKU(ctx, skus[len(skus)-1]))
}

func soakWallet(t *testing.T, srv *redistest.Server, sz soakSize) {
	ctx := context.Background()
	rdb := srv.Client()
	l, err := wallet.New(rdb, wallet.WithIdempotencyWindow(soakWindow))
	require.NoError(t, err)
	acct := func(g, a int) string { return fmt.Sprintf("g%d/a%d", g, a) }
	for g := range sz.groups {
		for a := range sz.accounts {
			require.NoError(t, l.Open(ctx, acct(g, a), wallet.WithCurrency("EUR")))
			_, err := l.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("seed-%d-%d", g, a), Account: acct(g, a), Amount: 1_000_000})
			require.NoError(t, err)
		}
	}
	for i := range sz.txs {
		g, a := i%sz.groups, (i/sz.groups)%sz.accounts
		from := acct(g, a)
		id := fmt.Sprintf("t-%d", i)
		switch i % 8 {
		case 0:
			_, _ = l.Credit(ctx, wallet.Tx{ID: id, Account: from, Amount: 5})
		case 1:
			_, _ = l.Debit(ctx, wallet.Tx{ID: id, Account: from, Amount: 3})
		case 2:
			_, _ = l.Transfer(ctx, wallet.Transfer{ID: id, From: from, To: acct(g, (a+1)%sz.accounts), Amount: 2})
		case 3:
			_, _ = l.Transfer(ctx, wallet.Transfer{ID: id, From: from, To: acct((g+1)%sz.groups, a), Amount: 2})
		case 4:
			if _, err := l.Hold(ctx, wallet.HoldReq{ID: id, Account: from, Amount: 4, TTL: sz.holdTTL}); err == nil {
				_, _ = l.Capture(ctx, from, id, 4)
			}
		case 5:
			if _, err := l.Hold(ctx, wallet.HoldReq{ID: id, Account: from, Amount: 4, TTL: sz.holdTTL}); err == nil {
				_, _ = l.Void(ctx, from, id)
			}
		case 6:
			// Expires unclaimed.
			_, _ = l.Hold(ctx, wallet.HoldReq{ID: id, Account: from, Amount: 4, TTL: time.Second})
		case 7:
			// Refused: more than the account holds.
			_, _ = l.Hold(ctx, wallet.HoldReq{ID: id, Account: from, Amount: 1 << 50, TTL: time.Second})
		}
	}
	for g := range sz.groups {
		for a := range sz.accounts {
			_, _, _ = l.Checkpoint(ctx, acct(g, a))
		}
	}
	// The ledger restarts at once: its in-process reclaimer's schedule
	// (the holds that expire in the next second) is lost.
	require.NoError(t, l.Close())
	// Callers cut midway, last, so no later call on their sources finishes
	// what they left in flight: a Ledger on its own client through a proxy
	// that lets the first n replies of a transfer through and drops the
	// rest, so the transfer stops after its n-th step.
	px := redistest.NewProxy(t, srv.Addr())
	cutRDB := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer cutRDB.Close()
	cut, err := wallet.New(cutRDB, wallet.WithIdempotencyWindow(soakWindow), wallet.WithRetry(1, time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	for i := range 8 {
		px.DropRepliesAfter(1 + i%3)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = cut.Transfer(cctx, wallet.Transfer{ID: fmt.Sprintf("cut-%d", i), From: acct(i%sz.groups, 0), To: acct((i+1)%sz.groups, 1), Amount: 3})
		cancel()
		px.DropReplies(false)
		px.ResetConnections()
	}
	_ = cut.Close()
}

func soakLock(t *testing.T, srv *redistest.Server, sz soakSize) {
	ctx := context.Background()
	c, err := lock.New(srv.Client(), lock.WithTTL(2*time.Second))
	require.NoError(t, err)
	defer c.Close()
	for i := range sz.lockNames {
		name := fmt.Sprintf("order-%d", i)
		var l *lock.Lease
		var err error
		switch i % 4 {
		case 0:
			l, err = c.Mutex(name).TryAcquire(ctx)
		case 1:
			l, err = c.Mutex(name, lock.WithFair(true)).TryAcquire(ctx)
		case 2:
			m := c.RWMutex(name)
			if i%8 == 2 {
				l, err = m.TryAcquireRead(ctx)
			} else {
				l, err = m.TryAcquire(ctx)
			}
		case 3:
			l, err = c.Semaphore(name, 3).TryAcquire(ctx)
		}
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	// Fair waiters that give up and waiters whose process dies (their
	// client closed under the wait).
	for i := range sz.fairWaiters {
		name := fmt.Sprintf("contended-%d", i)
		holder, err := c.Mutex(name, lock.WithFair(true)).TryAcquire(ctx)
		require.NoError(t, err)
		wrdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		wc, err := lock.New(wrdb, lock.WithTTL(2*time.Second), lock.WithFair(true))
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if l, err := wc.Mutex(name).Acquire(wctx); err == nil {
				_ = l.Release(ctx)
			}
		}()
		time.Sleep(100 * time.Millisecond)
		if i%2 == 0 {
			cancel() // gives up
		} else {
			_ = wrdb.Close() // killed: no more heartbeats, no cleanup
		}
		<-done
		cancel()
		_ = wc.Close()
		_ = wrdb.Close()
		require.NoError(t, holder.Release(ctx))
	}
}

func soakIDs(t *testing.T, srv *redistest.Server, sz soakSize) {
	ctx := context.Background()
	rdb := srv.Client()
	for i := range sz.segments {
		s, err := idgen.NewSegment(rdb, fmt.Sprintf("seg-%d", i))
		require.NoError(t, err)
		for range sz.seqIDs / sz.segments {
			_, err := s.Next(ctx)
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
	}
	q, err := idgen.NewSequence(rdb, "seq")
	require.NoError(t, err)
	for range sz.seqIDs / 4 {
		_, err := q.Next(ctx)
		require.NoError(t, err)
	}
	for range sz.snowflakes {
		s, err := idgen.NewLeasedSnowflake(ctx, rdb, "svc", idgen.WithLeaseTTL(5*time.Second))
		require.NoError(t, err)
		_, err = s.Next(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
}
