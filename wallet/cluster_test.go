package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// The same calls on a Cluster: every script's keys share their account's
// slot, and replica acknowledgement waits on that slot's primary.
func TestLedger_onCluster(t *testing.T) {
	ctx := t.Context()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.ReadTimeout = 3 * time.Second })
	led := mustNew(t, rdb, wallet.WithReplicaAck(1, time.Second))
	defer led.Close()
	groups := []string{"shop-1", "shop-2", "shop-3", "shop-4", "shop-5", "shop-6"}
	for _, g := range groups {
		require.NoError(t, led.Open(ctx, g+"/alice", wallet.WithCurrency("CNY")))
		require.NoError(t, led.Open(ctx, g+"/till", wallet.WithCurrency("CNY")))
		_, err := led.Credit(ctx, wallet.Tx{ID: g + "-c", Account: g + "/alice", Amount: 100})
		require.NoError(t, err)
		res, err := led.Transfer(ctx, wallet.Transfer{ID: g + "-t", From: g + "/alice", To: g + "/till", Amount: 40})
		require.NoError(t, err)
		require.Equal(t, int64(40), res.To.Posted)
		_, err = led.Hold(ctx, wallet.HoldReq{ID: "h", Account: g + "/alice", Amount: 60, TTL: time.Minute})
		require.NoError(t, err)
		_, err = led.Capture(ctx, g+"/alice", "h", 10)
		require.NoError(t, err)
		_, err = led.Debit(ctx, wallet.Tx{ID: g + "-d", Account: g + "/alice", Amount: 51})
		require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
		require.NoError(t, led.Verify(ctx, g+"/alice"))
		_, _, err = led.Checkpoint(ctx, g+"/alice")
		require.NoError(t, err)
		require.NoError(t, led.Verify(ctx, g+"/alice"))
	}
	// Across groups (and nodes): held, credited, posted.
	res, err := led.Transfer(ctx, wallet.Transfer{ID: "x", From: "shop-1/alice", To: "shop-2/till", Amount: 5})
	require.NoError(t, err)
	require.Equal(t, int64(45), res.Balance.Posted)
	require.Equal(t, int64(45), res.To.Posted)
	_, err = led.TransferSteps(ctx, wallet.Transfer{ID: "y", From: "shop-3/alice", To: "shop-4/till", Amount: 5}, 2)
	require.NoError(t, err)
	n, err := led.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var accounts []string
	for _, g := range groups {
		accounts = append(accounts, g+"/alice", g+"/till")
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
	require.Equal(t, int64(6*90), tb.Posted)
	for _, a := range accounts {
		require.NoError(t, led.Verify(ctx, a))
	}
	rep, err := led.Check(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Findings, 3*2, "two findings per master")
}

// TestLedger_Cluster_underResharding: credits, debits and transfers within
// and across groups on an ordinary ClusterClient while the groups' slots
// are moved again and again (10 keys per MIGRATE with a pause: a split slot
// answers TRYAGAIN, a stale map meets MOVED and ASK). No error reaches the
// caller; every balance equals its confirmed operations, the trial balance
// nets to zero and Verify is clean.
func TestLedger_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c, led := reshardedLedger(t)
	groups := []string{"ws1", "ws2"}
	accounts, want := fundedGroups(t, led, groups, "/a", "/b")
	tags := []string{"{ws1}", "{ws2}"}
	const workers, ops = 4, 40
	var mu sync.Mutex
	c.WhileResharding(t, ctx, tags, redistest.MoveOptions{Batch: 10, Pause: 20 * time.Millisecond}, workers,
		func(w int, fail func(string, ...any)) {
			for i := range ops {
				g, o := groups[(w+i)%2], groups[(w+i+1)%2]
				id := fmt.Sprintf("w%d-%d", w, i)
				var err error
				moves := map[string]int64{}
				switch i % 4 {
				case 0:
					_, err = led.Credit(ctx, wallet.Tx{ID: id, Account: g + "/a", Amount: 3})
					moves[g+"/a"] = 3
				case 1:
					_, err = led.Debit(ctx, wallet.Tx{ID: id, Account: g + "/b", Amount: 2})
					moves[g+"/b"] = -2
				case 2:
					_, err = led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/a", To: g + "/b", Amount: 5})
					moves[g+"/a"], moves[g+"/b"] = -5, 5
				case 3:
					_, err = led.Transfer(ctx, wallet.Transfer{ID: id, From: g + "/b", To: o + "/a", Amount: 7})
					moves[g+"/b"], moves[o+"/a"] = -7, 7
				}
				if err != nil {
					fail("%s: %w", id, err)
					continue
				}
				mu.Lock()
				for a, d := range moves {
					want[a] += d
				}
				mu.Unlock()
			}
		})
	requireBooks(t, led, accounts, want)
}

