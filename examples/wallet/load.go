package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/auth"
	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/wallet"
)

// loadConfig is what the load test does.
type loadConfig struct {
	Accounts int
	Groups   int
	Workers  int
	Duration time.Duration

	// book, when DATABASE_URL is set, books the accounts' journals in
	// PostgreSQL while the load runs and reconciles them at the end.
	book *book.Book
}

func defaultLoad() loadConfig {
	return loadConfig{Accounts: 40, Groups: 4, Workers: 8, Duration: 3 * time.Second}
}

func (c loadConfig) check() error {
	switch {
	case c.Groups < 2:
		return errors.New("-groups: at least 2, so that some transfers cross slot groups")
	case c.Accounts < 2*c.Groups:
		return errors.New("-accounts: at least two per group")
	case c.Workers < 1:
		return errors.New("-workers: at least 1")
	case c.Duration <= 0:
		return errors.New("-duration: must be positive")
	}
	return nil
}

// The mix of operations, in percent of a worker's steps, and how often a
// write is sent again.
const (
	shareCredit    = 25
	shareDebit     = 20
	shareTransfer  = 20 // within a slot group: one script
	shareXTransfer = 10 // across slot groups: the two-phase path
	// the rest are holds: captured in part, voided or left to expire

	resendAfter    = 0.08 // the same request again after its answer, as after a lost reply
	resendTogether = 0.03 // the same request twice at once, as from an impatient client
	reuseKey       = 0.02 // the same key with another amount: a client bug, answered 409

	holdCapture = 0.4 // of accepted holds
	holdVoid    = 0.3 // the rest are left to expire
	holdTTL     = time.Second

	overdraftEvery = 4 // every 4th account may go this far below zero
	overdraftLimit = 10_000
	currency       = "EUR"
	maxAttempts    = 5 // a 503 (outcome unknown) is retried with the same key
)

// ops lists the operation names of the report, in its order.
var ops = []string{"credit", "debit", "transfer", "transfer-x", "hold", "capture", "void"}

// loadPrincipal is the principal of the load test's key.
const loadPrincipal = "load-test"

