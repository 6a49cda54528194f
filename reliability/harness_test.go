package reliability_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// env is where a module's exercise runs.
type env struct {
	rdb   redis.UniversalClient // the module's client
	admin redis.UniversalClient // a client allowed SCRIPT FLUSH
	tel   *otelxtest.Recorder   // the telemetry providers; nil: none given
}

// ran is what an exercise hands back: values only known once it has run
// that telemetry must not contain, and the module's Check report.
type ran struct {
	secrets []string
	report  health.Report
}

// module is one row of the harness: a module, its ACL user, what that user
// must be refused, what its telemetry must record, the values that must
// never reach telemetry, and the run of its public operations.
type module struct {
	name       string
	aclFile    string // relative to the reliability module
	aclUser    string
	foreignKey string // another module's key, refused to aclUser
	// refused are the calls particular to the module that its ACL user
	// must be refused, by what they are.
	refused  func(ctx context.Context, rdb *redis.Client) map[string]error
	recorded []string // span and metric names its telemetry must contain
	markers  []string // values that must never reach telemetry
	exercise func(t *testing.T, e env) ran
}

var modules = []module{
	{
		name:       "lock",
		aclFile:    "../lock/redis.acl",
		aclUser:    "redkit-lock",
		foreignKey: "redkit:stock:v1:{shop-7}:sku:shop-7/sku-1",
		refused: func(ctx context.Context, rdb *redis.Client) map[string]error {
			return map[string]error{
				"a channel outside the patterns": rdb.Publish(ctx, "other-channel", "x").Err(),
			}
		},
		recorded: []string{"lock.acquire", "lock.release", "evalsha", "redkit.lock.hold.duration", "db.client.connections.usage"},
		markers:  []string{"zq-", "4242424"},
		exercise: exerciseLock,
	},
	{
		name:       "idgen",
		aclFile:    "../idgen/redis.acl",
		aclUser:    "redkit-idgen",
		foreignKey: "redkit:lock:v1:{x}:token:x",
		refused: func(ctx context.Context, rdb *redis.Client) map[string]error {
			return map[string]error{
				"DEL of its own counter": rdb.Del(ctx, idgenCounterKey).Err(),
			}
		},
		recorded: []string{"idgen.fetch", "evalsha", "redkit.idgen"},
		markers:  []string{"zq-", "4242424"},
		exercise: exerciseIdgen,
	},
	{
		name:       "stock",
		aclFile:    "../stock/redis.acl",
		aclUser:    "redkit-stock",
		foreignKey: "redkit:wallet:v1:{x}:acct:x",
		refused: func(ctx context.Context, rdb *redis.Client) map[string]error {
			return map[string]error{
				"DEL of a SKU": rdb.Del(ctx, "redkit:stock:v1:{zq-shop}:sku:"+stockSKU).Err(),
			}
		},
		recorded: []string{"stock.deduct", "stock.reserve", "evalsha", "redkit.stock.operations"},
		markers:  []string{"zq-", "918273", "4711000", "4242424"},
		exercise: exerciseStock,
	},
	{
		name:       "wallet",
		aclFile:    "../wallet/redis.acl",
		aclUser:    "redkit-wallet",
		foreignKey: "redkit:stock:v1:{x}:sku:x",
		refused: func(ctx context.Context, rdb *redis.Client) map[string]error {
			return map[string]error{
				"DEL of an account": rdb.Del(ctx, "redkit:wallet:v2:{zq-shop}:acct:"+walletAlice).Err(),
			}
		},
		recorded: []string{"wallet.debit", "wallet.transfer", "evalsha", "redkit.wallet.operations"},
		markers: []string{"zq-", "ZQX", "313370", "987654321", "123456789", "8765432100",
			"555555", "666666", "7777777", "4242424"},
		exercise: exerciseWallet,
	},
}

