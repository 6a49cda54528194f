package wallet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The model-based test: random sequences of every public operation, run
// against Redis and against an in-memory model of the documented
// semantics (model below), which must agree on every answer and every
// balance after each step. Faults: lost replies (the command runs, its
// reply is dropped, the call is repeated with the same ID), transfers
// across groups cut after each step and finished later by a call with the
// same ID or by Recover, hold expiry, IDs reused with other fields, and
// amounts and overdrafts at 2^53-1.

var modelAccounts = []string{"g1/a", "g1/b", "g2/c", "g2/d"}

type mAccount struct {
	cur               string
	od                int64
	posted, held      int64
	cr, db, tin, tout int64
	closed            bool
}

// mOutcome is an answer: its class ("ok", a refusal, "invalid",
// "conflict:<field>", ...) and, for "ok", the balances reported.
type mOutcome struct {
	class    string
	replayed bool
	posted   int64
	held     int64
	toPosted int64
	toHeld   int64
	to       bool // toPosted/toHeld are reported
	named    bool // a refusal naming an account (source or destination)
}

type mMarker struct {
	kind, a, b, cur, memo string
	n                     int64
	out                   mOutcome // class and balances right after
}

type mHold struct {
	n               int64
	memo            string
	state           string // open captured voided expired refused
	captured        int64
	out, resolution mOutcome
}

// mCross is a transfer across groups, recorded in its source's group.
type mCross struct {
	from, to, memo string
	n              int64
	state          string // refused pending posted voided
	credit         string // "" (not yet), "credited" or the destination's refusal
	onIndex        bool   // still on the in-flight index (Recover counts it)
	out            mOutcome
	toPosted       int64
	toHeld         int64
}

type model struct {
	acct    map[string]*mAccount
	markers map[string]*mMarker // group|id: postings and transfers in one group
	cross   map[string]*mCross  // group|id: transfers across groups
	holds   map[string]*mHold   // account|id
}

const totalBound = 9_000_000_000_000_000_000

func group(a string) string { g, _, _ := strings.Cut(a, "/"); return g }

func (m *model) open(a, cur string, od int64) string {
	x := m.acct[a]
	switch {
	case x == nil:
		m.acct[a] = &mAccount{cur: cur, od: od}
		return "ok"
	case x.closed:
		return "closed"
	case x.cur != cur:
		return "conflict:currency"
	case x.od != od:
		return "conflict:overdraft"
	}
	return "ok"
}

func status(a *mAccount, out int64) string {
	switch {
	case a == nil:
		return "not_found"
	case a.closed:
		return "closed"
	case out > 0 && a.posted-a.held-out < -a.od:
		return "insufficient"
	}
	return "ok"
}

func (a *mAccount) bal() (int64, int64) { return a.posted, a.held }

func (m *model) post(kind, id, acct string, n int64, cur, memo string) mOutcome {
	key := group(acct) + "|" + id
	mk := &mMarker{kind: kind, a: acct, n: n, cur: cur, memo: memo}
	if o, seen := m.seen(key, mk); seen {
		return o
	}
	a := m.acct[acct]
	if a != nil {
		if kind == "credit" && (a.posted+n > maxAmount || a.cr+n > totalBound) {
			return mOutcome{class: "invalid"}
		}
		if kind == "debit" && a.db+n > totalBound {
			return mOutcome{class: "invalid"}
		}
	}
	var out int64
	if kind == "debit" {
		out = n
	}
	st := status(a, 0)
	if st == "ok" && cur != "" && cur != a.cur {
		st = "currency"
	}
	if !m.settle(key, mk, st, a, out) {
		return mk.out
	}
	if kind == "credit" {
		a.posted += n
		a.cr += n
	} else {
		a.posted -= n
		a.db += n
	}
	mk.out = mOutcome{class: "ok", posted: a.posted, held: a.held}
	return mk.out
}

// seen answers a posting or transfer in one group, described by call,
// whose ID (key, group|id) is already taken: a conflict when it differs
// from the first call or the ID is a transfer across groups, else the
// first outcome, replayed. seen is false for a new ID.
func (m *model) seen(key string, call *mMarker) (o mOutcome, seen bool) {
	if mk := m.markers[key]; mk != nil {
		if f := conflictField(mk, call); f != "" {
			return mOutcome{class: "conflict:" + f}, true
		}
		o = mk.out
		o.replayed = true
		return o, true
	}
	if m.cross[key] != nil {
		return mOutcome{class: "conflict:kind"}, true
	}
	return mOutcome{}, false
}