// TestWritePaths_Cluster_underResharding: the write paths beside
// TestLedger_Cluster_underResharding's, on an ordinary ClusterClient while
// the slots of every key involved are moved again and again, key by key
// with a pause: Hold then Capture or Void, TransferBatch (within groups;
// across groups it refuses), and a fenced Credit (the fence counter in a slot of its own). No
// error reaches the caller, every balance equals its answered operations,
// no hold stays held, and Verify finds nothing.
func TestWritePaths_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c, led := reshardedLedger(t)
	groups := []string{"wh1", "wh2"}
	accounts, want := fundedGroups(t, led, groups, "/a", "/b")
	tags := []string{"{wh1}", "{wh2}"}
	// The fence's counter: lock v2 keeps one per cluster slot of the name.
	fence := lock.Fence{Name: "wf/payouts", Token: 1}
	tags = append(tags, "{wf}")
	c.Fill(t, ctx, tags, 10)
	const workers, rounds = 4, 24
	var (
		mu     sync.Mutex
		tokens sync.Mutex // fenced credits send strictly increasing tokens
		token  uint64
	)
	apply := func(moves map[string]int64) {
		mu.Lock()
		for a, d := range moves {
			want[a] += d
		}
		mu.Unlock()
	}
	c.WhileResharding(t, ctx, tags, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond}, workers,
		func(w int, fail func(string, ...any)) {
			for i := range rounds {
				g, o := groups[(w+i)%2], groups[(w+i+1)%2]
				id := fmt.Sprintf("w%d-%d", w, i)
				switch i % 3 {
				case 0: // hold, then capture part of it (even) or void it (odd)
					if _, err := led.Hold(ctx, wallet.HoldReq{ID: "h-" + id, Account: g + "/a", Amount: 10, TTL: time.Minute}); err != nil {
						fail("hold %s: %w", id, err)
						continue
					}
					if w%2 == 0 {
						if _, err := led.Capture(ctx, g+"/a", "h-"+id, 4); err != nil {
							fail("capture %s: %w", id, err)
							continue
						}
						apply(map[string]int64{g + "/a": -4})
					} else if _, err := led.Void(ctx, g+"/a", "h-"+id); err != nil {
						fail("void %s: %w", id, err)
					}
				case 1: // one pipeline of transfers within groups, one in each
					ts := []wallet.Transfer{
						{ID: "b1-" + id, From: g + "/a", To: g + "/b", Amount: 5},
						{ID: "b2-" + id, From: o + "/b", To: o + "/a", Amount: 7},
					}
					for k, r := range led.TransferBatch(ctx, ts) {
						if r.Err != nil {
							fail("batch %s: %w", ts[k].ID, r.Err)
							continue
						}
						apply(map[string]int64{ts[k].From: -ts[k].Amount, ts[k].To: ts[k].Amount})
					}
				case 2: // a fenced credit
					tokens.Lock()
					token++
					f := fence
					f.Token = token
					_, err := led.Credit(ctx, wallet.Tx{ID: "f-" + id, Account: g + "/b", Amount: 3}, wallet.WithFence(f))
					tokens.Unlock()
					if err != nil {
						fail("fenced credit %s: %w", id, err)
						continue
					}
					apply(map[string]int64{g + "/b": 3})
				}
			}
		})
	requireBooks(t, led, accounts, want)
}