// The user in each module's redis.acl can run everything the module does
// and nothing else: the module's whole public operation set (including the
// NOSCRIPT path, pub/sub wake-ups, the journal consumer, cross-group
// transfers and WAIT) succeeds as that user, Check reports only settings of
// unknown severity instead of failing on the refused CONFIG GET, and
// FLUSHALL, KEYS, CONFIG GET, keys outside the patterns, another module's
// keys, scripts touching an outside key and the module's own refusals (a
// DEL of its keys, a channel outside its patterns) are refused.
func TestACL_leastPrivilege(t *testing.T) {
	for _, m := range modules {
		t.Run(m.name, func(t *testing.T) {
			s, password := redistest.NewWithACL(t, m.aclFile)
			rdb := s.Client(func(o *redis.Options) { o.Username, o.Password = m.aclUser, password })
			admin := s.Client()
			ctx := t.Context()

			got := m.exercise(t, env{rdb: rdb, admin: admin})

			require.NotEmpty(t, got.report.Findings)
			for _, f := range got.report.Findings {
				require.Equal(t, health.Unknown, f.Severity, "%+v", f)
			}
			if testing.Verbose() {
				t.Log(admin.Info(ctx, "commandstats").Val())
			}
			redistest.RequireLeastPrivilege(t, rdb, m.foreignKey, m.refused(ctx, rdb))
		})
	}
}

// Every module works over TLS: one server and one 3-master Cluster that
// accept TLS connections only, with a CA generated in the test, and each
// module's whole operation set (lock's notified waiting and fence checks
// included) run on both.
func TestTLS_everyModule(t *testing.T) {
	certs := redistest.NewTLS(t)
	servers := []struct {
		name string
		rdb  redis.UniversalClient
	}{
		{"single", redistest.New(t, redistest.Options{TLS: certs}).Client()},
		{"cluster", redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Options: redistest.Options{TLS: certs}}).Client()},
	}
	for _, m := range modules {
		t.Run(m.name, func(t *testing.T) {
			for _, srv := range servers {
				t.Run(srv.name, func(t *testing.T) {
					m.exercise(t, env{rdb: srv.rdb, admin: srv.rdb})
				})
			}
		})
	}
}

// No module's telemetry records its callers' data: lock names, owner IDs
// and fencing tokens; generator and service names and issued IDs; SKUs,
// order, buyer and operation IDs and quantities; account, transaction and
// hold IDs, amounts, currencies and memos. Not in the module's own spans
// and metrics, and not in the go-redis command traces switched on with
// otelx.InstrumentRedis; the scan is shown to have seen the module's spans
// and metrics.
func TestTelemetry_recordsNoSecrets(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	for _, m := range modules {
		t.Run(m.name, func(t *testing.T) {
			tel := otelxtest.New(t)
			rdb := s.Client()
			require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))

			got := m.exercise(t, env{rdb: rdb, admin: rdb, tel: tel})

			tel.RequireRecorded(t, m.recorded...) // the scan sees what was recorded
			tel.RequireNoSecrets(t, slices.Concat(m.markers, got.secrets)...)
		})
	}
}