// settle decides a new posting or transfer whose other checks gave st:
// the funds check on a, for out taken from it, comes last, as in the
// scripts. It records mk as the ID's marker with the outcome and reports
// whether the call goes through (it then sets mk.out to its balances).
func (m *model) settle(key string, mk *mMarker, st string, a *mAccount, out int64) bool {
	if st == "ok" {
		st = status(a, out)
	}
	mk.out = mOutcome{class: st}
	m.markers[key] = mk
	return st == "ok"
}

// conflictField is the first field in which call differs from the first
// call mk, or "".
func conflictField(mk, call *mMarker) string {
	switch {
	case mk.kind != call.kind:
		return "kind"
	case mk.a != call.a:
		if call.kind == "transfer" {
			return "from"
		}
		return "account"
	case mk.b != call.b:
		return "to"
	case mk.n != call.n:
		return "amount"
	case mk.cur != call.cur:
		return "currency"
	case mk.memo != call.memo:
		return "memo"
	}
	return ""
}

func (m *model) transfer(id, from, to string, n int64, memo string) mOutcome {
	key := group(from) + "|" + id
	mk := &mMarker{kind: "transfer", a: from, b: to, n: n, memo: memo}
	if o, seen := m.seen(key, mk); seen {
		return o
	}
	a, b := m.acct[from], m.acct[to]
	if a != nil && b != nil && (b.posted+n > maxAmount || a.tout+a.held+n > totalBound || b.tin+n > totalBound) {
		return mOutcome{class: "invalid"}
	}
	st := status(a, 0)
	if st == "ok" {
		if sb := status(b, 0); sb != "ok" {
			st = "to_" + sb
		}
	}
	if st == "ok" && a.cur != b.cur {
		st = "currency"
	}
	if !m.settle(key, mk, st, a, n) {
		return mk.out
	}
	a.posted -= n
	a.tout += n
	b.posted += n
	b.tin += n
	mk.out = mOutcome{class: "ok", posted: a.posted, held: a.held, toPosted: b.posted, toHeld: b.held, to: true}
	return mk.out
}

// crossTransfer runs a transfer across groups up to step stop (1: begin,
// 2: credit, 3 or more: finish), as TransferSteps does; a pending transfer
// answers "ok" without balances.
func (m *model) crossTransfer(id, from, to string, n int64, memo string, stop int) mOutcome {
	key := group(from) + "|" + id
	if mk := m.markers[key]; mk != nil {
		return mOutcome{class: "conflict:kind"}
	}
	x := m.cross[key]
	replayed := x != nil
	if x != nil {
		switch {
		case x.from != from:
			return mOutcome{class: "conflict:from"}
		case x.to != to:
			return mOutcome{class: "conflict:to"}
		case x.n != n:
			return mOutcome{class: "conflict:amount"}
		case x.memo != memo:
			return mOutcome{class: "conflict:memo"}
		}
	} else {
		a, b := m.acct[from], m.acct[to]
		if b != nil && (b.posted+n > maxAmount || b.tin+n > totalBound) {
			return mOutcome{class: "invalid"}
		}
		if a != nil && (a.held+n > maxAmount || a.tout+a.held+n > totalBound) {
			return mOutcome{class: "invalid"}
		}
		x = &mCross{from: from, to: to, n: n, memo: memo}
		m.cross[key] = x
		if st := status(a, n); st != "ok" {
			x.state, x.out = "refused", mOutcome{class: st}
			return x.out
		}
		a.held += n
		x.state, x.onIndex = "pending", true
	}
	if x.state == "pending" && stop >= 2 {
		m.creditStep(x)
	}
	if x.state == "pending" && stop >= 3 {
		m.finishStep(x)
	}
	if x.state == "pending" {
		return mOutcome{class: "ok", replayed: replayed}
	}
	if stop >= 5 {
		x.onIndex = false
	}
	o := x.out
	o.replayed = replayed
	return o
}

