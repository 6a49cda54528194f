package suite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/wallet"
)

// funds is the opening balance of every account: no run drains it.
const funds = 1_000_000_000_000

// walletCases are the wallet rows.
func walletCases() []Case {
	return []Case{
		{
			Name: "wallet/blog", What: "64 debits at once on one account: SETNX lock + GET + DECRBY + DEL (retry after ~2ms)",
			Run: blogDecrement(funds, "money units"),
		},
		{
			Name: "server/wallet-debit", What: "redis-benchmark EVALSHA of redkit's posting script (debit), fresh tx ID per call, 64 clients",
			Needs: "redis-benchmark", Run: rbWalletDebit,
		},
		{
			Name: "wallet/debit-goredis", What: "64 goroutines of one go-redis client, EVALSHA of redkit's posting script as wallet.Debit sends it, fresh tx ID per call",
			Yardstick: "server/wallet-debit", Run: goredisWalletDebit,
		},
		{
			Name: "wallet/redkit-debit", What: "64 debits at once on one hot account, wallet.Debit, fresh tx ID per call",
			Yardstick: "wallet/debit-goredis", Also: []string{"server/wallet-debit", "wallet/blog"},
			Run: walletDebit,
		},
		{
			Name: "wallet/transfer-sync", What: "16 goroutines, Transfer within a slot group, 16 groups x 4 accounts",
			Run: transferCase(transferSync, false),
		},
		{
			Name: "wallet/transfer-batch", What: "4 callers x TransferBatch of 100 transfers within slot groups; ops = transfers",
			Yardstick: "wallet/transfer-sync",
			Run:       transferCase(transferBatch, false),
		},
		{
			Name: "wallet/transfer-cross", What: "16 goroutines, Transfer across slot groups (two-phase), one node",
			Yardstick: "wallet/transfer-sync",
			Run:       transferCase(transferCross, false),
		},
	}
}

// openFunded opens accounts (currency EUR) and credits each funds.
func openFunded(ctx context.Context, l *wallet.Ledger, accounts ...string) error {
	for _, a := range accounts {
		if err := l.Open(ctx, a, wallet.WithCurrency("EUR")); err != nil {
			return fmt.Errorf("open %s: %w", a, err)
		}
		// Transaction IDs are unique per slot group: one per account.
		fund := "fund-" + strings.ReplaceAll(a, "/", "-")
		if _, err := l.Credit(ctx, wallet.Tx{ID: fund, Account: a, Amount: funds}); err != nil {
			return fmt.Errorf("fund %s: %w", a, err)
		}
	}
	return nil
}

var txSeq atomic.Int64

func nextTx() string { return "tx-" + strconv.FormatInt(txSeq.Add(1), 10) }

// walletDebit runs 64 concurrent one-unit debits on one account.
func walletDebit(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	rdb, rt := client(env)
	defer rdb.Close()
	l, err := wallet.New(rdb, wallet.WithKeyPrefix(prefix("wallet")))
	if err != nil {
		return Sample{}, err
	}
	defer l.Close()
	if err := openFunded(ctx, l, "hot"); err != nil {
		return Sample{}, err
	}
	s := drive(ctx, d, buyers, rt, true, func(ctx context.Context, _ int) error {
		_, err := l.Debit(context.WithoutCancel(ctx), wallet.Tx{ID: nextTx(), Account: "hot", Amount: 1})
		return err
	})
	bal, err := l.Balance(ctx, "hot")
	if err != nil {
		return Sample{}, err
	}
	s.Violations = Conserved("money units (double charge)", funds, s.Ops, bal.Posted)
	if err := l.Verify(ctx, "hot"); err != nil {
		s.Violations = append(s.Violations, "Verify: "+err.Error())
	}
	return s, nil
}

// rbWalletDebit runs redkit's posting script through redis-benchmark: the
// command wallet.Debit sends for a one-unit debit of account "hot", under a
// fresh transaction ID per call.
func rbWalletDebit(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	return capturedDebit(ctx, env, func(call func(*redis.Client) error) (Sample, error) {
		return rbCaptured(ctx, env, d, call)
	})
}

// goredisWalletDebit sends the same command from 64 goroutines of go-redis.
func goredisWalletDebit(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
	return capturedDebit(ctx, env, func(call func(*redis.Client) error) (Sample, error) {
		return goredisCaptured(ctx, env, d, buyers, call)
	})
}

