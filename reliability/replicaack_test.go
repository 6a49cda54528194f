package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// TestWallet_refusalWithoutReplicaAck_failover: with WithReplicaAck, a debit
// refused for insufficient funds while no replica acknowledges it must be
// reported with ErrReplicaAck: a failover can forget the refusal's marker,
// and the same transaction ID, sent again, is then applied. A refusal
// reported without ErrReplicaAck must survive the failover.
func TestWallet_refusalWithoutReplicaAck_failover(t *testing.T) {
	ctx := t.Context()
	p := redistest.NewPair(t, redistest.Options{})
	ledger := func(s *redistest.Server) *wallet.Ledger {
		l, err := wallet.New(s.Client(func(o *redis.Options) { o.ReadTimeout = time.Second }),
			wallet.WithReplicaAck(1, 100*time.Millisecond), wallet.WithRetry(1, time.Millisecond, time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	led := ledger(p.Primary)
	// The account is set up without acknowledgement (Open honours
	// WithReplicaAck too, and this test is about the refusal), then the
	// replica is brought in sync.
	opener, err := wallet.New(p.Primary.Client())
	require.NoError(t, err)
	defer opener.Close()
	require.NoError(t, opener.Open(ctx, "acct", wallet.WithCurrency("CNY")))
	require.NoError(t, p.Sync(ctx))

	// A failover begins: the replica is promoted (as Sentinel or an
	// operator does first), while the old primary still answers.
	promote(t, p)
	debit := wallet.Tx{ID: "pay-1", Account: "acct", Amount: 10}
	_, err = led.Debit(ctx, debit)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	refusalAcked := !errors.Is(err, wallet.ErrReplicaAck)

	// The old primary is made a replica of the new one: what only it had,
	// the refusal's marker included, is gone.
	demote(t, p)
	plain, err := wallet.New(p.Primary.Client())
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "acct", Amount: 100})
	require.NoError(t, err)

	// The caller (or a queue redelivering the request) sends the declined
	// payment again.
	_, err = ledger(p.Primary).Debit(ctx, debit)
	bal, berr := plain.Balance(ctx, "acct")
	require.NoError(t, berr)
	t.Logf("refusal reported with ErrReplicaAck: %v; resubmission: %v; balance %d", !refusalAcked, err, bal.Posted)
	require.True(t, !refusalAcked || errors.Is(err, wallet.ErrInsufficientFunds) && bal.Posted == 100,
		"the refusal was reported without ErrReplicaAck, so it had to survive the failover; "+
			"instead the declined payment was taken when sent again (balance %d)", bal.Posted)
	require.False(t, refusalAcked, "a refusal no replica acknowledged is reported with ErrReplicaAck")
}

// TestStock_refusalWithReplicaAck_failover is the same sequence for stock,
// which reports the shortfall with the refusal, so the caller knows the
// refusal may not survive.
func TestStock_refusalWithReplicaAck_failover(t *testing.T) {
	ctx := t.Context()
	p := redistest.NewPair(t, redistest.Options{})
	inv, err := stock.New(p.Primary.Client(func(o *redis.Options) { o.ReadTimeout = time.Second }),
		stock.WithReplicaAck(1, 100*time.Millisecond), stock.WithRetry(1, 0, 0))
	require.NoError(t, err)
	defer inv.Close()
	admin, err := stock.New(p.Primary.Client())
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.Create(ctx, "sku", 0))
	require.NoError(t, p.Sync(ctx))

	promote(t, p)
	_, err = inv.Deduct(ctx, stock.Order{ID: "o-1", Buyer: "b", Items: []stock.Item{{SKU: "sku", Qty: 1}}})
	require.ErrorIs(t, err, stock.ErrSoldOut)
	require.ErrorIs(t, err, stock.ErrReplicaAck, "a refusal the replica did not acknowledge is reported as such")
}