func (m *model) creditStep(x *mCross) {
	if x.credit != "" {
		return
	}
	a, b := m.acct[x.from], m.acct[x.to]
	switch {
	case b == nil:
		x.credit = "to_not_found"
	case b.closed:
		x.credit = "to_closed"
	case b.cur != a.cur:
		x.credit = "currency"
	case b.posted+x.n > maxAmount || b.tin+x.n > totalBound:
		x.credit = "invalid"
	default:
		x.credit = "credited"
		b.posted += x.n
		b.tin += x.n
		x.toPosted, x.toHeld = b.posted, b.held
	}
}

func (m *model) finishStep(x *mCross) {
	a := m.acct[x.from]
	a.held -= x.n
	if x.credit == "credited" {
		a.posted -= x.n
		a.tout += x.n
		x.state = "posted"
		x.out = mOutcome{class: "ok", posted: a.posted, held: a.held, toPosted: x.toPosted, toHeld: x.toHeld, to: true}
		return
	}
	x.state = "voided"
	x.out = mOutcome{class: x.credit}
}

// recover finishes every transfer in flight and counts those it handled.
func (m *model) recover() int {
	n := 0
	for _, x := range m.cross {
		if !x.onIndex {
			continue
		}
		n++
		if x.state == "pending" {
			m.creditStep(x)
			m.finishStep(x)
		}
		x.onIndex = false
	}
	return n
}

func (m *model) hold(id, acct string, n int64, memo string) mOutcome {
	key := acct + "|" + id
	if h := m.holds[key]; h != nil {
		switch {
		case h.n != n:
			return mOutcome{class: "conflict:amount"}
		case h.memo != memo:
			return mOutcome{class: "conflict:memo"}
		}
		o := h.out
		o.replayed = true
		return o
	}
	a := m.acct[acct]
	if a != nil && a.held+n > maxAmount {
		return mOutcome{class: "invalid"}
	}
	h := &mHold{n: n, memo: memo}
	m.holds[key] = h
	if st := status(a, n); st != "ok" {
		h.state, h.out = "refused", mOutcome{class: st}
		return h.out
	}
	a.held += n
	h.state, h.out = "open", mOutcome{class: "ok", posted: a.posted, held: a.held}
	return h.out
}

func (m *model) resolve(op, acct, id string, n int64) mOutcome {
	a, h := m.acct[acct], m.holds[acct+"|"+id]
	switch {
	case a == nil || h == nil || h.state == "refused":
		return mOutcome{class: "hold_not_found"}
	case h.state == "expired":
		return mOutcome{class: "hold_expired"}
	case h.state == "captured" || h.state == "voided":
		if (h.state == "captured") != (op == "capture") {
			return mOutcome{class: "conflict:resolution"}
		}
		if op == "capture" && h.captured != n {
			return mOutcome{class: "conflict:amount"}
		}
		o := h.resolution
		o.replayed = true
		return o
	}
	if op == "capture" {
		switch {
		case n > h.n:
			return mOutcome{class: "invalid"}
		case a.closed:
			return mOutcome{class: "closed"}
		case a.db+n > totalBound:
			return mOutcome{class: "invalid"}
		}
		a.held -= h.n
		a.posted -= n
		a.db += n
		h.state, h.captured = "captured", n
	} else {
		a.held -= h.n
		h.state = "voided"
	}
	h.resolution = mOutcome{class: "ok", posted: a.posted, held: a.held}
	return h.resolution
}

func (m *model) expire(acct, id string) bool {
	h := m.holds[acct+"|"+id]
	if h == nil || h.state != "open" {
		return false
	}
	h.state = "expired"
	m.acct[acct].held -= h.n
	return true
}

// classify names an answer as the model does.
func classify(res wallet.Result, err error, to bool) mOutcome {
	if err == nil {
		o := mOutcome{class: "ok", replayed: res.Replayed, posted: res.Balance.Posted, held: res.Balance.Held}
		if to {
			o.toPosted, o.toHeld, o.to = res.To.Posted, res.To.Held, true
		}
		return o
	}
	var ce *wallet.ConflictError
	if errors.As(err, &ce) {
		return mOutcome{class: "conflict:" + ce.Field}
	}
	for _, c := range []struct {
		err  error
		name string
	}{
		{wallet.ErrUnknownOutcome, "unknown"},
		{wallet.ErrInsufficientFunds, "insufficient"},
		{wallet.ErrCurrencyMismatch, "currency"},
		{wallet.ErrHoldNotFound, "hold_not_found"},
		{wallet.ErrHoldExpired, "hold_expired"},
		{wallet.ErrInvalid, "invalid"},
	} {
		if errors.Is(err, c.err) {
			return mOutcome{class: c.name}
		}
	}
	// Not found and closed name the account: the source's or the
	// destination's.
	for _, c := range []struct {
		err  error
		name string
	}{{wallet.ErrAccountNotFound, "not_found"}, {wallet.ErrAccountClosed, "closed"}} {
		if errors.Is(err, c.err) {
			return mOutcome{class: c.name, named: true}
		}
	}
	return mOutcome{class: "other: " + err.Error()}
}