// capturedDebit runs replay on the command wallet.Debit sends for a one-unit
// debit of a fresh account, and checks afterwards that the calls really
// debited.
func capturedDebit(ctx context.Context, env *Env, replay func(call func(*redis.Client) error) (Sample, error)) (Sample, error) {
	rdb, _ := client(env)
	defer rdb.Close()
	p := prefix("wallet")
	l, err := wallet.New(rdb, wallet.WithKeyPrefix(p))
	if err != nil {
		return Sample{}, err
	}
	defer l.Close()
	if err := openFunded(ctx, l, "hot"); err != nil {
		return Sample{}, err
	}
	// The command wallet.Debit sends, replayed with a fresh transaction ID
	// per call.
	s, err := replay(func(c *redis.Client) error {
		capLed, err := wallet.New(c, wallet.WithKeyPrefix(p))
		if err != nil {
			return err
		}
		defer capLed.Close()
		_, err = capLed.Debit(ctx, wallet.Tx{ID: rbTemplateID, Account: "hot", Amount: 1})
		return err
	})
	if err != nil {
		return s, err
	}
	bal, err := l.Balance(ctx, "hot")
	if err != nil {
		return s, err
	}
	if spent := funds - bal.Posted; spent < s.Ops*99/100 {
		return s, fmt.Errorf("posting script debited %d in %d calls: the script's keys or arguments do not match", spent, s.Ops)
	}
	return s, nil
}

type transferMode int

const (
	transferSync  transferMode = iota // one Transfer per call, within a group
	transferBatch                     // TransferBatch, within groups
	transferCross                     // one Transfer per call, across groups
)

// transferCase runs transfers of the given mode on the single node or the cluster.
func transferCase(mode transferMode, cluster bool) func(context.Context, *Env, time.Duration) (Sample, error) {
	return func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
		if cluster {
			rdb, rt := clusterClient(env)
			defer rdb.Close()
			return transfers(ctx, rdb, rt, d, mode)
		}
		rdb, rt := client(env)
		defer rdb.Close()
		return transfers(ctx, rdb, rt, d, mode)
	}
}

// transfers moves one unit at a time between 64 accounts in 16 slot groups
// and checks afterwards that every balance moved by exactly what the callers
// were told.
func transfers(ctx context.Context, rdb redis.UniversalClient, rt *Counter, d time.Duration, mode transferMode) (Sample, error) {
	const groups, per = 16, 4
	l, err := wallet.New(rdb, wallet.WithKeyPrefix(prefix("wallet")))
	if err != nil {
		return Sample{}, err
	}
	defer l.Close()
	var accounts []string
	for g := range groups {
		for a := range per {
			accounts = append(accounts, fmt.Sprintf("g%d/a%d", g, a))
		}
	}
	if err := openFunded(ctx, l, accounts...); err != nil {
		return Sample{}, err
	}
	var (
		mu    sync.Mutex
		delta = map[string]int64{}
		moved atomic.Int64
		errs  errTally
	)
	done := func(t wallet.Transfer) {
		mu.Lock()
		delta[t.From] -= t.Amount
		delta[t.To] += t.Amount
		mu.Unlock()
		moved.Add(1)
	}
	pick := func(w int) wallet.Transfer {
		g := w % groups
		from, to := rand.N(per), rand.N(per-1)
		if to >= from {
			to++
		}
		t := wallet.Transfer{ID: nextTx(), From: fmt.Sprintf("g%d/a%d", g, from), Amount: 1}
		if mode == transferCross {
			t.To = fmt.Sprintf("g%d/a%d", (g+1+rand.N(groups-1))%groups, to)
		} else {
			t.To = fmt.Sprintf("g%d/a%d", g, to)
		}
		return t
	}
	workers, batch := 16, 100
	if mode == transferBatch {
		workers = 4
	}
	s := drive(ctx, d, workers, rt, mode != transferBatch, func(runCtx context.Context, w int) error {
		ctx := context.WithoutCancel(runCtx)
		if mode == transferBatch {
			ts := make([]wallet.Transfer, batch)
			for i := range ts {
				ts[i] = pick(rand.N(groups))
			}
			for i, r := range l.TransferBatch(ctx, ts) {
				if r.Err != nil {
					errs.add(r.Err)
					continue
				}
				done(ts[i])
			}
			return errSkip
		}
		t := pick(w)
		if _, err := l.Transfer(ctx, t); err != nil {
			errs.add(err)
			return errSkip
		}
		done(t)
		return nil
	})
	s.Ops = moved.Load()
	errs.fill(&s)
	if s.Errors > 0 {
		// Finish transfers a failed call left in flight before checking.
		if _, err := l.Recover(ctx); err != nil {
			return s, fmt.Errorf("recover: %w", err)
		}
	}
	var total int64
	for _, a := range accounts {
		bal, err := l.Balance(ctx, a)
		if err != nil {
			return s, err
		}
		total += bal.Posted
		if want := funds + delta[a]; bal.Posted != want && s.Errors == 0 {
			s.Violations = append(s.Violations, fmt.Sprintf("account %s: posted %d, callers told %d", a, bal.Posted, want))
		}
	}
	if want := int64(len(accounts)) * funds; total != want {
		s.Violations = append(s.Violations, fmt.Sprintf("money not conserved: accounts hold %d, want %d", total, want))
	}
	return s, nil
}
