package reliability

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

// replayed is the answer to a resubmission of a decided transaction.
type replayed struct {
	r        *walletRecord
	answer   string
	replayed bool
}

func (r *walletRecord) id() string {
	if r.kind == "transfer" {
		return r.transfer.ID
	}
	return r.tx.ID
}

type walletLoad struct {
	prefix  string
	replays []replayed
	leds    []*wallet.Ledger
	admin   redis.UniversalClient
	vled    *wallet.Ledger
	hist    *History
	prog    Progress

	mu      sync.Mutex
	records []*walletRecord
	tally   Tally
}

func newWalletLoad(tb testing.TB, d Deployment, prefix string, hist *History) *walletLoad {
	w := &walletLoad{prefix: prefix, admin: d.Admin(tb), hist: hist}
	opts := []wallet.Option{wallet.WithKeyPrefix(prefix)}
	if d.ReplicaAck() {
		opts = append(opts, wallet.WithReplicaAck(1, AckTimeout))
	}
	for range 2 {
		led, err := wallet.New(d.Client(tb), opts...)
		if err != nil {
			tb.Fatalf("wallet.New: %v", err)
		}
		w.leds = append(w.leds, led)
	}
	var err error
	w.vled, err = wallet.New(w.admin, wallet.WithKeyPrefix(prefix))
	if err != nil {
		tb.Fatalf("wallet.New: %v", err)
	}
	return w
}

func (w *walletLoad) name() string           { return "wallet" }
func (w *walletLoad) history() *History      { return w.hist }
func (w *walletLoad) model() porcupine.Model { return BankModel }
func (w *walletLoad) progress() *Progress    { return &w.prog }

func (w *walletLoad) close() {
	for _, l := range w.leds {
		_ = l.Close()
	}
	_ = w.vled.Close()
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
		if err := w.vled.Open(ctx, a, wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		call := w.hist.Now()
		r := &walletRecord{kind: "credit", tx: wallet.Tx{ID: "init-" + groupOf(a) + "-" + a[len(a)-1:], Account: a, Amount: walletInitial}}
		res, err := w.vled.Credit(ctx, r.tx)
		if err != nil {
			return err
		}
		r.answer = walletAnswerOf(res, nil)
		w.records = append(w.records, r)
		if g := groupOf(a); g == walletGroups[0] || g == walletGroups[1] {
			w.hist.Add(Op{Key: g, Input: BankIn{Kind: BankCredit, From: accountIndex(a), Amount: walletInitial},
				Output: BankOut{OK: true, Bal: res.Balance.Posted}, Call: call, Return: w.hist.Now()})
		}
	}
	return nil
}

func accountIndex(a string) int { return skuIndex(a) }