// exerciseLock runs every kind of lock: a mutex with fencing, notified
// waiting and a fence check, a fair mutex, a semaphore, a read-write lock,
// a mutex waiting for replicas, Do, a Redlock and a script reloaded after
// SCRIPT FLUSH.
func exerciseLock(t *testing.T, e env) ran {
	ctx := t.Context()
	var opts []lock.Option
	if e.tel != nil {
		opts = append(opts, lock.WithTracerProvider(e.tel.TracerProvider), lock.WithMeterProvider(e.tel.MeterProvider))
	}
	locks, err := lock.New(e.rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = locks.Close() })

	const name = "zq-tenant/zq-payout-lock"
	require.NoError(t, e.rdb.Set(ctx, lockCounterKey(name), 4242424, 0).Err())
	m := locks.Mutex(name, lock.WithTTL(time.Second))
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, l.Fence().Token)
	secrets := []string{strconv.FormatUint(l.Fence().Token, 10)}
	secrets = append(secrets, heldOwners(t, e)...)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	waited := waitFor(locks.Mutex(name, lock.WithTTL(time.Second))) // subscribes
	require.NoError(t, l.Extend(ctx))
	fenceKey := lock.FenceKey("", "zq-resource", name)
	require.NoError(t, lock.CheckFence(ctx, e.rdb, fenceKey, l.Fence()))
	require.NoError(t, l.Release(ctx)) // publishes
	require.NoError(t, <-waited)
	require.ErrorIs(t, lock.CheckFence(ctx, e.rdb, fenceKey, lock.Fence{Name: name, Token: 4242424}), lock.ErrStaleFence)

	fair := locks.Mutex(name+"-fair", lock.WithFair(true), lock.WithTTL(time.Second))
	lf, err := fair.Acquire(ctx)
	require.NoError(t, err)
	secrets = append(secrets, heldOwners(t, e)...)
	fairWaited := waitFor(locks.Mutex(name+"-fair", lock.WithFair(true), lock.WithTTL(time.Second)))
	require.NoError(t, lf.Release(ctx))
	require.NoError(t, <-fairWaited)

	sem := locks.Semaphore(name+"-sem", 2, lock.WithTTL(time.Second))
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	secrets = append(secrets, heldOwners(t, e)...)
	require.NoError(t, p.Extend(ctx))
	require.NoError(t, p.Release(ctx))
	rw := locks.RWMutex(name+"-rw", lock.WithTTL(time.Second))
	r, err := rw.AcquireRead(ctx)
	require.NoError(t, err)
	secrets = append(secrets, heldOwners(t, e)...)
	require.NoError(t, r.Release(ctx))
	w, err := rw.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
	acked, err := locks.Mutex(name+"-acked", lock.WithReplicaAck(1, 10*time.Millisecond)).Acquire(ctx) // WAIT
	require.NoError(t, err)
	require.NoError(t, acked.Release(ctx))
	require.NoError(t, locks.Do(ctx, name+"-do", func(context.Context, *lock.Lease) error { return nil }))
	redlock, err := lock.NewRedlock([]redis.UniversalClient{e.rdb}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = redlock.Close() })
	lr, err := redlock.Mutex(name+"-redlock", lock.WithTTL(time.Second)).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, lr.Release(ctx))
	// A script not cached yet is loaded (SCRIPT LOAD / EVAL fallback).
	require.NoError(t, e.admin.ScriptFlush(ctx).Err())
	l2, err := m.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))

	rep, err := locks.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	return ran{secrets: secrets, report: rep}
}

// heldOwners returns, when e has telemetry, the owner IDs (32 hex
// characters) of the leases exerciseLock holds now, read from the lock's
// keys with e.admin: lock does not hand them out.
func heldOwners(t *testing.T, e env) []string {
	t.Helper()
	if e.tel == nil {
		return nil
	}
	ctx := t.Context()
	ks, err := e.admin.Keys(ctx, "redkit:lock:v2:{zq-tenant}:*").Result()
	require.NoError(t, err)
	var stored []string
	for _, k := range ks {
		typ, err := e.admin.Type(ctx, k).Result()
		require.NoError(t, err)
		var vs []string
		switch typ {
		case "string":
			var v string
			v, err = e.admin.Get(ctx, k).Result()
			vs = []string{v}
		case "zset":
			vs, err = e.admin.ZRange(ctx, k, 0, -1).Result()
		case "hash":
			var h map[string]string
			h, err = e.admin.HGetAll(ctx, k).Result()
			for f, v := range h {
				vs = append(vs, f, v)
			}
		case "list":
			vs, err = e.admin.LRange(ctx, k, 0, -1).Result()
		case "set":
			vs, err = e.admin.SMembers(ctx, k).Result()
		}
		require.NoError(t, err)
		stored = append(stored, vs...)
	}
	owners := ownerID.FindAllString(strings.Join(stored, " "), -1)
	require.NotEmpty(t, owners, "no owner ID in %q", ks)
	return owners
}

var ownerID = regexp.MustCompile(`[0-9a-f]{32}`)

// idgenCounterKey is the counter of exerciseIdgen's sequence.
const idgenCounterKey = "redkit:idgen:v1:{zq-tenant}:seq:zq-tenant/zq-orders"