// TestWallet_crossGroupCreditWithoutReplicaAck_failover: with WithReplicaAck,
// a transfer across slot groups whose destination credit (step 2) no
// replica acknowledged must not post the source (step 3) on the strength of
// it: a failover loses the credit, and the debit would stay, the same
// transfer sent again would report success and Recover would find nothing
// to do. The package promises that such a transfer "ends posted or voided,
// never both, and no money is created or destroyed".
//
// Every reply is delayed by a proxy so that the test can act between the
// steps; it watches the keys to know when each step has run.
func TestWallet_crossGroupCreditWithoutReplicaAck_failover(t *testing.T) {
	ctx := t.Context()
	p, rdb, pxA, pxB, target := proxiedPair(t)
	a, b := p.Primary, p.Replica
	led, err := wallet.New(rdb, wallet.WithReplicaAck(1, 100*time.Millisecond))
	require.NoError(t, err)
	defer led.Close()
	plain, err := wallet.New(a.Client())
	require.NoError(t, err)
	defer plain.Close()
	for _, acct := range []string{"gx/a", "gy/b"} {
		require.NoError(t, plain.Open(ctx, acct, wallet.WithCurrency("CNY")))
	}
	_, err = plain.Credit(ctx, wallet.Tx{ID: "fund", Account: "gx/a", Amount: 100})
	require.NoError(t, err)
	require.NoError(t, p.Sync(ctx))
	pxA.SetLatency(300 * time.Millisecond)
	pxB.SetLatency(300 * time.Millisecond)

	tr := wallet.Transfer{ID: "x-1", From: "gx/a", To: "gy/b", Amount: 30}
	first := make(chan error, 1)
	go func() { _, err := led.Transfer(ctx, tr); first <- err }()
	exists := func(key string) func(*redis.Client) bool {
		return func(c *redis.Client) bool { n, _ := c.Exists(ctx, key).Result(); return n > 0 }
	}
	// Step 1 (hold on the source) has run and reached the replica: the
	// replica is promoted (a failover begins) before step 2 runs.
	waitUntil(t, "the hold on the primary", a, exists("redkit:wallet:v2:{gx}:tx:x-1"))
	waitUntil(t, "the hold on the replica", b, exists("redkit:wallet:v2:{gx}:tx:x-1"))
	promote(t, p)
	// Step 2 (credit at the destination) runs on the old primary, which no
	// replica acknowledges any more; then the old primary is demoted, and
	// step 3 (post the source) goes to the new primary.
	waitUntil(t, "the credit on the old primary", a, exists("redkit:wallet:v2:{gy}:xin:gx/x-1"))
	demote(t, p)
	target(pxB)

	err = <-first
	t.Logf("first call: %v", err)
	pxB.SetLatency(0)
	_, again := led.Transfer(ctx, tr)
	n, rerr := led.Recover(ctx)
	require.NoError(t, rerr)
	trial, terr := led.TrialBalance(ctx, "gx/a", "gy/b")
	require.NoError(t, terr)
	src, _ := led.Balance(ctx, "gx/a")
	dst, _ := led.Balance(ctx, "gy/b")
	t.Logf("sent again: %v; Recover handled %d; source posted %d, destination posted %d; %+v", again, n, src.Posted, dst.Posted, trial)
	require.Equal(t, int64(100), src.Posted+dst.Posted, "money was destroyed")
	require.Zero(t, trial.NetTransfers(), "a transfer that is both posted and not credited")
}

// homeBucket is stock's routing of a buyer to a bucket (documented in
// stock/scripts/deduct.lua): hash = hash*31 + byte, mod 2^32, mod buckets.
func homeBucket(buyer string, buckets int) int {
	var h uint32
	for i := 0; i < len(buyer); i++ {
		h = h*31 + uint32(buyer[i])
	}
	return int(h % uint32(buckets))
}