func walletAnswer(err error) bool {
	if err == nil {
		return true
	}
	if errors.Is(err, wallet.ErrReplicaAck) || errors.Is(err, wallet.ErrUnknownOutcome) {
		return false
	}
	for _, e := range []error{wallet.ErrInsufficientFunds, wallet.ErrAccountNotFound, wallet.ErrAccountClosed,
		wallet.ErrCurrencyMismatch, wallet.ErrConflict, wallet.ErrInvalid, wallet.ErrCrossGroup} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func walletAnswerOf(res wallet.Result, err error) string {
	if err != nil {
		for _, e := range []error{wallet.ErrInsufficientFunds, wallet.ErrAccountNotFound, wallet.ErrAccountClosed,
			wallet.ErrCurrencyMismatch, wallet.ErrConflict, wallet.ErrInvalid} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		return err.Error()
	}
	return fmt.Sprintf("ok %d %d %s %s", res.Balance.Posted, res.To.Posted, res.EntryID, res.ToEntryID)
}

func (w *walletLoad) call(ctx context.Context, led *wallet.Ledger, r *walletRecord) (wallet.Result, error) {
	switch r.kind {
	case "credit":
		return led.Credit(ctx, r.tx)
	case "debit":
		return led.Debit(ctx, r.tx)
	}
	return led.Transfer(ctx, r.transfer)
}

func (w *walletLoad) client(ctx context.Context, c int, rng *rand.Rand, more func(int) bool) {
	led := w.leds[c%len(w.leds)]
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
			w.read(ctx, c, led, g, from)
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

// write runs r until it has an answer and records it; g is the group of a
// checked transaction ("" for the pair trading across groups).
func (w *walletLoad) write(ctx context.Context, c int, led *wallet.Ledger, r *walletRecord, g string, in BankIn) {
	w.finish(ctx, c, led, r, g, in, w.hist.Now(), time.Now(), nil)
}

// finish is write for a transaction called at call; first, when not nil,
// is the answer to its first call (made in a batch).
func (w *walletLoad) finish(ctx context.Context, c int, led *wallet.Ledger, r *walletRecord, g string, in BankIn, call int64, callT time.Time, first *wallet.BatchResult) {
	var res wallet.Result
	known, calls, err := settle(ctx, func() error {
		if b := first; b != nil {
			first = nil
			res = b.Result
			return b.Err
		}
		var err error
		res, err = w.call(ctx, led, r)
		return err
	}, walletAnswer)
	ret := w.hist.Now()
	var out BankOut
	w.mu.Lock()
	w.tally.Ops++
	if calls > 1 {
		w.tally.Retried++
	}
	switch {
	case !known:
		out.Unknown = true
		w.tally.Unknown++
		if errors.Is(err, wallet.ErrReplicaAck) {
			w.tally.Unacked++
		}
	case err == nil:
		out = BankOut{OK: true, Bal: res.Balance.Posted, ToBal: res.To.Posted}
		w.tally.Acked++
		r.answer = walletAnswerOf(res, nil)
	case errors.Is(err, wallet.ErrInsufficientFunds):
		r.answer = walletAnswerOf(res, err)
	default:
		w.tally.problem("wallet %s %s: %v", r.kind, r.id(), err)
		r.answer = walletAnswerOf(res, err)
	}
	w.records = append(w.records, r)
	w.mu.Unlock()
	if known {
		w.prog.OK(callT)
	}
	if g != "" {
		w.hist.Add(Op{Client: c, Key: g, Input: in, Output: out, Call: call, Return: ret, Unknown: out.Unknown})
	}
}

// batch sends 2 to 4 transfers within group g in one TransferBatch, and
// finishes those without an answer one by one.
func (w *walletLoad) batch(ctx context.Context, c int, led *wallet.Ledger, g, id string, rng *rand.Rand) []*walletRecord {
	n := 2 + rng.IntN(3)
	rs := make([]*walletRecord, n)
	ins := make([]BankIn, n)
	ts := make([]wallet.Transfer, n)
	for k := range n {
		from := rng.IntN(GroupSize)
		to := (from + 1 + rng.IntN(GroupSize-1)) % GroupSize
		amt := int64(1 + rng.IntN(40))
		ts[k] = wallet.Transfer{ID: fmt.Sprintf("%s-%d", id, k), From: accountName(g, from), To: accountName(g, to), Amount: amt}
		rs[k] = &walletRecord{kind: "transfer", transfer: ts[k]}
		ins[k] = BankIn{Kind: BankTransfer, From: from, To: to, Amount: amt}
	}
	call, callT := w.hist.Now(), time.Now()
	results := led.TransferBatch(ctx, ts)
	var out []*walletRecord
	for k := range n {
		w.finish(ctx, c, led, rs[k], g, ins[k], call, callT, &results[k])
		if rs[k].answer != "" {
			out = append(out, rs[k])
		}
	}
	return out
}

// replay resubmits a decided transaction: it must get the first answer.
func (w *walletLoad) replay(ctx context.Context, led *wallet.Ledger, r *walletRecord) {
	var res wallet.Result
	known, _, err := settle(ctx, func() error {
		var err error
		res, err = w.call(ctx, led, r)
		return err
	}, walletAnswer)
	if !known {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tally.Ops++
	w.replays = append(w.replays, replayed{r: r, answer: walletAnswerOf(res, err), replayed: err != nil || res.Replayed})
}

func (w *walletLoad) read(ctx context.Context, c int, led *wallet.Ledger, g string, j int) {
	call, callT := w.hist.Now(), time.Now()
	bal, err := led.Balance(ctx, accountName(g, j))
	ret := w.hist.Now()
	w.mu.Lock()
	w.tally.Ops++
	w.mu.Unlock()
	if err != nil {
		return
	}
	w.prog.OK(callT)
	w.hist.Add(Op{Client: c, Key: g, Input: BankIn{Kind: BankRead, From: j}, Output: BankOut{Bal: bal.Posted}, Call: call, Return: ret, Read: true})
}

// entries reads an account's whole journal.
func (w *walletLoad) entries(ctx context.Context, account string) ([]wallet.Entry, error) {
	var out []wallet.Entry
	cursor := ""
	for {
		page, next, err := w.vled.Entries(ctx, account, cursor, wallet.MaxPage)
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
	w.mu.Lock()
	records := append([]*walletRecord(nil), w.records...)
	w.mu.Unlock()
	for _, r := range records {
		if r.answer != "" {
			continue
		}
		var res wallet.Result
		known, _, err := settle(ctx, func() error {
			var err error
			res, err = w.call(ctx, w.vled, r)
			return err
		}, walletAnswer)
		if known {
			w.mu.Lock()
			r.answer = "resolved " + walletAnswerOf(res, err)
			w.mu.Unlock()
		}
	}
	if _, err := w.vled.Recover(ctx); err != nil {
		w.mu.Lock()
		w.tally.problem("wallet recover: %v", err)
		w.mu.Unlock()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tally
	for _, rp := range w.replays {
		if rp.answer != rp.r.answer {
			t.problem("wallet %s %s resubmitted: answered %q, first answer %q", rp.r.kind, rp.r.id(), rp.answer, rp.r.answer)
		}
		if !rp.replayed {
			t.problem("wallet %s %s resubmitted: Result.Replayed is false", rp.r.kind, rp.r.id())
		}
	}
	type applied struct{ tx, kind, account string }
	want, resolved, refused := map[applied]bool{}, map[applied]bool{}, map[applied]bool{}
	for _, r := range w.records {
		var ks []applied
		switch r.kind {
		case "transfer":
			ks = []applied{{r.transfer.ID, wallet.KindTransferOut, r.transfer.From}, {r.transfer.ID, wallet.KindTransferIn, r.transfer.To}}
		default:
			ks = []applied{{r.tx.ID, r.kind, r.tx.Account}}
		}
		for _, k := range ks {
			switch {
			case len(r.answer) > 1 && r.answer[:2] == "ok":
				want[k] = true
			case len(r.answer) > 11 && r.answer[:11] == "resolved ok":
				resolved[k] = true
			case r.answer == wallet.ErrInsufficientFunds.Error():
				refused[k] = true
			}
		}
	}
	for _, a := range w.accounts() {
		if err := w.vled.Verify(ctx, a); err != nil {
			t.problem("wallet verify %s: %v", a, err)
		}
		es, err := w.entries(ctx, a)
		if err != nil {
			t.problem("wallet entries %s: %v", a, err)
			continue
		}
		seen := map[applied]int{}
		for _, e := range es {
			if e.TxID == "" {
				continue
			}
			k := applied{e.TxID, e.Kind, a}
			seen[k]++
			if seen[k] == 2 {
				t.Double++
				t.detail("wallet %s: %s %s is in the journal more than once", a, e.Kind, e.TxID)
			}
			if refused[k] {
				t.problem("wallet %s: %s %s was refused but is in the journal", a, e.Kind, e.TxID)
			}
		}
		for k := range want {
			if k.account == a && seen[k] == 0 {
				t.Lost++
				t.detail("wallet %s: acknowledged %s %s is not in the journal", a, k.kind, k.tx)
			}
		}
		for k := range resolved {
			if k.account == a && seen[k] == 0 {
				t.problem("wallet %s: %s %s is not in the journal although a resubmission said it was applied", a, k.kind, k.tx)
			}
		}
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
		tb, err := w.vled.TrialBalance(ctx, accts...)
		switch {
		case err != nil:
			t.problem("wallet trial balance %v: %v", accts, err)
		case !tb.Balanced() || tb.NetTransfers() != 0:
			t.problem("wallet trial balance %v: %+v (balanced %v, net transfers %d)", accts, tb, tb.Balanced(), tb.NetTransfers())
		}
	}
	return t
}
