package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// definite calls op until it gives an answer that is not a transport
// failure: a result or a business refusal. Every call carries the same
// transaction, so this is how a caller resolves ErrUnknownOutcome.
func definite(ctx context.Context, op func() (wallet.Result, error)) (res wallet.Result, tries int, err error) {
	for tries = 1; ; tries++ {
		res, err = op()
		if err == nil || businessAnswer(err) || tries >= 200 || ctx.Err() != nil {
			return res, tries, err
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	}
}

func businessAnswer(err error) bool {
	for _, e := range []error{wallet.ErrInsufficientFunds, wallet.ErrAccountNotFound, wallet.ErrAccountClosed,
		wallet.ErrCurrencyMismatch, wallet.ErrConflict, wallet.ErrInvalid, wallet.ErrCrossGroup} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// outcomeOf names an answer for comparing repeated submissions.
func outcomeOf(res wallet.Result, err error) string {
	if err != nil {
		for _, e := range []error{wallet.ErrInsufficientFunds, wallet.ErrAccountNotFound, wallet.ErrAccountClosed,
			wallet.ErrCurrencyMismatch, wallet.ErrConflict, wallet.ErrInvalid} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		return "transport: " + err.Error()
	}
	return fmt.Sprintf("ok %d/%d %s %s", res.Balance.Posted, res.To.Posted, res.EntryID, res.ToEntryID)
}

type stressOp struct {
	id       string
	kind     string // credit, debit, transfer
	from, to string
	amount   int64
}

func (o stressOp) run(ctx context.Context, led *wallet.Ledger) (wallet.Result, error) {
	switch o.kind {
	case "credit":
		return led.Credit(ctx, wallet.Tx{ID: o.id, Account: o.from, Amount: o.amount})
	case "debit":
		return led.Debit(ctx, wallet.Tx{ID: o.id, Account: o.from, Amount: o.amount})
	}
	return led.Transfer(ctx, wallet.Transfer{ID: o.id, From: o.from, To: o.to, Amount: o.amount})
}

func TestLedger_mixedOperationsUnderFaults_ConcurrentSafe(t *testing.T) {
	runMixed(t, 50_000)
}

func TestChaos_Ledger_mixedOperationsUnderFaults(t *testing.T) {
	runMixed(t, 1_000_000*redistest.Chaos(t))
}

// runMixed submits total operations (credits, debits, transfers, and
// duplicate submissions of earlier ones, some concurrent with the
// original) from 64 goroutines over 16 accounts in 4 slot groups, while
// the proxy now and then holds replies back past the client's read
// timeout (go-redis then re-sends, and so does the Ledger). It then checks
// the journals and balances against every definite answer the callers got.
func runMixed(t *testing.T, total int) {
	ctx := t.Context()
	_, direct, prefix := newLedger(t)
	check := mustNew(t, direct, wallet.WithKeyPrefix(prefix))
	px := redistest.NewProxy(t, shared.Addr())
	// A quarter of the callers go through the proxy (its copying is slow
	// under -race); go-redis' default retries stay on for them.
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 250 * time.Millisecond, PoolSize: 32})
	t.Cleanup(func() { _ = rdb.Close() })
	lost := &timeouts{}
	rdb.AddHook(lost)
	faulty := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	fast := shared.Client(func(o *redis.Options) { o.PoolSize = 64 })
	t.Cleanup(func() { _ = fast.Close() })
	plain := mustNew(t, fast, wallet.WithKeyPrefix(prefix))

	var accounts []string
	overdraft := map[string]bool{}
	for g := range 4 {
		for a := range 4 {
			acct := fmt.Sprintf("g%d/a%d", g, a)
			accounts = append(accounts, acct)
			var opts []wallet.AccountOption
			if a%2 == 1 {
				opts = append(opts, wallet.WithOverdraft(500))
				overdraft[acct] = true
			}
			require.NoError(t, check.Open(ctx, acct, append(opts, wallet.WithCurrency("CNY"))...))
			_, err := check.Credit(ctx, wallet.Tx{ID: "seed-" + acct, Account: acct, Amount: 1000})
			require.NoError(t, err)
		}
	}

	stopFaults := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for {
			px.HoldReplies(400 * time.Millisecond)
			select {
			case <-stopFaults:
				px.HoldReplies(0)
				return
			case <-time.After(20 * time.Millisecond):
			}
			px.HoldReplies(0)
			select {
			case <-stopFaults:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	})

	var (
		first     sync.Map // tx ID -> outcome string of the first definite answer
		ops       sync.Map // tx ID -> stressOp
		recent    = make(chan stressOp, 256)
		next      atomic.Int64
		retried   atomic.Int64
		failures  = make(chan string, 16)
		unsettled atomic.Int64
	)
	settle := func(led *wallet.Ledger, o stressOp) {
		res, tries, err := definite(ctx, func() (wallet.Result, error) { return o.run(ctx, led) })
		if tries > 1 {
			retried.Add(1)
		}
		if err != nil && !businessAnswer(err) {
			unsettled.Add(1)
			return
		}
		out := outcomeOf(res, err)
		if prev, loaded := first.LoadOrStore(o.id, out); loaded && prev.(string) != out {
			select {
			case failures <- fmt.Sprintf("%s answered %q, earlier %q", o.id, out, prev):
			default:
			}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			led := plain
			if w%4 == 0 {
				led = faulty
			}
			for i := 0; next.Add(1) <= int64(total); i++ {
				if r.IntN(100) < 15 {
					select {
					case o := <-recent: // a duplicate, maybe while the original is in flight
						settle(led, o)
						continue
					default:
					}
				}
				o := stressOp{id: fmt.Sprintf("w%d-%d", w, i), amount: int64(1 + r.IntN(300))}
				g := r.IntN(4)
				o.from = fmt.Sprintf("g%d/a%d", g, r.IntN(4))
				switch k := r.IntN(100); {
				case k < 30:
					o.kind = "credit"
				case k < 65:
					o.kind = "debit"
				case k < 95:
					o.kind = "transfer"
					for o.to = o.from; o.to == o.from; {
						o.to = fmt.Sprintf("g%d/a%d", g, r.IntN(4))
					}
				default: // across slot groups: held, credited, posted in steps
					o.kind = "transfer"
					o.to = fmt.Sprintf("g%d/a%d", (g+1+r.IntN(3))%4, r.IntN(4))
				}
				ops.Store(o.id, o)
				select {
				case recent <- o:
				default:
				}
				settle(led, o)
			}
		})
	}
	wg.Wait()
	close(stopFaults)
	faults.Wait()
	elapsed := time.Since(start)
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	require.Zero(t, unsettled.Load(), "operations without a definite answer after 200 calls")
	t.Logf("%d operations in %v (%.0f/s); %d replies lost to timeouts; %d calls needed calling again",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), lost.n.Load(), retried.Load())
	require.NotZero(t, lost.n.Load(), "the fault proxy held no reply back")

	// A call cut short by a fault may leave a cross-group transfer's
	// bookkeeping to Recover; its money moved already.
	_, err := check.Recover(ctx)
	require.NoError(t, err)
	n, err := check.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left in flight")

	// Journals: at most one entry of each kind per transaction per account,
	// and exactly those of the accepted transactions.
	want := map[string]int64{}
	entries := map[string]map[string][]string{} // account -> tx ID -> entry kinds
	var transferSum int64
	for _, a := range accounts {
		entries[a] = map[string][]string{}
		for _, e := range entriesOf(t, check, a) {
			if e.TxID == "" {
				continue
			}
			require.NotContains(t, entries[a][e.TxID], e.Kind, "double charge: %s twice on %s", e.TxID, a)
			entries[a][e.TxID] = append(entries[a][e.TxID], e.Kind)
			limit := int64(0)
			if overdraft[a] {
				limit = -500
			}
			require.GreaterOrEqual(t, e.Posted-e.Held, limit, "%s: available below its limit", a)
			if e.Kind == wallet.KindTransferIn || e.Kind == wallet.KindTransferOut {
				transferSum += e.Delta
			}
		}
		want[a] = 1000
	}
	require.Zero(t, transferSum, "transfers net to zero")
	accepted := 0
	ops.Range(func(k, v any) bool {
		o := v.(stressOp)
		out, _ := first.Load(o.id)
		ok := len(out.(string)) > 3 && out.(string)[:3] == "ok "
		var wantFrom, wantTo []string
		switch {
		case !ok:
		case o.kind != "transfer":
			wantFrom = []string{o.kind}
		case groupOf(o.from) == groupOf(o.to):
			wantFrom, wantTo = []string{wallet.KindTransferOut}, []string{wallet.KindTransferIn}
		default:
			wantFrom, wantTo = []string{wallet.KindTransferHold, wallet.KindTransferOut}, []string{wallet.KindTransferIn}
		}
		require.Equal(t, wantFrom, entries[o.from][o.id], "%s: answer %q, entries on %s", o.id, out, o.from)
		if o.kind == "transfer" {
			require.Equal(t, wantTo, entries[o.to][o.id], "%s: answer %q, entries on %s", o.id, out, o.to)
		}
		if ok {
			accepted++
			switch o.kind {
			case "credit":
				want[o.from] += o.amount
			case "debit":
				want[o.from] -= o.amount
			default:
				want[o.from] -= o.amount
				want[o.to] += o.amount
			}
		}
		return true
	})
	t.Logf("%d distinct transactions accepted", accepted)
	for _, a := range accounts {
		require.Equal(t, want[a], balanceOf(t, check, a).Posted, "balance of %s: every acknowledged posting once", a)
		require.NoError(t, check.Verify(ctx, a))
	}
	tb := trialOf(t, check, accounts...)
	require.Zero(t, tb.NetTransfers())
	require.True(t, tb.Balanced())
}

// groupOf is an account's slot group.
func groupOf(account string) string {
	if i := strings.IndexByte(account, '/'); i >= 0 {
		return account[:i]
	}
	return account
}

// timeouts counts script calls that timed out (the command may have run).
type timeouts struct{ n atomic.Int64 }

func (h *timeouts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *timeouts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			h.n.Add(1)
		}
		return err
	}
}
func (h *timeouts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