// runLoad serves the API on a loopback port, drives it for cfg.Duration
// and checks the books.
func runLoad(ctx context.Context, a *app.App, led *wallet.Ledger, cfg loadConfig) (*loadReport, error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// The load test is its own client: a key made for this run, never
	// shown, with every scope. It is no abuser to shed, so no rate limit
	// and room for every worker's requests in flight.
	key, line, err := auth.NewKey(loadPrincipal, scopes...)
	if err != nil {
		return nil, err
	}
	keys, err := auth.ParseKeys(line, scopes...)
	if err != nil {
		return nil, err
	}
	srvCfg := app.DefaultServerConfig(app.Rate{})
	srvCfg.MaxInFlight = max(srvCfg.MaxInFlight, 4*cfg.Workers)
	addrs, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		served <- a.Serve(sctx, app.Server{Addr: "127.0.0.1:0", Handler: newServer(led, a.Redis.Client, httpx.Edge{Auth: keys, Log: a.Log}),
			Config: srvCfg, Listening: func(addr net.Addr) { addrs <- addr }})
	}()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-served:
		return nil, err
	}
	defer func() { stop(); <-served }()

	tr := &http.Transport{MaxIdleConnsPerHost: 2 * cfg.Workers}
	defer tr.CloseIdleConnections()
	l := &load{
		cfg:    cfg,
		client: &client{base: "http://" + addr.String(), key: key, hc: &http.Client{Transport: tr}},
		run:    fmt.Sprintf("%06x", rand.Uint32()&0xffffff),
	}
	if err := l.openAccounts(ctx); err != nil {
		return nil, err
	}
	if cfg.book != nil {
		cfg.book.SinkWallet(ctx, led, l.accounts)
	}

	deadline := time.Now().Add(cfg.Duration)
	workers := make([]*worker, cfg.Workers)
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &worker{id: i, l: l, rng: rand.New(rand.NewPCG(rand.Uint64(), uint64(i))), t: newTally()}
		workers[i] = w
		wg.Go(func() {
			for time.Now().Before(deadline) && errs[i] == nil {
				errs[i] = w.step(ctx)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	t := newTally()
	for _, w := range workers {
		t.merge(&w.t)
	}
	rep := &loadReport{cfg: cfg, redis: a.Redis.Describe, elapsed: elapsed, t: t}
	if a.Redis.Embedded {
		rep.redis = "embedded Redis (miniredis)"
	}
	err = l.audit(ctx, led, rep)
	if err == nil && cfg.book != nil {
		if rep.book, err = cfg.book.FinishWallet(ctx, led, l.accounts); err == nil && !rep.book.OK() {
			rep.problem("the reconciler found Redis and the book of record apart")
		}
	}
	return rep, err
}

// load is what the workers share: the client and the accounts.
type load struct {
	cfg      loadConfig
	client   *client
	run      string           // names this run's accounts and transactions
	accounts []string         // account i is in group i % Groups
	limit    map[string]int64 // overdraft by account
}

func (l *load) openAccounts(ctx context.Context) error {
	l.limit = make(map[string]int64)
	for i := range l.cfg.Accounts {
		id := fmt.Sprintf("shop-%d/%s-%02d", i%l.cfg.Groups, l.run, i)
		req := openRequest{ID: id, Currency: currency}
		if i%overdraftEvery == overdraftEvery-1 {
			req.Overdraft = overdraftLimit
		}
		a, err := l.client.do(ctx, http.MethodPost, "/accounts", "", req)
		if err != nil {
			return err
		}
		if a.status != http.StatusCreated {
			return fmt.Errorf("open %s: %d %s", id, a.status, a.body)
		}
		l.accounts = append(l.accounts, id)
		l.limit[id] = req.Overdraft
	}
	return nil
}

// worker is one client of the load test; its tally is its own, so workers
// share nothing they write.
type worker struct {
	id  int
	l   *load
	rng *rand.Rand
	seq int
	t   tally
}

// acked is a write the service said it applied.
type acked struct {
	kind     string // an op name
	id       string // transaction or hold ID
	from, to string // the account (the source of a transfer) and a transfer's destination
	amount   int64
}

// openHold is a hold left to expire.
type openHold struct{ account, id string }

type tally struct {
	outcomes    map[string]map[string]int // op -> outcome -> answers
	latency     []time.Duration
	acked       []acked
	left        []openHold
	resent      int // keys sent again after their answer
	resentSame  int // ... and answered as the first time, marked replayed
	together    int // keys sent twice at once
	togetherOK  int // ... and answered alike, exactly one not marked replayed
	reused      int // keys sent again with another amount
	reused409   int // ... and answered 409 naming "amount"
	unknown     int // 503 unknown_outcome answers, retried with the same key
	unavailable int // requests still unanswered after maxAttempts
}

func newTally() tally { return tally{outcomes: make(map[string]map[string]int)} }

func (t *tally) merge(o *tally) {
	for op, m := range o.outcomes {
		if t.outcomes[op] == nil {
			t.outcomes[op] = make(map[string]int)
		}
		for k, n := range m {
			t.outcomes[op][k] += n
		}
	}
	t.latency = append(t.latency, o.latency...)
	t.acked = append(t.acked, o.acked...)
	t.left = append(t.left, o.left...)
	t.resent += o.resent
	t.resentSame += o.resentSame
	t.together += o.together
	t.togetherOK += o.togetherOK
	t.reused += o.reused
	t.reused409 += o.reused409
	t.unknown += o.unknown
	t.unavailable += o.unavailable
}

func (w *worker) nextID(kind string) string {
	w.seq++
	return fmt.Sprintf("%s-%s-w%d-%d", kind, w.l.run, w.id, w.seq)
}

// pick returns an account of group g, or of any group when g < 0.
func (w *worker) pick(g int) string {
	if g < 0 {
		return w.l.accounts[w.rng.IntN(len(w.l.accounts))]
	}
	n := w.l.cfg.Groups
	inGroup := (len(w.l.accounts) - g + n - 1) / n
	return w.l.accounts[g+n*w.rng.IntN(inGroup)]
}

func (w *worker) amount(lo, hi int64) int64 { return lo + w.rng.Int64N(hi-lo+1) }

// step runs one operation.
func (w *worker) step(ctx context.Context) error {
	switch p := w.rng.IntN(100); {
	case p < shareCredit:
		acct, n := w.pick(-1), w.amount(1_000, 10_000)
		_, err := w.write(ctx, acked{kind: "credit", id: w.nextID("cr"), from: acct, amount: n},
			"/accounts/"+url.PathEscape(acct)+"/credits", func(n int64) any { return postingRequest{Amount: n} })
		return err
	case p < shareCredit+shareDebit:
		acct, n := w.pick(-1), w.amount(500, 8_000)
		_, err := w.write(ctx, acked{kind: "debit", id: w.nextID("db"), from: acct, amount: n},
			"/accounts/"+url.PathEscape(acct)+"/debits", func(n int64) any { return postingRequest{Amount: n} })
		return err
	case p < shareCredit+shareDebit+shareTransfer:
		g := w.rng.IntN(w.l.cfg.Groups)
		from, to := w.pick(g), w.pick(g)
		for to == from {
			to = w.pick(g)
		}
		return w.transfer(ctx, "transfer", from, to)
	case p < shareCredit+shareDebit+shareTransfer+shareXTransfer:
		g := w.rng.IntN(w.l.cfg.Groups)
		other := (g + 1 + w.rng.IntN(w.l.cfg.Groups-1)) % w.l.cfg.Groups
		return w.transfer(ctx, "transfer-x", w.pick(g), w.pick(other))
	}
	return w.hold(ctx)
}

func (w *worker) transfer(ctx context.Context, kind, from, to string) error {
	_, err := w.write(ctx, acked{kind: kind, id: w.nextID("tr"), from: from, to: to, amount: w.amount(100, 5_000)},
		"/transfers", func(n int64) any { return transferRequest{From: from, To: to, Amount: n} })
	return err
}

func (w *worker) hold(ctx context.Context) error {
	acct := w.pick(-1)
	h := acked{kind: "hold", id: w.nextID("hd"), from: acct, amount: w.amount(100, 3_000)}
	path := "/accounts/" + url.PathEscape(acct) + "/holds"
	ttl := holdTTL.String()
	applied, err := w.write(ctx, h, path, func(n int64) any { return holdRequest{Amount: n, TTL: ttl} })
	if !applied {
		return err
	}
	path += "/" + url.PathEscape(h.id)
	var a answer
	switch p := w.rng.Float64(); {
	case p < holdCapture:
		c := acked{kind: "capture", id: h.id, from: acct, amount: w.amount(1, h.amount)}
		a, err = w.send(ctx, "capture", http.MethodPost, path+"/capture", "", captureRequest{Amount: c.amount})
		if a.ok() {
			w.t.acked = append(w.t.acked, c)
		}
	case p < holdCapture+holdVoid:
		a, err = w.send(ctx, "void", http.MethodPost, path+"/void", "", nil)
		if a.ok() {
			w.t.acked = append(w.t.acked, acked{kind: "void", id: h.id, from: acct})
		}
	default:
		w.t.left = append(w.t.left, openHold{acct, h.id})
		return nil
	}
	if a.code == "hold_expired" { // the machine stalled for longer than the TTL
		w.t.left = append(w.t.left, openHold{acct, h.id})
	}
	return err
}

// write sends a keyed write whose body for an amount n is body(n):
// sometimes twice (after the first answer, or both at once), sometimes
// followed by a reuse of its key with another amount. It records the
// transaction in the tally, and returns true, when the service says it
// applied it.
func (w *worker) write(ctx context.Context, tx acked, path string, body func(n int64) any) (applied bool, err error) {
	var first answer
	switch p := w.rng.Float64(); {
	case p < resendTogether:
		var second answer
		var err2 error
		var wg sync.WaitGroup
		wg.Go(func() { second, err2 = w.l.client.do(ctx, http.MethodPost, path, tx.id, body(tx.amount)) })
		first, err = w.l.client.do(ctx, http.MethodPost, path, tx.id, body(tx.amount))
		wg.Wait()
		if err = errors.Join(err, err2); err != nil {
			return false, err
		}
		w.record(tx.kind, first)
		w.record(tx.kind, second)
		w.t.together++
		if first.status == second.status && bytes.Equal(first.body, second.body) && (!first.ok() || first.replayed != second.replayed) {
			w.t.togetherOK++
		}
	default:
		if first, err = w.send(ctx, tx.kind, http.MethodPost, path, tx.id, body(tx.amount)); err != nil {
			return false, err
		}
		if p < resendTogether+resendAfter {
			again, err := w.send(ctx, tx.kind, http.MethodPost, path, tx.id, body(tx.amount))
			if err != nil {
				return false, err
			}
			w.t.resent++
			if again.status == first.status && bytes.Equal(again.body, first.body) && again.replayed == first.ok() {
				w.t.resentSame++
			}
		}
	}
	if first.ok() {
		w.t.acked = append(w.t.acked, tx)
	}
	if w.rng.Float64() < reuseKey {
		a, err := w.send(ctx, tx.kind, http.MethodPost, path, tx.id, body(tx.amount+1))
		if err != nil {
			return first.ok(), err
		}
		w.t.reused++
		var c httpx.Problem
		if a.status == http.StatusConflict && json.Unmarshal(a.body, &c) == nil && c.Field == "amount" {
			w.t.reused409++
		}
	}
	return first.ok(), nil
}

// send sends one request and tallies its answer.
func (w *worker) send(ctx context.Context, op, method, path, key string, body any) (answer, error) {
	a, err := w.l.client.do(ctx, method, path, key, body)
	if err == nil {
		w.record(op, a)
	}
	return a, err
}

// record tallies an answer and its latency.
func (w *worker) record(op string, a answer) {
	w.t.latency = append(w.t.latency, a.latency)
	w.t.unknown += a.retries
	if a.status == http.StatusServiceUnavailable {
		w.t.unavailable++
	}
	m := w.t.outcomes[op]
	if m == nil {
		m = make(map[string]int)
		w.t.outcomes[op] = m
	}
	m[a.outcome()]++
}

// answer is what the service said to one request.
type answer struct {
	status   int
	code     string // the problem's code; "" on success
	replayed bool   // Idempotent-Replayed: true
	body     []byte
	retries  int           // 503 answers before this one, retried with the same key
	latency  time.Duration // from the first attempt to this answer
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

func (a answer) outcome() string {
	switch {
	case a.ok() && a.replayed:
		return "replayed"
	case a.ok():
		return "ok"
	case a.code != "":
		return a.code
	}
	return strconv.Itoa(a.status)
}

// client is the load test's side of the API.
type client struct {
	base string
	key  string // API key
	hc   *http.Client
}

// do sends a request with key as its Idempotency-Key (none when empty).
// A 503 (outcome unknown) is sent again with the same key, which is how a
// client learns what happened.
func (c *client) do(ctx context.Context, method, path, key string, body any) (a answer, err error) {
	var data []byte
	if body != nil {
		if data, err = json.Marshal(body); err != nil {
			return a, err
		}
	}
	start := time.Now()
	defer func() { a.latency = time.Since(start) }()
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(data))
		if err != nil {
			return a, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.key)
		if key != "" {
			req.Header.Set(httpx.IdempotencyKeyHeader, key)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return a, err
		}
		a.body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return a, err
		}
		a.status, a.code = resp.StatusCode, ""
		a.replayed = resp.Header.Get(httpx.ReplayedHeader) == "true"
		if !a.ok() {
			var p httpx.Problem
			_ = json.Unmarshal(a.body, &p)
			a.code = p.Code
		}
		if a.status != http.StatusServiceUnavailable || key == "" || attempt == maxAttempts {
			return a, nil
		}
		a.retries++
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// loadReport is what the load test found.
type loadReport struct {
	cfg     loadConfig
	redis   string
	elapsed time.Duration
	t       tally

	recovered     int   // transfers across groups Recover found in flight afterwards
	heldAfter     int64 // funds still held once the holds left alone had time to expire
	lateCaptures  int   // captures of expired holds, after the run
	late422       int   // ... answered 422 hold_expired
	doubles       int   // journal entries repeating a transaction on an account
	missing       int   // acknowledged transactions not in the journal (or with another amount)
	unacked       int   // journal entries of transactions nobody was told were applied
	negative      int   // accounts without overdraft whose available balance went below 0
	pastOverdraft int   // accounts with an overdraft that went below it
	verified      int   // accounts Verify found consistent
	posted        int64 // sum of the accounts' posted balances
	credits       int64 // sum of acknowledged credits
	debits        int64 // sum of acknowledged debits and captures
	trial         wallet.Trial
	book          *book.Verdict // with DATABASE_URL set: the book beside Redis

	Problems []string
}

func (r *loadReport) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// audit checks the books against the tally.
func (l *load) audit(ctx context.Context, led *wallet.Ledger, r *loadReport) error {
	n, err := led.Recover(ctx)
	if err != nil {
		return err
	}
	r.recovered = n
	if err := l.awaitExpiry(ctx, led, r); err != nil {
		return err
	}
	for _, h := range r.t.left {
		a, err := l.client.do(ctx, http.MethodPost, "/accounts/"+url.PathEscape(h.account)+"/holds/"+url.PathEscape(h.id)+"/capture", "", captureRequest{Amount: 1})
		if err != nil {
			return err
		}
		r.lateCaptures++
		if a.status == http.StatusUnprocessableEntity && a.code == "hold_expired" {
			r.late422++
		}
	}

	// What the journals should hold, from what the service said.
	type posting struct{ account, tx, kind string }
	want := make(map[posting]int64) // -> delta of posted
	for _, a := range r.t.acked {
		switch a.kind {
		case "credit":
			want[posting{a.from, a.id, wallet.KindCredit}] = a.amount
			r.credits += a.amount
		case "debit":
			want[posting{a.from, a.id, wallet.KindDebit}] = -a.amount
			r.debits += a.amount
		case "transfer-x":
			want[posting{a.from, a.id, wallet.KindTransferHold}] = 0
			fallthrough
		case "transfer":
			want[posting{a.from, a.id, wallet.KindTransferOut}] = -a.amount
			want[posting{a.to, a.id, wallet.KindTransferIn}] = a.amount
		case "hold":
			want[posting{a.from, a.id, wallet.KindHold}] = 0
		case "capture":
			want[posting{a.from, a.id, wallet.KindCapture}] = -a.amount
			r.debits += a.amount
		case "void":
			want[posting{a.from, a.id, wallet.KindVoid}] = 0
		}
	}
	for _, h := range r.t.left {
		want[posting{h.account, h.id, wallet.KindHoldExpire}] = 0
	}

	seen := make(map[posting]int)
	var verifyErrs []error
	for _, acct := range l.accounts {
		low := int64(0)
		for cursor := ""; ; {
			es, next, err := led.Entries(ctx, acct, cursor, wallet.MaxPage)
			if err != nil {
				return err
			}
			for _, e := range es {
				low = min(low, e.Posted-e.Held)
				if e.TxID == "" { // open, close, checkpoint
					continue
				}
				// The ledger knows the load test's keys scoped by its
				// principal; anything else is no key of the load test.
				id, ok := httpx.KeyOf(loadPrincipal, e.TxID)
				if !ok {
					id = e.TxID
				}
				p := posting{acct, id, e.Kind}
				seen[p]++
				switch d, ok := want[p]; {
				case !ok:
					r.unacked++
				case seen[p] > 1:
					r.doubles++
				case d != e.Delta:
					r.missing++ // another amount than acknowledged
				}
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		switch od := l.limit[acct]; {
		case od == 0 && low < 0:
			r.negative++
		case low < -od:
			r.pastOverdraft++
		}
		if err := led.Verify(ctx, acct); err != nil {
			verifyErrs = append(verifyErrs, err)
		} else {
			r.verified++
		}
		b, err := led.Balance(ctx, acct)
		if err != nil {
			return err
		}
		r.posted += b.Posted
	}
	for p := range want {
		if seen[p] == 0 {
			r.missing++
		}
	}
	if r.trial, err = led.TrialBalance(ctx, l.accounts...); err != nil {
		return err
	}

	if len(verifyErrs) > 0 {
		r.problem("Verify failed on %d accounts, first: %v", len(verifyErrs), verifyErrs[0])
	}
	if r.doubles > 0 {
		r.problem("%d double charges", r.doubles)
	}
	if r.missing > 0 {
		r.problem("%d acknowledged transactions missing from the journals", r.missing)
	}
	if r.unacked > 0 {
		r.problem("%d journal entries of transactions never acknowledged", r.unacked)
	}
	if r.negative+r.pastOverdraft > 0 {
		r.problem("%d accounts went below their limit", r.negative+r.pastOverdraft)
	}
	if r.posted != r.credits-r.debits {
		r.problem("sum of balances %d != credits %d - debits %d", r.posted, r.credits, r.debits)
	}
	if !r.trial.Balanced() || r.trial.NetTransfers() != 0 || r.trial.Posted != r.posted {
		r.problem("trial balance off: %+v", r.trial)
	}
	if r.heldAfter != 0 || r.late422 != r.lateCaptures {
		r.problem("holds left alone did not expire: %d still held, %d of %d late captures refused", r.heldAfter, r.late422, r.lateCaptures)
	}
	if r.t.resentSame != r.t.resent || r.t.togetherOK != r.t.together || r.t.reused409 != r.t.reused {
		r.problem("repeated keys answered inconsistently: %d of %d re-sent, %d of %d sent at once, %d of %d reused",
			r.t.resent-r.t.resentSame, r.t.resent, r.t.together-r.t.togetherOK, r.t.together, r.t.reused-r.t.reused409, r.t.reused)
	}
	if r.t.unavailable > 0 {
		r.problem("%d requests still 503 after %d attempts", r.t.unavailable, maxAttempts)
	}
	return nil
}

// awaitExpiry waits until the holds left alone have expired (every call on
// an account releases its expired holds first, so reading the balances is
// enough), for at most the hold TTL plus a few seconds.
func (l *load) awaitExpiry(ctx context.Context, led *wallet.Ledger, r *loadReport) error {
	give := time.Now().Add(holdTTL + 5*time.Second)
	for {
		r.heldAfter = 0
		for _, acct := range l.accounts {
			b, err := led.Balance(ctx, acct)
			if err != nil {
				return err
			}
			r.heldAfter += b.Held
		}
		if r.heldAfter == 0 || time.Now().After(give) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *loadReport) print(out io.Writer) {
	t := &r.t
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	slices.Sort(t.latency)
	pct := func(q float64) time.Duration {
		if len(t.latency) == 0 {
			return 0
		}
		return t.latency[int(q*float64(len(t.latency)-1))].Round(10 * time.Microsecond)
	}
	p("wallet load test on %s", r.redis)
	p("  %d accounts in %d slot groups (every %dth with an overdraft of %d), %d workers, %s",
		r.cfg.Accounts, r.cfg.Groups, overdraftEvery, overdraftLimit, r.cfg.Workers, r.cfg.Duration)
	p("")
	p("requests   %d in %s: %.0f ops/s, latency p50 %s, p99 %s", len(t.latency), r.elapsed.Round(time.Millisecond),
		float64(len(t.latency))/r.elapsed.Seconds(), pct(0.50), pct(0.99))
	for _, op := range ops {
		m := t.outcomes[op]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return m[b] - m[a] })
		line := ""
		for _, k := range keys {
			line += fmt.Sprintf("  %s %d", k, m[k])
		}
		p("  %-11s%s", op, line)
	}
	p("repeats    %d sent again after the answer: %d answered the same, marked replayed", t.resent, t.resentSame)
	p("           %d sent twice at once: %d answered alike, one of each pair marked replayed", t.together, t.togetherOK)
	p("           %d keys reused with another amount: %d answered 409 naming \"amount\"", t.reused, t.reused409)
	p("           %d answers 503 unknown_outcome, retried with the same key", t.unknown)
	p("holds      %d left to expire: %d still held afterwards; %d captured late, %d answered 422 hold_expired",
		len(t.left), r.heldAfter, r.lateCaptures, r.late422)
	p("recovery   %d transfers across groups found in flight afterwards", r.recovered)
	p("")
	p("double charges                        %d", r.doubles)
	p("acknowledged but not in the journal   %d", r.missing)
	p("in the journal but not acknowledged   %d", r.unacked)
	p("negative balances without overdraft   %d", r.negative)
	p("accounts past their overdraft         %d", r.pastOverdraft)
	p("Verify                                %d of %d accounts OK", r.verified, r.cfg.Accounts)
	p("sum of balances                       %d = credits %d - debits %d (captures included); transfers net %d",
		r.posted, r.credits, r.debits, r.trial.NetTransfers())
	if r.book != nil {
		p("")
		r.book.Print(out)
		p("")
	}
	if len(r.Problems) == 0 {
		p("OK")
		return
	}
	for _, pr := range r.Problems {
		p("FAILED: %s", pr)
	}
}