// same compares an answer with the model's; refusals naming the
// destination ("to_closed") match the Ledger's error for that account.
func same(t *rapid.T, what string, got, want mOutcome, errText string) {
	if strings.HasPrefix(want.class, "to_") && got.named {
		if got.class != strings.TrimPrefix(want.class, "to_") {
			t.Fatalf("%s: got %q (%s), model says %q", what, got.class, errText, want.class)
		}
		return
	}
	got.named = false
	if want.class == "ok" && !want.to {
		got.to, got.toPosted, got.toHeld = false, 0, 0
	}
	if want.class != "ok" { // Replayed belongs to a Result, not to a refusal
		want.replayed = got.replayed
	}
	if got != want {
		t.Fatalf("%s: got %+v (%s), model says %+v", what, got, errText, want)
	}
}

// destFull is the Ledger's check, before anything is sent, that a new
// transfer across groups would take its destination out of bounds.
func (m *model) destFull(tr wallet.Transfer) bool {
	if m.cross[group(tr.From)+"|"+tr.ID] != nil || m.markers[group(tr.From)+"|"+tr.ID] != nil {
		return false
	}
	b := m.acct[tr.To]
	return b != nil && (b.posted+tr.Amount > maxAmount || b.tin+tr.Amount > totalBound)
}

// beginHook turns the proxy's reply dropping on just before the first
// step of a transfer across groups is sent, while armed.
type beginHook struct {
	armed *atomic.Bool
	px    *redistest.Proxy
}

func (h *beginHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *beginHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ks := scriptKeys(cmd.Args()); h.armed.Load() && len(ks) >= 6 && strings.HasSuffix(ks[5], ":xpend") {
			h.px.DropReplies(true)
		}
		return next(ctx, cmd)
	}
}

