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
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// bankInput is one call on a single account.
type bankInput struct {
	kind   string // "credit", "debit", "read", or "replay" (an earlier tx sent again)
	amount int64
}

type bankOutput struct {
	applied  bool  // credit/debit accepted
	replayed bool  // Result.Replayed
	balance  int64 // Posted after the op (credit/debit accepted, read)
}

// bankModel is an account that may not go negative, with idempotent
// postings: a resubmitted transaction changes nothing and says so.
var bankModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(int64), input.(bankInput), output.(bankOutput)
		switch in.kind {
		case "credit":
			return out.applied && !out.replayed && out.balance == s+in.amount, s + in.amount
		case "debit":
			if s-in.amount < 0 {
				return !out.applied && !out.replayed, s
			}
			return out.applied && !out.replayed && out.balance == s-in.amount, s - in.amount
		case "replay":
			return out.replayed, s
		}
		return out.balance == s, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(bankInput), output.(bankOutput)
		return fmt.Sprintf("%s(%d) -> applied=%v replayed=%v balance=%d", in.kind, in.amount, out.applied, out.replayed, out.balance)
	},
}

func TestLedger_linearizableUnderHeldReplies(t *testing.T) {
	ctx := t.Context()
	_, _, prefix := newLedger(t)
	px := redistest.NewProxy(t, shared.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	led := mustNew(t, rdb, wallet.WithKeyPrefix(prefix))
	require.NoError(t, led.Open(ctx, "acct", wallet.WithCurrency("CNY")))

	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			px.HoldReplies(300 * time.Millisecond)
			time.Sleep(15 * time.Millisecond)
			px.HoldReplies(0)
		}
	})

	const clients, perClient = 8, 1000
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 11))
			var done []wallet.Tx // definite, accepted or refused
			var doneOut []string
			for i := range perClient {
				var in bankInput
				var tx wallet.Tx
				isDebit := false
				switch k := r.IntN(100); {
				case k < 10 && len(done) > 0:
					in.kind = "replay"
					j := r.IntN(len(done))
					tx, isDebit = done[j], doneOut[j][0] == 'd'
				case k < 45:
					in = bankInput{kind: "credit", amount: int64(1 + r.IntN(100))}
				case k < 85:
					in, isDebit = bankInput{kind: "debit", amount: int64(1 + r.IntN(100))}, true
				default:
					in.kind = "read"
				}
				if tx.ID == "" {
					tx = wallet.Tx{ID: fmt.Sprintf("c%d-%d", c, i), Account: "acct", Amount: in.amount}
				}
				call := now()
				var out bankOutput
				if in.kind == "read" {
					var bal wallet.Balance
					var err error
					for try := 0; ; try++ {
						if bal, err = led.Balance(ctx, "acct"); err == nil || try > 100 {
							break
						}
					}
					if err != nil {
						t.Errorf("read: %v", err)
						return
					}
					out.balance = bal.Posted
				} else {
					res, _, err := definite(ctx, func() (wallet.Result, error) {
						if isDebit {
							return led.Debit(ctx, tx)
						}
						return led.Credit(ctx, tx)
					})
					if err != nil && !errors.Is(err, wallet.ErrInsufficientFunds) {
						t.Errorf("%s: %v", tx.ID, err)
						return
					}
					out = bankOutput{applied: err == nil, replayed: res.Replayed, balance: res.Balance.Posted}
					answer := fmt.Sprintf("%v %d %s", err, res.Balance.Posted, res.EntryID)
					if in.kind == "replay" {
						j := indexOfTx(done, tx.ID)
						if doneOut[j][1:] != answer {
							t.Errorf("%s: resubmission answered %q, first answer %q", tx.ID, answer, doneOut[j][1:])
							return
						}
					} else {
						done = append(done, tx)
						kind := "c"
						if isDebit {
							kind = "d"
						}
						doneOut = append(doneOut, kind+answer)
					}
				}
				ret := now()
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	faults.Wait()
	px.HoldReplies(0)
	require.Len(t, history, clients*perClient)

	res := porcupine.CheckOperationsTimeout(bankModel, history, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history is not linearizable (Unknown means the check timed out)")
	require.NoError(t, led.Verify(ctx, "acct"))
}

func indexOfTx(txs []wallet.Tx, id string) int {
	for i, tx := range txs {
		if tx.ID == id {
			return i
		}
	}
	return -1
}
