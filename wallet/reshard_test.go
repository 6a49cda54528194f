package wallet_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// TestWritePaths_Cluster_underResharding: the write paths beside
// TestLedger_Cluster_underResharding's, on an ordinary ClusterClient while
// the slots of every key involved are moved again and again, key by key
// with a pause: Hold then Capture or Void, TransferBatch (within groups;
// across groups it refuses), and a fenced Credit (the fence counter in a slot of its own). No
// error reaches the caller, every balance equals its answered operations,
// no hold stays held, and Verify finds nothing.
func TestWritePaths_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	led := mustNew(t, rdb)
	defer led.Close()
	groups := []string{"wh1", "wh2"}
	var accounts, tags []string
	want := map[string]int64{}
	for _, g := range groups {
		tags = append(tags, "{"+g+"}")
		for _, a := range []string{"/a", "/b"} {
			require.NoError(t, led.Open(ctx, g+a, wallet.WithCurrency("CNY")))
			_, err := led.Credit(ctx, wallet.Tx{ID: "seed-" + g + a, Account: g + a, Amount: 1_000_000})
			require.NoError(t, err)
			accounts = append(accounts, g+a)
			want[g+a] = 1_000_000
		}
	}
	// The fence's counter: lock v2 keeps one per cluster slot of the name.
	fence := lock.Fence{Name: "wf/payouts", Token: 1}
	tags = append(tags, "{wf}")
	for _, tag := range tags {
		for i := range 10 {
			require.NoError(t, rdb.Set(ctx, fmt.Sprintf("%s:fill:%d", tag, i), i, 0).Err())
		}
	}
	stop := c.Reshard(ctx, tags, redistest.MoveOptions{Batch: 1, Pause: 10 * time.Millisecond})
	const workers, rounds = 4, 24
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		tokens sync.Mutex // fenced credits send strictly increasing tokens
		token  uint64
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		errs = append(errs, fmt.Errorf(format, a...))
		mu.Unlock()
	}
	apply := func(moves map[string]int64) {
		mu.Lock()
		for a, d := range moves {
			want[a] += d
		}
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() {
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
	}
	wg.Wait()
	st := stop()
	require.NoError(t, st.Err)
	t.Logf("%d rounds while %d slot moves migrated %d keys; %d errors", workers*rounds, st.Moves, st.Keys, len(errs))
	require.Positive(t, st.Moves)
	require.Empty(t, errs, "errors returned to the caller")
	for _, a := range accounts {
		b, err := led.Balance(ctx, a)
		require.NoError(t, err)
		require.Equal(t, want[a], b.Posted, a)
		require.Zero(t, b.Held, a)
		require.NoError(t, led.Verify(ctx, a))
	}
	tb, err := led.TrialBalance(ctx, accounts...)
	require.NoError(t, err)
	require.Zero(t, tb.NetTransfers())
}

// TestLinearizable_Cluster_underResharding: Credit, Debit and Balance of
// one account from concurrent clients on an ordinary ClusterClient while
// its slot is moved again and again, 10 keys per MIGRATE 5 ms apart: no
// error reaches a caller, and the history is linearizable against an
// account that may not go negative (porcupine): no re-sent posting applied
// twice or lost.
func TestLinearizable_Cluster_underResharding(t *testing.T) {
	ctx := t.Context()
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	// The history is the point here, not the latency: a budget beyond any
	// migration of this slot on a loaded machine (the slot moves back to
	// back, and every operation adds a marker to it), so no call gives up.
	// What the default budget absorbs is TestWritePaths_Cluster_underResharding's.
	led := mustNew(t, rdb, wallet.WithClusterBudget(time.Minute))
	defer led.Close()
	const account, clients, ops = "lw/acct", 4, 100
	require.NoError(t, led.Open(ctx, account, wallet.WithCurrency("CNY")))
	for i := range 10 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("{lw}:fill:%d", i), i, 0).Err())
	}
	stop := c.Reshard(ctx, []string{"{lw}"}, redistest.MoveOptions{Batch: 10, Pause: 5 * time.Millisecond})
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for cl := range clients {
		wg.Go(func() {
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
					t.Errorf("%s %s: %v", in.kind, tx.ID, err)
					return
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := stop()
	require.NoError(t, st.Err)
	t.Logf("%d operations while %d slot moves migrated %d keys", len(history), st.Moves, st.Keys)
	require.Positive(t, st.Moves)
	require.Len(t, history, clients*ops)
	res := porcupine.CheckOperationsTimeout(bankModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history is not linearizable (or the check timed out)")
}