// TestLinearizable_Cluster_underResharding: Credit, Debit and Balance of
// one account from concurrent clients on an ordinary ClusterClient while
// its slot is moved again and again, 10 keys per MIGRATE 5 ms apart: no
// error reaches a caller, and the history is linearizable against an
// account that may not go negative (porcupine): no re-sent posting applied
// twice or lost.
func TestLinearizable_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	// The history is the point here, not the latency: a budget beyond any
	// migration of this slot on a loaded machine (the slot moves back to
	// back, and every operation adds a marker to it), so no call gives up.
	// What the default budget absorbs is TestWritePaths_Cluster_underResharding's.
	c, led := reshardedLedger(t, wallet.WithClusterBudget(time.Minute))
	const account, clients, ops = "lw/acct", 4, 100
	require.NoError(t, led.Open(ctx, account, wallet.WithCurrency("CNY")))
	c.Fill(t, ctx, []string{"{lw}"}, 10)
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
	)
	c.WhileResharding(t, ctx, []string{"{lw}"}, redistest.MoveOptions{Batch: 10, Pause: 5 * time.Millisecond}, clients,
		func(cl int, fail func(string, ...any)) {
			r := rand.New(rand.NewPCG(uint64(cl), 5))
			for i := range ops {
				tx := wallet.Tx{ID: fmt.Sprintf("c%d-%d", cl, i), Account: account, Amount: int64(1 + r.IntN(50))}
				in := bankInput{amount: tx.Amount}
				var out bankOutput
				var err error
				call := time.Since(start).Nanoseconds()
				switch k := r.IntN(10); {
				case k < 5:
					in.kind = "credit"
					var res wallet.Result
					res, err = led.Credit(ctx, tx)
					out = bankOutput{applied: err == nil, replayed: res.Replayed, balance: res.Balance.Posted}
				case k < 9:
					in.kind = "debit"
					var res wallet.Result
					res, err = led.Debit(ctx, tx)
					out = bankOutput{applied: err == nil, replayed: res.Replayed, balance: res.Balance.Posted}
					if errors.Is(err, wallet.ErrInsufficientFunds) {
						err = nil
					}
				default:
					in = bankInput{kind: "read"}
					var b wallet.Balance
					b, err = led.Balance(ctx, account)
					out.balance = b.Posted
				}
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					fail("%s %s: %w", in.kind, tx.ID, err)
					return
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	require.Len(t, history, clients*ops)
	res := porcupine.CheckOperationsTimeout(bankModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history is not linearizable (or the check timed out)")
}

// TestChaos_Cluster_failover: Credit, Debit, Transfer within a group and
// across groups, with replica acknowledgement, on an ordinary ClusterClient
// while the shards of both groups are failed over again and again
// (CLUSTER FAILOVER plain, FORCE and TAKEOVER, a master killed with SIGKILL
// and its replica promoted, the slot migrated). A caller that gets an error
// calls again with the same ID until it is answered: every operation is
// answered in the end, each balance equals its answered operations (none
// lost, none applied twice), Verify finds nothing and the transfers across
// groups net to zero.
func TestChaos_Cluster_failover(t *testing.T) {
	scale := redistest.Chaos(t)
	c, rdb := redistest.NewFailoverCluster(t)
	ctx := t.Context()
	led := mustNew(t, rdb, wallet.WithReplicaAck(1, time.Second))
	defer led.Close()
	groups := []string{"fa", "fb"}
	accounts, want := fundedGroups(t, led, groups, "/x", "/y")
	answers := &redistest.Answers{Kinds: map[string]error{
		"outcome unknown": wallet.ErrUnknownOutcome, "replica ack not reached": wallet.ErrReplicaAck}}
	var mu sync.Mutex
	faults := c.WhileFailingOver(t, ctx, scale, 300*time.Millisecond, []string{"{fa}", "{fb}"}, 4, func(w, i int) bool {
		g, o := groups[(w+i)%2], groups[(w+i+1)%2]
		id := fmt.Sprintf("f-%d-%d", w, i)
		tr := wallet.Transfer{ID: id, From: g + "/x", To: g + "/y", Amount: 5}
		switch i % 4 {
		case 0:
			tr = wallet.Transfer{ID: id, To: g + "/x", Amount: 3}
		case 1:
			tr = wallet.Transfer{ID: id, From: g + "/y", Amount: 2}
		case 3:
			tr = wallet.Transfer{ID: id, From: g + "/y", To: o + "/x", Amount: 7}
		}
		ok, err := answers.Call(ctx, func(ctx context.Context) error {
			var err error
			switch {
			case tr.From == "":
				_, err = led.Credit(ctx, wallet.Tx{ID: id, Account: tr.To, Amount: tr.Amount})
			case tr.To == "":
				_, err = led.Debit(ctx, wallet.Tx{ID: id, Account: tr.From, Amount: tr.Amount})
			default:
				_, err = led.Transfer(ctx, tr)
			}
			return err
		})
		if !ok {
			t.Errorf("%s never answered: %v", id, err)
			return false
		}
		mu.Lock()
		want[tr.From] -= tr.Amount
		want[tr.To] += tr.Amount
		mu.Unlock()
		return true
	})
	broken := 0
	for _, a := range accounts {
		b, err := led.Balance(ctx, a)
		require.NoError(t, err)
		if b.Posted != want[a] || b.Held != 0 || led.Verify(ctx, a) != nil {
			broken++
		}
		require.Equal(t, want[a], b.Posted, a)
		require.Zero(t, b.Held, a)
		require.NoError(t, led.Verify(ctx, a))
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	t.Logf("%d faults: %d operations answered, %d calls failed and were called again; first errors: %s",
		faults, answers.Answered(), answers.Retried(), answers.FirstErrors())
	t.Logf("chaos table | wallet Credit/Debit/Transfer | %d | %d | %d | %d", answers.Answered(), faults, answers.Retried(), broken)
	require.Zero(t, tb.NetTransfers())
}

// reshardedLedger starts a Cluster of 3 masters and a Ledger on an ordinary
// ClusterClient: one the Cluster does not refresh after a move, so it meets
// MOVED and ASK as an application's would.
func reshardedLedger(t *testing.T, opts ...wallet.Option) (*redistest.Cluster, *wallet.Ledger) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, opts...)
	t.Cleanup(func() { led.Close() })
	return c, led
}

// requireBooks requires each account's posted balance to be want's, nothing
// held, Verify to find nothing, and the transfers among accounts to net to
// zero.
func requireBooks(t *testing.T, led *wallet.Ledger, accounts []string, want map[string]int64) {
	t.Helper()
	for _, a := range accounts {
		b := balanceOf(t, led, a)
		require.Equal(t, want[a], b.Posted, a)
		require.Zero(t, b.Held, a)
		require.NoError(t, led.Verify(t.Context(), a))
	}
	require.Zero(t, trialOf(t, led, accounts...).NetTransfers())
}

// fundedGroups opens the account <g><name> for each group and name with
// 1,000,000 (openFunded) and returns the accounts and their balances.
func fundedGroups(t *testing.T, led *wallet.Ledger, groups []string, names ...string) ([]string, map[string]int64) {
	t.Helper()
	var accounts []string
	want := map[string]int64{}
	for _, g := range groups {
		for _, n := range names {
			accounts = append(accounts, g+n)
			want[g+n] = 1_000_000
		}
	}
	openFunded(t, led, want)
	return accounts, want
}