func (h *beginHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// modelRig is one run's Ledgers: direct, and lossy (through a proxy that
// can drop replies) for the same keys.
type modelRig struct {
	direct, lossy *wallet.Ledger
	rdb, lossyRDB *redis.Client
	px            *redistest.Proxy
	prefix        string
}

func newModelRig(t *testing.T, px *redistest.Proxy, lossy *redis.Client, n int) *modelRig {
	prefix := fmt.Sprintf("m%d-%d", prefixSeq.Add(1), n)
	rdb := shared.Client()
	r := &modelRig{
		direct: mustNew(t, rdb, wallet.WithKeyPrefix(prefix)),
		lossy: mustNew(t, lossy, wallet.WithKeyPrefix(prefix),
			wallet.WithRetry(2, time.Millisecond, 2*time.Millisecond)),
		rdb: rdb, lossyRDB: lossy, px: px, prefix: prefix,
	}
	return r
}

func (r *modelRig) close() {
	_ = r.direct.Close()
	_ = r.lossy.Close()
	_ = r.rdb.Close()
}

// amountGen draws amounts: mostly small, sometimes at the 2^53-1 bound.
var amountGen = rapid.OneOf(rapid.Int64Range(1, 120), rapid.Int64Range(maxAmount-3, maxAmount),
	rapid.Int64Range(maxAmount/2-2, maxAmount/2+2))

func runModel(t *testing.T, steps int) {
	ctx := t.Context()
	px := redistest.NewProxy(t, shared.Addr())
	lossy := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	// Armed, it drops the replies from the first step of a transfer across
	// groups on: that step runs, the call cannot know.
	var dropBegin atomic.Bool
	lossy.AddHook(&beginHook{armed: &dropBegin, px: px})
	t.Cleanup(func() { _ = lossy.Close() })
	warmScripts(t)
	runs := 0
	var lostReplies, lostBegins, cuts int
	defer func() {
		t.Logf("%d runs of %d steps: %d calls repeated after lost replies, %d transfers across groups after a lost first reply, %d cut after a step",
			runs, steps, lostReplies, lostBegins, cuts)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		r := newModelRig(t, px, lossy, runs)
		defer r.close()
		m := &model{acct: map[string]*mAccount{}, markers: map[string]*mMarker{}, cross: map[string]*mCross{},
			holds: map[string]*mHold{}}
		acct := rapid.SampledFrom(modelAccounts)
		id := rapid.SampledFrom([]string{"t1", "t2", "t3", "t4", "t5", "t6"})
		memo := rapid.SampledFrom([]string{"", "m"})
		// Most accounts start open, some with an overdraft.
		for _, a := range modelAccounts {
			if rapid.IntRange(0, 4).Draw(rt, "skip "+a) == 0 {
				continue
			}
			cur := rapid.SampledFrom([]string{"CNY", "CNY", "USD"}).Draw(rt, "cur "+a)
			od := rapid.SampledFrom([]int64{0, 0, 50, maxAmount}).Draw(rt, "od "+a)
			require.NoError(rt, r.direct.Open(ctx, a, wallet.WithCurrency(cur), wallet.WithOverdraft(od)))
			m.open(a, cur, od)
		}
		// lost runs call through the proxy with its replies dropped: the
		// command runs, the call ends unknown, and it is repeated with the
		// same ID; the model applies it once.
		lost := func(what string, call func(*wallet.Ledger) (wallet.Result, error), to bool, want func() mOutcome) {
			if rapid.IntRange(0, 14).Draw(rt, "lose reply") == 0 {
				r.px.DropReplies(true)
				_, err := call(r.lossy)
				r.px.DropReplies(false)
				if !errors.Is(err, wallet.ErrUnknownOutcome) {
					rt.Fatalf("%s with its replies dropped: %v, want ErrUnknownOutcome", what, err)
				}
				want() // it ran: the model applies it
				lostReplies++
				res, err := call(r.direct)
				got := classify(res, err, to)
				w := want() // the same call again: the model's replay
				same(rt, what+" (repeated after a lost reply)", got, w, fmt.Sprint(err))
				return
			}
			res, err := call(r.direct)
			same(rt, what, classify(res, err, to), want(), fmt.Sprint(err))
		}
		for i := range steps {
			switch rapid.IntRange(0, 12).Draw(rt, "op") {
			case 0:
				a := acct.Draw(rt, "account")
				cur := rapid.SampledFrom([]string{"CNY", "USD"}).Draw(rt, "currency")
				od := rapid.SampledFrom([]int64{0, 50, maxAmount}).Draw(rt, "overdraft")
				err := r.direct.Open(ctx, a, wallet.WithCurrency(cur), wallet.WithOverdraft(od))
				same(rt, fmt.Sprintf("%d open %s %s %d", i, a, cur, od), classify(wallet.Result{}, err, false),
					mOutcome{class: m.open(a, cur, od)}, fmt.Sprint(err))
			case 1, 2:
				kind := rapid.SampledFrom([]string{"credit", "debit"}).Draw(rt, "kind")
				tx := wallet.Tx{ID: id.Draw(rt, "id"), Account: acct.Draw(rt, "account"), Amount: amountGen.Draw(rt, "amount"),
					Currency: rapid.SampledFrom([]string{"", "", "CNY", "USD"}).Draw(rt, "tx currency"), Memo: memo.Draw(rt, "memo")}
				lost(fmt.Sprintf("%d %s %+v", i, kind, tx), func(l *wallet.Ledger) (wallet.Result, error) {
					if kind == "credit" {
						return l.Credit(ctx, tx)
					}
					return l.Debit(ctx, tx)
				}, false, func() mOutcome { return m.post(kind, tx.ID, tx.Account, tx.Amount, tx.Currency, tx.Memo) })
			case 3, 4:
				tr := wallet.Transfer{ID: id.Draw(rt, "id"), From: acct.Draw(rt, "from"), To: acct.Draw(rt, "to"),
					Amount: amountGen.Draw(rt, "amount"), Memo: memo.Draw(rt, "memo")}
				if tr.From == tr.To {
					continue
				}
				what := fmt.Sprintf("%d transfer %+v", i, tr)
				if group(tr.From) == group(tr.To) {
					lost(what, func(l *wallet.Ledger) (wallet.Result, error) { return l.Transfer(ctx, tr) }, true,
						func() mOutcome { return m.transfer(tr.ID, tr.From, tr.To, tr.Amount, tr.Memo) })
					continue
				}
				// Across groups: the first step's reply lost, then the call
				// repeated; or cut after a step (1..4) or run whole (5).
				if !m.destFull(tr) && rapid.IntRange(0, 7).Draw(rt, "lose begin reply") == 0 {
					dropBegin.Store(true)
					_, err := r.lossy.Transfer(ctx, tr)
					dropBegin.Store(false)
					r.px.DropReplies(false)
					if !errors.Is(err, wallet.ErrUnknownOutcome) {
						rt.Fatalf("%s, first step's replies dropped: %v, want ErrUnknownOutcome", what, err)
					}
					m.crossTransfer(tr.ID, tr.From, tr.To, tr.Amount, tr.Memo, 1)
					lostBegins++
					res, err := r.direct.Transfer(ctx, tr)
					same(rt, what+" (repeated after a lost reply)", classify(res, err, true),
						m.crossTransfer(tr.ID, tr.From, tr.To, tr.Amount, tr.Memo, 5), fmt.Sprint(err))
					continue
				}
				stop := rapid.IntRange(1, 5).Draw(rt, "stop after step")
				var res wallet.Result
				var err error
				if stop == 5 {
					res, err = r.direct.Transfer(ctx, tr)
				} else {
					res, err = r.direct.TransferSteps(ctx, tr, stop)
					cuts++
				}
				got := classify(res, err, true)
				want := m.crossTransfer(tr.ID, tr.From, tr.To, tr.Amount, tr.Memo, stop)
				if want.class == "ok" && !want.to { // left in flight: no balances reported
					got = mOutcome{class: got.class, replayed: got.replayed}
				}
				same(rt, fmt.Sprintf("%s stop %d", what, stop), got, want, fmt.Sprint(err))
			case 5:
				n, err := r.direct.Recover(ctx)
				require.NoError(rt, err)
				if want := m.recover(); n != want {
					rt.Fatalf("%d recover handled %d, model says %d", i, n, want)
				}
			case 6, 7:
				h := wallet.HoldReq{ID: id.Draw(rt, "id"), Account: acct.Draw(rt, "account"), Amount: amountGen.Draw(rt, "amount"),
					TTL: time.Hour, Memo: memo.Draw(rt, "memo")}
				lost(fmt.Sprintf("%d hold %+v", i, h), func(l *wallet.Ledger) (wallet.Result, error) { return l.Hold(ctx, h) },
					false, func() mOutcome { return m.hold(h.ID, h.Account, h.Amount, h.Memo) })
			case 8, 9:
				a, h := acct.Draw(rt, "account"), id.Draw(rt, "id")
				if rapid.Bool().Draw(rt, "capture") {
					n := rapid.OneOf(rapid.Int64Range(1, 130), amountGen).Draw(rt, "amount")
					lost(fmt.Sprintf("%d capture %s %s %d", i, a, h, n), func(l *wallet.Ledger) (wallet.Result, error) {
						return l.Capture(ctx, a, h, n)
					}, false, func() mOutcome { return m.resolve("capture", a, h, n) })
				} else {
					lost(fmt.Sprintf("%d void %s %s", i, a, h), func(l *wallet.Ledger) (wallet.Result, error) {
						return l.Void(ctx, a, h)
					}, false, func() mOutcome { return m.resolve("void", a, h, 0) })
				}
			case 10:
				// Time passes for one open hold: its expiry is moved into the
				// past (the server's clock cannot be advanced).
				a, h := acct.Draw(rt, "account"), id.Draw(rt, "id")
				if m.expire(a, h) {
					expireHold(rt, r, a, h)
				}
			case 11:
				a := acct.Draw(rt, "account")
				err := r.direct.CloseAccount(ctx, a)
				want := "ok"
				if x := m.acct[a]; x == nil {
					want = "not_found"
				} else {
					x.closed = true
				}
				if got := classify(wallet.Result{}, err, false); got.class != want {
					rt.Fatalf("%d close %s: %v, model says %s", i, a, err, want)
				}
			case 12:
				a := acct.Draw(rt, "account")
				_, _, err := r.direct.Checkpoint(ctx, a)
				if m.acct[a] == nil {
					require.ErrorIs(rt, err, wallet.ErrAccountNotFound)
					continue
				}
				require.NoError(rt, err, "checkpoint %s", a)
				require.NoError(rt, r.direct.Verify(ctx, a), "verify %s", a)
			}
			checkBalances(rt, ctx, r.direct, m, i)
		}
		// Finish what is in flight; then every journal proves its balance
		// and transfers net to zero.
		_, err := r.direct.Recover(ctx)
		require.NoError(rt, err)
		m.recover()
		checkBalances(rt, ctx, r.direct, m, steps)
		var open []string
		for _, a := range modelAccounts {
			if m.acct[a] != nil {
				require.NoError(rt, r.direct.Verify(ctx, a), "verify %s", a)
				open = append(open, a)
			}
		}
		if len(open) > 0 {
			tb, err := r.direct.TrialBalance(ctx, open...)
			require.NoError(rt, err)
			if !tb.Balanced() || tb.NetTransfers() != 0 {
				rt.Fatalf("trial balance %+v: not balanced or transfers do not net to zero", tb)
			}
		}
	})
}