// exerciseIdgen runs a sequence, a segment over several range fetches
// (prefetch included), a leased snowflake, and the sequence again after
// SCRIPT FLUSH.
func exerciseIdgen(t *testing.T, e env) ran {
	ctx := t.Context()
	var opts []idgen.Option
	if e.tel != nil {
		opts = append(opts, idgen.WithTracerProvider(e.tel.TracerProvider), idgen.WithMeterProvider(e.tel.MeterProvider))
	}

	const name = "zq-tenant/zq-orders"
	require.NoError(t, e.rdb.Set(ctx, idgenCounterKey, 4242424, 0).Err())
	seq, err := idgen.NewSequence(e.rdb, name, opts...)
	require.NoError(t, err)
	a, err := seq.Next(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4242425, a)
	seg, err := idgen.NewSegment(e.rdb, name+"-seg", append(opts, idgen.WithMinStep(10), idgen.WithMaxStep(10))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = seg.Close() })
	var last idgen.ID
	for range 25 { // several range fetches, prefetch included
		id, err := seg.Next(ctx)
		require.NoError(t, err)
		require.Greater(t, id, last)
		last = id
	}
	require.NoError(t, seg.Close())
	require.NoError(t, e.admin.ScriptFlush(ctx).Err()) // the next script is loaded again
	sf, err := idgen.NewLeasedSnowflake(ctx, e.rdb, "zq-service", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sf.Close() })
	sfID, err := sf.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, sf.Close())
	b, err := seq.Next(ctx)
	require.NoError(t, err)
	require.Greater(t, b, a)

	rep, err := seq.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	// A segment's IDs start at 1: too short to search for.
	return ran{secrets: []string{a.String(), sfID.String(), sfID.Base32()}, report: rep}
}

const stockSKU, stockHot = "zq-shop/zq-sku-1", "zq-shop/zq-sku-hot"

