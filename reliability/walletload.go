package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/wallet"
)

// Wallet workload shape: slot groups of GroupSize accounts checked with
// BankModel, and two accounts in different groups that trade through
// two-phase transfers, checked by their invariants only (a transfer across
// groups is visible in steps, so it is not linearizable).
const walletInitial = 100

var (
	walletGroups = []string{"wa", "wb"}
	crossPair    = [2]string{"wx/0", "wy/0"}
)

func accountName(g string, i int) string { return fmt.Sprintf("%s/%d", g, i) }

// walletRecord is what a client knows of one of its transactions.
type walletRecord struct {
	kind     string // credit, debit, transfer
	tx       wallet.Tx
	transfer wallet.Transfer
	answer   string // "" while unknown
}

func (r *walletRecord) about() (kind, id string, answer *string) { return r.kind, r.id(), &r.answer }

func (r *walletRecord) id() string {
	if r.kind == "transfer" {
		return r.transfer.ID
	}
	return r.tx.ID
}

type walletLoad struct {
	journaled[*wallet.Ledger, *walletRecord, wallet.Result]
}

func newWalletLoad(tb testing.TB, d Deployment, prefix string, hist *History) *walletLoad {
	w := &walletLoad{journaled[*wallet.Ledger, *walletRecord, wallet.Result]{
		module: ModuleWallet, check: BankModel, prefix: prefix, hist: hist,
		send:     walletSend,
		verdicts: walletVerdicts, replicaAck: wallet.ErrReplicaAck,
		okText:   walletOK,
		replayed: func(res wallet.Result) bool { return res.Replayed },
		output: func(_ *walletRecord, res wallet.Result, known bool, err error) any {
			if known && err == nil {
				return BankOut{OK: true, Bal: res.Balance.Posted, ToBal: res.To.Posted}
			}
			return BankOut{Unknown: !known}
		},
	}}
	w.open(tb, d, func(rdb redis.UniversalClient, ack bool) (*wallet.Ledger, error) {
		return wallet.New(rdb, walletOptions(prefix, ack)...)
	})
	return w
}

// walletOptions are the options of the workloads' Ledgers: keys under
// prefix and, with ack, writes that wait for a replica.
func walletOptions(prefix string, ack bool) []wallet.Option {
	opts := []wallet.Option{wallet.WithKeyPrefix(prefix)}
	if ack {
		opts = append(opts, wallet.WithReplicaAck(1, AckTimeout))
	}
	return opts
}

func (w *walletLoad) accounts() []string {
	var out []string
	for _, g := range walletGroups {
		for i := range GroupSize {
			out = append(out, accountName(g, i))
		}
	}
	return append(out, crossPair[:]...)
}