func checkBalances(t *rapid.T, ctx context.Context, led *wallet.Ledger, m *model, step int) {
	for _, a := range modelAccounts {
		b, err := led.Balance(ctx, a)
		x := m.acct[a]
		if x == nil {
			if !errors.Is(err, wallet.ErrAccountNotFound) {
				t.Fatalf("after step %d: balance of %s: %v, model says not found", step, a, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("after step %d: balance of %s: %v", step, a, err)
		}
		p, h := x.bal()
		if b.Posted != p || b.Held != h || b.Closed != x.closed || b.Currency != x.cur || b.Overdraft != x.od {
			t.Fatalf("after step %d: %s is %+v, model says posted %d held %d closed %v", step, a, b, p, h, x.closed)
		}
	}
}

// expireHold moves an open hold's expiry into the past, in its record and
// in the hold index, as the passing of its TTL would.
func expireHold(t *rapid.T, r *modelRig, account, id string) {
	ctx := context.Background()
	g := group(account)
	hk := r.prefix + ":wallet:v2:{" + g + "}:holds:" + account
	ik := r.prefix + ":wallet:v2:{" + g + "}:hidx:" + account
	raw, err := r.rdb.HGet(ctx, hk, id).Result()
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &rec))
	rec["x"] = "1"
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, r.rdb.HSet(ctx, hk, id, b).Err())
	require.NoError(t, r.rdb.ZAdd(ctx, ik, redis.Z{Score: 1, Member: id}).Err())
}