// exerciseStock runs every Inventory operation: orders (replayed, over the
// buyer limit, batched, across a SKU's buckets, sold out), reservations
// confirmed in full and in part, cancelled and left to expire, refunds,
// restocks, fenced write-offs, SCRIPT FLUSH, reclaiming, levels, audits,
// checkpoints, trims, the journal and its consumer, WAIT for replicas and a
// closed SKU, with the background reclaimer running.
func exerciseStock(t *testing.T, e env) ran {
	ctx := t.Context()
	var opts []stock.Option
	if e.tel != nil {
		opts = append(opts, stock.WithTracerProvider(e.tel.TracerProvider), stock.WithMeterProvider(e.tel.MeterProvider))
	}
	inv := newInventory(t, e.rdb, append(opts, stock.WithReclaimInterval(10*time.Millisecond))...)

	const sku, hot = stockSKU, stockHot
	require.NoError(t, inv.Create(ctx, sku, 918273000, stock.WithBuyerLimit(4711000)))
	require.NoError(t, inv.Create(ctx, hot, 918273000, stock.WithBuckets(4)))
	res, err := inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000))
	require.NoError(t, err)
	require.Equal(t, stock.Levels{Available: 918273000 - 4711000, Sold: 4711000}, res.Levels[sku])
	_, err = inv.Deduct(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000)) // replay
	require.NoError(t, err)
	_, err = inv.Deduct(ctx, order("zq-order-2", "zq-buyer-1", sku, 1)) // over the buyer limit
	require.ErrorIs(t, err, stock.ErrBuyerLimit)
	for _, r := range inv.DeductBatch(ctx, []stock.Order{
		order("zq-order-3", "zq-buyer-2", sku, 1), order("zq-order-4", "zq-buyer-3", hot, 4711000),
	}) {
		require.NoError(t, r.Err)
	}
	_, err = inv.Deduct(ctx, order("zq-order-5", "zq-buyer-4", hot, 471100000)) // more than a bucket: refills between buckets
	if err != nil {
		require.ErrorIs(t, err, stock.ErrSoldOut)
	}
	_, err = inv.Deduct(ctx, order("zq-order-6", "zq-buyer-5", hot, 918273000)) // more than is left
	require.ErrorIs(t, err, stock.ErrSoldOut)
	_, err = inv.Reserve(ctx, order("zq-order-7", "zq-buyer-6", sku, 4711000), time.Minute)
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, order("zq-order-7", "zq-buyer-6", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("zq-order-7", "zq-buyer-6", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("zq-order-8", "zq-buyer-7", sku, 3), time.Minute)
	require.NoError(t, err)
	_, err = inv.ConfirmPartial(ctx, order("zq-order-8", "zq-buyer-7", sku, 3), []stock.Item{{SKU: sku, Qty: 2}})
	require.NoError(t, err)
	_, err = inv.Reserve(ctx, order("zq-order-9", "zq-buyer-8", sku, 1), time.Second)
	require.NoError(t, err)
	_, err = inv.Cancel(ctx, order("zq-order-10", "zq-buyer-9", sku, 1)) // before its reserve: a tombstone
	require.NoError(t, err)
	_, err = inv.Refund(ctx, order("zq-order-1", "zq-buyer-1", sku, 4711000))
	require.NoError(t, err)
	_, err = inv.Restock(ctx, "zq-op-1", sku, 4711000)
	require.NoError(t, err)
	_, err = inv.WriteOff(ctx, "zq-op-2", sku, 4711000, stock.WithFence(lock.Fence{Name: "zq-inventory", Token: 4242424}))
	require.NoError(t, err)
	require.NoError(t, e.admin.ScriptFlush(ctx).Err()) // the next scripts are loaded again
	_, err = inv.Deduct(ctx, order("zq-order-11", "zq-buyer-10", sku, 1))
	require.NoError(t, err)
	_, err = inv.Reclaim(ctx, sku)
	require.NoError(t, err)
	for _, k := range []string{sku, hot} {
		_, err = inv.Level(ctx, k)
		require.NoError(t, err)
		rep, err := inv.Audit(ctx, k)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%+v", rep)
		_, err = inv.Checkpoint(ctx, k)
		require.NoError(t, err)
		_, err = inv.Trim(ctx, k)
		require.NoError(t, err)
	}
	_, _, err = inv.Entries(ctx, sku, "", 100)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	got := 0
	err = inv.Consume(cctx, stock.Consumer{Group: "zq-warehouse", Name: "zq-c-1", SKUs: []string{sku, hot}},
		func(_ context.Context, es []stock.Entry) error {
			if got += len(es); got > 0 {
				cancel()
			}
			return nil
		})
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Positive(t, got)
	acked := newInventory(t, e.rdb, append(opts, stock.WithReplicaAck(1, 10*time.Millisecond))...) // WAIT: no replica acknowledges
	_, err = acked.Deduct(ctx, order("zq-order-12", "zq-buyer-11", sku, 1))
	require.ErrorIs(t, err, stock.ErrReplicaAck)
	require.NoError(t, inv.CloseSKU(ctx, sku))
	_, err = inv.Deduct(ctx, order("zq-order-13", "zq-buyer-12", sku, 1))
	require.ErrorIs(t, err, stock.ErrSKUClosed)

	rep, err := inv.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	return ran{report: rep}
}

const walletAlice = "zq-shop/zq-alice"