func (w *walletLoad) setup(ctx context.Context) error {
	for _, a := range w.accounts() {
		if err := w.verifier.Open(ctx, a, wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		call := w.hist.Now()
		r := &walletRecord{kind: "credit", tx: wallet.Tx{ID: "init-" + groupOf(a) + "-" + a[len(a)-1:], Account: a, Amount: walletInitial}}
		res, err := w.verifier.Credit(ctx, r.tx)
		if err != nil {
			return err
		}
		r.answer = walletOK(res)
		w.records = append(w.records, r)
		if g := groupOf(a); g == walletGroups[0] || g == walletGroups[1] {
			w.hist.Add(Op{Key: g, Input: BankIn{Kind: BankCredit, From: accountIndex(a), Amount: walletInitial},
				Output: BankOut{OK: true, Bal: res.Balance.Posted}, Call: call, Return: w.hist.Now()})
		}
	}
	return nil
}

func accountIndex(a string) int { return skuIndex(a) }

// walletVerdicts: a write not yet acknowledged by its replica is no
// answer, and the client calls again.
var walletVerdicts = verdicts{
	pending: []error{wallet.ErrReplicaAck, wallet.ErrUnknownOutcome},
	decisions: []error{wallet.ErrInsufficientFunds, wallet.ErrAccountNotFound, wallet.ErrAccountClosed,
		wallet.ErrCurrencyMismatch, wallet.ErrConflict, wallet.ErrInvalid, wallet.ErrCrossGroup},
	refusals: []error{wallet.ErrInsufficientFunds},
}

func walletOK(res wallet.Result) string {
	return fmt.Sprintf("ok %d %d %s %s", res.Balance.Posted, res.To.Posted, res.EntryID, res.ToEntryID)
}

// walletSend sends r's transaction once.
func walletSend(ctx context.Context, led *wallet.Ledger, r *walletRecord) (wallet.Result, error) {
	switch r.kind {
	case "credit":
		return led.Credit(ctx, r.tx)
	case "debit":
		return led.Debit(ctx, r.tx)
	}
	return led.Transfer(ctx, r.transfer)
}

func (w *walletLoad) client(ctx context.Context, c int, rng *rand.Rand, more func(int) bool) {
	led := w.conns[c%len(w.conns)]
	var mine []*walletRecord
	for i := 0; more(i); i++ {
		if ctx.Err() != nil {
			return
		}
		id := fmt.Sprintf("c%d-%d", c, i)
		g := walletGroups[rng.IntN(len(walletGroups))]
		from := rng.IntN(GroupSize)
		to := (from + 1 + rng.IntN(GroupSize-1)) % GroupSize
		amt := int64(1 + rng.IntN(60))
		p := rng.IntN(100)
		r := &walletRecord{}
		var in BankIn
		switch {
		case p < 8 && len(mine) > 0:
			w.replay(ctx, led, mine[rng.IntN(len(mine))])
			continue
		case p < 17:
			w.balance(ctx, c, led, g, from)
			continue
		case p < 20:
			mine = append(mine, w.batch(ctx, c, led, g, id, rng)...)
			continue
		case p < 26:
			k := rng.IntN(2)
			r.kind, r.transfer = "transfer", wallet.Transfer{ID: id, From: crossPair[k], To: crossPair[1-k], Amount: amt}
			if p >= 23 {
				r.kind, r.tx = "credit", wallet.Tx{ID: id, Account: crossPair[k], Amount: amt}
			}
			g = ""
		case p < 50:
			r.kind, r.tx, in = "credit", wallet.Tx{ID: id, Account: accountName(g, from), Amount: amt}, BankIn{Kind: BankCredit, From: from, Amount: amt}
		case p < 78:
			r.kind, r.tx, in = "debit", wallet.Tx{ID: id, Account: accountName(g, from), Amount: amt}, BankIn{Kind: BankDebit, From: from, Amount: amt}
		default:
			r.kind = "transfer"
			r.transfer = wallet.Transfer{ID: id, From: accountName(g, from), To: accountName(g, to), Amount: amt}
			in = BankIn{Kind: BankTransfer, From: from, To: to, Amount: amt}
		}
		w.write(ctx, c, led, r, g, in)
		if r.answer != "" {
			mine = append(mine, r)
		}
	}
}

// batch sends 2 to 4 transfers within group g in one TransferBatch, and
// finishes those without an answer one by one.
func (w *walletLoad) batch(ctx context.Context, c int, led *wallet.Ledger, g, id string, rng *rand.Rand) []*walletRecord {
	n := 2 + rng.IntN(3)
	rs := make([]*walletRecord, n)
	ins := make([]any, n)
	ts := make([]wallet.Transfer, n)
	for k := range n {
		from := rng.IntN(GroupSize)
		to := (from + 1 + rng.IntN(GroupSize-1)) % GroupSize
		amt := int64(1 + rng.IntN(40))
		ts[k] = wallet.Transfer{ID: fmt.Sprintf("%s-%d", id, k), From: accountName(g, from), To: accountName(g, to), Amount: amt}
		rs[k] = &walletRecord{kind: "transfer", transfer: ts[k]}
		ins[k] = BankIn{Kind: BankTransfer, From: from, To: to, Amount: amt}
	}
	return w.journaled.batch(ctx, c, led, g, rs, ins, func() func(int) (wallet.Result, error) {
		results := led.TransferBatch(ctx, ts)
		return func(k int) (wallet.Result, error) { return results[k].Result, results[k].Err }
	})
}

func (w *walletLoad) balance(ctx context.Context, c int, led *wallet.Ledger, g string, j int) {
	w.read(c, g, BankIn{Kind: BankRead, From: j}, func() (any, error) {
		bal, err := led.Balance(ctx, accountName(g, j))
		return BankOut{Bal: bal.Posted}, err
	})
}

// walletEntries reads an account's whole journal. pgjournal's readJournal
// is the same loop; this module does not depend on pgjournal.
func walletEntries(ctx context.Context, led *wallet.Ledger, account string) ([]wallet.Entry, error) {
	var out []wallet.Entry
	cursor := ""
	for {
		page, next, err := led.Entries(ctx, account, cursor, wallet.MaxPage)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// verify finishes transfers left in flight, proves every balance from its
// journal, checks the trial balances, and scans the journals for
// transactions applied twice, or acknowledged and missing.
func (w *walletLoad) verify(ctx context.Context) Tally {
	w.resolveUnknown(ctx)
	if _, err := w.verifier.Recover(ctx); err != nil {
		w.mu.Lock()
		w.tally.problem("wallet recover: %v", err)
		w.mu.Unlock()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tally
	exp := w.expect(func(r *walletRecord) []applied {
		if r.kind == "transfer" {
			return []applied{{r.transfer.ID, wallet.KindTransferOut, r.transfer.From}, {r.transfer.ID, wallet.KindTransferIn, r.transfer.To}}
		}
		return []applied{{r.tx.ID, r.kind, r.tx.Account}}
	})
	for _, a := range w.accounts() {
		if err := w.verifier.Verify(ctx, a); err != nil {
			t.problem("wallet verify %s: %v", a, err)
		}
		es, err := walletEntries(ctx, w.verifier, a)
		if err != nil {
			t.problem("wallet entries %s: %v", a, err)
			continue
		}
		var journal []applied
		for _, e := range es {
			if e.TxID != "" {
				journal = append(journal, applied{e.TxID, e.Kind, a})
			}
		}
		exp.compare(&t, ModuleWallet, a, journal)
	}
	groups := [][]string{crossPair[:]}
	for _, g := range walletGroups {
		var accts []string
		for i := range GroupSize {
			accts = append(accts, accountName(g, i))
		}
		groups = append(groups, accts)
	}
	for _, accts := range groups {
		tb, err := w.verifier.TrialBalance(ctx, accts...)
		switch {
		case err != nil:
			t.problem("wallet trial balance %v: %v", accts, err)
		case !tb.Balanced() || tb.NetTransfers() != 0:
			t.problem("wallet trial balance %v: %+v (balanced %v, net transfers %d)", accts, tb, tb.Balanced(), tb.NetTransfers())
		}
	}
	return t
}