// warmScripts loads every script into the server's cache, so a dropped
// reply is never a NOSCRIPT that did not run.
func warmScripts(t *testing.T) {
	ctx := t.Context()
	led, _, _ := newLedger(t)
	openFunded(t, led, map[string]int64{"w/a": 100, "w/b": 0, "v/c": 0})
	_, err := led.Debit(ctx, wallet.Tx{ID: "d", Account: "w/a", Amount: 1})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "t", From: "w/a", To: "w/b", Amount: 1})
	require.NoError(t, err)
	_, err = led.Transfer(ctx, wallet.Transfer{ID: "x", From: "w/a", To: "v/c", Amount: 1})
	require.NoError(t, err)
	_, err = led.Hold(ctx, wallet.HoldReq{ID: "h", Account: "w/a", Amount: 1, TTL: time.Minute})
	require.NoError(t, err)
	_, err = led.Void(ctx, "w/a", "h")
	require.NoError(t, err)
	require.NoError(t, led.CloseAccount(ctx, "w/b"))
}

// TestLedger_model is the short run (a few seconds); -rapid.checks and
// -rapid.seed on the command line override its size and replay a failure.
func TestLedger_model(t *testing.T) {
	redistest.SetRapidChecks(t, 12)
	runModel(t, 40)
}

func TestChaos_Ledger_model(t *testing.T) {
	redistest.SetRapidChecks(t, 150*redistest.Chaos(t))
	runModel(t, 250)
}