// TestStock_bucketTransferWithoutReplicaAck_failover: with WithReplicaAck,
// a refill between the buckets of a hot SKU credits the receiving bucket
// without the replica's acknowledgement, then deletes the giving bucket's
// out-record. A failover that loses the credit but keeps the deletion
// destroys the units in flight (the audit identity breaks), and, because
// the receiving bucket applies transfers strictly in order, every later
// transfer between the two buckets fails as "an earlier transfer is
// missing". The package promises that each transfer "is credited exactly
// once however often, however late and by however many callers it is
// finished" and that Audit counts the units in flight.
//
// Every reply is delayed by a proxy so that the test can act between the
// steps; it watches the keys to know when each step has run.
func TestStock_bucketTransferWithoutReplicaAck_failover(t *testing.T) {
	ctx := t.Context()
	p, rdb, pxA, pxB, target := proxiedPair(t)
	a, b := p.Primary, p.Replica
	admin, err := stock.New(a.Client())
	require.NoError(t, err)
	defer admin.Close()
	// Two buckets of 5 units; the buyer's home bucket must be refilled
	// from the other one to sell 7.
	require.NoError(t, admin.Create(ctx, "hot", 10, stock.WithBuckets(2)))
	require.NoError(t, p.Sync(ctx))
	inv, err := stock.New(rdb, stock.WithReplicaAck(1, 100*time.Millisecond))
	require.NoError(t, err)
	defer inv.Close()
	buyer := "b0"
	for i := 1; homeBucket(buyer, 2) != 1; i++ {
		buyer = fmt.Sprintf("b%d", i)
	}
	tagOf := map[int]string{0: "{hot}", 1: "{hot#1}"}
	pxA.SetLatency(300 * time.Millisecond)
	pxB.SetLatency(300 * time.Millisecond)

	first := make(chan error, 1)
	go func() {
		_, err := inv.Deduct(ctx, stock.Order{ID: "o-1", Buyer: buyer, Items: []stock.Item{{SKU: "hot", Qty: 7}}})
		first <- err
	}()
	outRecord := func(c *redis.Client) bool {
		m, _ := c.HGetAll(ctx, "redkit:stock:v1:"+tagOf[0]+":transfers:hot").Result()
		for k := range m {
			if len(k) > 2 && k[:2] == "t-" {
				return true
			}
		}
		return false
	}
	credited := func(c *redis.Client) bool {
		n, _ := c.XLen(ctx, "redkit:stock:v1:"+tagOf[1]+":journal:hot").Result()
		return n >= 2 // create, transfer_in
	}
	// The units left bucket 0 and the replica has that: a failover begins.
	waitUntil(t, "the out-record on the primary", a, outRecord)
	waitUntil(t, "the out-record on the replica", b, outRecord)
	promote(t, p)
	// Bucket 1 is credited on the old primary only; then the old primary
	// is demoted, and the out-record's deletion goes to the new primary.
	waitUntil(t, "the credit on the old primary", a, credited)
	demote(t, p)
	target(pxB)

	err = <-first
	t.Logf("order: %v", err)
	require.ErrorIs(t, err, stock.ErrUnknownOutcome, "the credit was not acknowledged: the order is not decided")
	pxB.SetLatency(0)
	require.True(t, outRecord(b.Client()), "the transfer stays in flight on the new primary")
	check, err := stock.New(b.Client())
	require.NoError(t, err)
	defer check.Close()
	rep, aerr := check.Audit(ctx, "hot")
	require.NoError(t, aerr)
	t.Logf("audit: supply %d, levels %+v, in flight %d, problems %v", rep.Supply, rep.Levels, rep.InFlight, rep.Problems)
	require.Empty(t, rep.Problems, "units in flight are counted")

	// The failover ends as Sentinel ends one: the demoted primary's client
	// connections are dropped (CLIENT KILL TYPE normal), so no call reaches
	// it on a pooled connection, and it has caught up as a replica. The
	// order sent again then finishes the transfer and is decided, every
	// step of it acknowledged (its ID claim included). A replica that has
	// just resynced can take more than 100ms to acknowledge under -race, so
	// the call sent again allows it a second.
	pxA.ResetConnections()
	require.NoError(t, p.Sync(ctx))
	again, err := stock.New(rdb, stock.WithReplicaAck(1, time.Second))
	require.NoError(t, err)
	defer again.Close()
	_, err = again.Deduct(ctx, stock.Order{ID: "o-1", Buyer: buyer, Items: []stock.Item{{SKU: "hot", Qty: 7}}})
	require.NoError(t, err)
	_, err = check.Deduct(ctx, stock.Order{ID: "o-2", Buyer: buyer, Items: []stock.Item{{SKU: "hot", Qty: 1}}})
	t.Logf("a later order from the same bucket: %v", err)
	require.NoError(t, err)
	rep, aerr = check.Audit(ctx, "hot")
	require.NoError(t, aerr)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, int64(8), rep.Levels.Sold)
	require.Equal(t, int64(10), rep.Levels.Available+rep.Levels.Sold+rep.InFlight)
}

// proxiedPair starts a primary and a replica, each behind a fault proxy,
// and a client that dials whichever proxy target last named (the primary's
// at first), as a client that follows a failover does.
func proxiedPair(t *testing.T) (p *redistest.Pair, rdb *redis.Client, pxA, pxB *redistest.Proxy, target func(*redistest.Proxy)) {
	p = redistest.NewPair(t, redistest.Options{})
	pxA, pxB = redistest.NewProxy(t, p.Primary.Addr()), redistest.NewProxy(t, p.Replica.Addr())
	var addr atomic.Pointer[string]
	target = func(px *redistest.Proxy) { a := px.Addr(); addr.Store(&a) }
	target(pxA)
	rdb = redis.NewClient(&redis.Options{Addr: "primary", ReadTimeout: 2 * time.Second,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *addr.Load())
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	return p, rdb, pxA, pxB, target
}

// promote makes p's replica a primary, as Sentinel or an operator does
// first in a failover: both answer as primaries until demote.
func promote(t *testing.T, p *redistest.Pair) {
	require.NoError(t, p.Replica.Client().Do(t.Context(), "REPLICAOF", "NO", "ONE").Err())
}

// demote ends a failover that promote began: p's old primary becomes a
// replica of the new one (what only it had is gone), and p's roles swap.
func demote(t *testing.T, p *redistest.Pair) {
	host, port, _ := net.SplitHostPort(p.Replica.Addr())
	require.NoError(t, p.Primary.Client().Do(t.Context(), "REPLICAOF", host, port).Err())
	p.Primary, p.Replica = p.Replica, p.Primary
}

// waitUntil polls s until cond holds, and fails t after 20 seconds.
func waitUntil(t *testing.T, what string, s *redistest.Server, cond func(c *redis.Client) bool) {
	t.Helper()
	c := s.Client()
	for deadline := time.Now().Add(20 * time.Second); !cond(c); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