// exerciseWallet runs every Ledger operation: accounts opened with a
// currency and an overdraft, credits (replayed), debits (refused for want
// of funds), transfers within and across slot groups, batched transfers,
// holds captured and voided with a fence, SCRIPT FLUSH, recovery, balances,
// the journal, verification, checkpoints, a trial balance, a closed account
// and WAIT for replicas, with background recovery on.
func exerciseWallet(t *testing.T, e env) ran {
	ctx := t.Context()
	var opts []wallet.Option
	if e.tel != nil {
		opts = append(opts, wallet.WithTracerProvider(e.tel.TracerProvider), wallet.WithMeterProvider(e.tel.MeterProvider))
	}
	led := newLedger(t, e.rdb, append(opts, wallet.WithRecovery(time.Second))...)

	const alice, till, bob = walletAlice, "zq-shop/zq-till", "zq-other/zq-bob"
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("ZQX"), wallet.WithOverdraft(313370)))
	}
	_, err := led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"})
	require.NoError(t, err)
	_, err = led.Credit(ctx, wallet.Tx{ID: "zq-tx-1", Account: alice, Amount: 987654321, Memo: "zq-memo"}) // replay
	require.NoError(t, err)
	res, err := led.Debit(ctx, wallet.Tx{ID: "zq-tx-2", Account: alice, Amount: 123456789, Currency: "ZQX"})
	require.NoError(t, err)
	require.EqualValues(t, 987654321-123456789, res.Balance.Posted)
	_, err = led.Debit(ctx, wallet.Tx{ID: "zq-tx-3", Account: alice, Amount: 8765432100})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-4", From: alice, To: till, Amount: 555555})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "zq-tx-5", From: alice, To: bob, Amount: 666666}) // across slot groups: two-phase
	require.NoError(t, err)
	for _, r := range led.TransferBatch(ctx, []wallet.Transfer{{ID: "zq-tx-6", From: alice, To: till, Amount: 555555}}) {
		require.NoError(t, r.Err)
	}
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-1", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Capture(ctx, alice, "zq-hold-1", 7777777)
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "zq-hold-2", Account: alice, Amount: 77777777, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Void(ctx, alice, "zq-hold-2", wallet.WithFence(lock.Fence{Name: "zq-payouts", Token: 4242424}))
	require.NoError(t, err)
	require.NoError(t, e.admin.ScriptFlush(ctx).Err()) // the next scripts are loaded again
	_, err = led.Credit(ctx, wallet.Tx{ID: "zq-tx-7", Account: bob, Amount: 987654321})
	require.NoError(t, err)
	_, err = led.Recover(ctx)
	require.NoError(t, err)
	_, err = led.Balance(ctx, alice)
	require.NoError(t, err)
	_, _, err = led.Entries(ctx, alice, "", 100)
	require.NoError(t, err)
	for _, a := range []string{alice, till, bob} {
		require.NoError(t, led.Verify(ctx, a))
		_, _, err = led.Checkpoint(ctx, a)
		require.NoError(t, err)
	}
	trial, err := led.TrialBalance(ctx, alice, till)
	require.NoError(t, err)
	require.True(t, trial.Balanced())
	require.NoError(t, led.CloseAccount(ctx, till))
	acked := newLedger(t, e.rdb, append(opts, wallet.WithRecovery(0), wallet.WithReplicaAck(1, 10*time.Millisecond))...) // WAIT: no replica acknowledges
	_, err = acked.Credit(ctx, wallet.Tx{ID: "zq-tx-8", Account: bob, Amount: 987654321})
	require.ErrorIs(t, err, wallet.ErrReplicaAck)

	rep, err := led.Check(ctx)
	require.NoError(t, err, "Check degrades instead of failing")
	return ran{report: rep}
}

// lockCounterKey is the key of the fence counter that lock keeps for the
// slot of name (default key prefix): its hash tag is the smallest decimal
// number in that slot.
func lockCounterKey(name string) string {
	group, _, _ := strings.Cut(name, "/")
	slot := redistest.KeySlot(group)
	for i := 0; ; i++ {
		if tag := strconv.Itoa(i); redistest.KeySlot(tag) == slot {
			return "redkit:lock:v2:{" + tag + "}:tokens"
		}
	}
}

// waitFor starts Acquire on m in the background (30s context) and returns
// its result channel; the lease is released before the result is sent.
// lock's tests keep their own copy: a module cannot import another's test
// files.
func waitFor(m interface {
	Acquire(context.Context) (*lock.Lease, error)
}) <-chan error {
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := m.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	return got
}

// newInventory is stock.New, closed at the end of t.
func newInventory(t *testing.T, rdb redis.UniversalClient, opts ...stock.Option) *stock.Inventory {
	t.Helper()
	inv, err := stock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inv.Close()) })
	return inv
}

// newLedger is wallet.New, closed at the end of t.
func newLedger(t *testing.T, rdb redis.UniversalClient, opts ...wallet.Option) *wallet.Ledger {
	t.Helper()
	led, err := wallet.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, led.Close()) })
	return led
}

// order is a stock order of one item.
func order(id, buyer, sku string, qty int64) stock.Order {
	return stock.Order{ID: id, Buyer: buyer, Items: []stock.Item{{SKU: sku, Qty: qty}}}
}
