package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/pgjournal"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// The model-based test of the book: random sequences of wallet operations
// (credits and debits that may name their currency and carry a memo with a
// NUL, transfers within and across slot groups), stock operations (deducts
// of one or two SKUs, restocks), clients' retries of earlier operations,
// reconciles, repairs and checkpoints, while the sinks run, with faults
// drawn from: the sinks killed (and started again), PostgreSQL killed
// (SIGKILL) and started again, Redis restarted without persistence (the
// accounts opened and the SKUs created again), entries lost (a failover to
// a replica that missed the last operations, booked by the sinks or not),
// and damaged entries written into a journal.
//
// The model keeps what Redis must hold (each account's posted balance and
// each SKU's levels, from the operations it acknowledged, less those a
// fault lost) and what each operation ID holds in Redis (its outcome, or
// nothing once lost). It checks:
//
//   - every answer of Redis, and Redis's balances and levels, against the
//     model, after every step;
//   - a repair applies only an operation Redis lost, and changes no
//     balance or level that was not lost; a client's retry of an operation
//     Redis holds (repaired or never lost) is answered as a replay;
//   - a key no fault touched is never reported in drift, while the sinks
//     run (lag is not drift) or not, and can be checkpointed;
//   - after the run quiesces (the sinks caught up): every entry of Redis's
//     journals is booked, or recorded as an anomaly; every projection is
//     the sum of its entries; and every key either agrees with the book or
//     is reported with the entries behind it (lost booked entries, entries
//     the book lacks, or the sinks' anomalies).

type modelEnv struct {
	t    *testing.T
	pg   *pgtest.Server
	pair *redistest.Pair
	pool *pgxpool.Pool
	// A run that failed midway (rapid then runs shorter ones) may leave
	// PostgreSQL down or the replica cut off: heal undoes that.
	pgDown, detached bool
}

// heal starts PostgreSQL again and reattaches the replica when a failed
// run left them so.
func (e *modelEnv) heal(ctx context.Context) error {
	if e.pgDown {
		e.pg.StartAgain(e.t)
		e.pool.Reset()
		e.pgDown = false
	}
	if e.detached {
		host, port, _ := strings.Cut(e.pair.Primary.Addr(), ":")
		replica := e.pair.Replica.Client()
		err := replica.Do(ctx, "REPLICAOF", host, port).Err()
		_ = replica.Close()
		if err != nil {
			return err
		}
		e.detached = false
	}
	return e.pair.Sync(ctx)
}

// mOp is an operation the model sent, as a client would send it again.
type mOp struct {
	id     string
	kind   string // credit, debit, transfer, deduct, restock
	tx     wallet.Tx
	tr     wallet.Transfer
	order  stock.Order
	sku    string // restock
	qty    int64  // restock
	status string // what Redis holds under the ID: "ok", "refused", or "" (nothing: never sent, or lost)
}

type bookModel struct {
	rt        *rapid.T
	env       *modelEnv
	ctx       context.Context
	prefix    string
	schema    string
	sendOnce  bool
	rdb       *redis.Client
	inv       *stock.Inventory
	led       *wallet.Ledger
	book      *pgjournal.Book
	stopSinks []func() error
	running   bool

	accounts []string
	skus     []string
	posted   map[string]int64    // what Redis must hold
	levels   map[string][2]int64 // available, sold
	ops      []*mOp
	byID     map[string]*mOp
	touched  map[string]bool // keys a fault may have made differ
	poisoned map[string]bool
	seq      int

	stats map[string]int
}

const modelInitial = 40

var (
	modelAccounts = []string{"ma/x", "ma/y", "mb/z"}
	modelSKUs     = []string{"ms/a", "ms/b"}
)

func (m *bookModel) fatalf(format string, args ...any) {
	m.rt.Helper()
	m.rt.Fatalf(format, args...)
}

// client returns a new client of the pair's primary.
func (m *bookModel) connect() {
	opts := &redis.Options{Addr: m.env.pair.Primary.Addr()}
	if m.sendOnce {
		opts.MaxRetries = -1
	}
	m.rdb = redis.NewClient(opts)
	var err error
	if m.inv, err = stock.New(m.rdb, stock.WithKeyPrefix(m.prefix)); err != nil {
		m.fatalf("stock: %v", err)
	}
	if m.led, err = wallet.New(m.rdb, wallet.WithKeyPrefix(m.prefix)); err != nil {
		m.fatalf("wallet: %v", err)
	}
}

func (m *bookModel) disconnect() {
	_ = m.led.Close()
	_ = m.inv.Close()
	_ = m.rdb.Close()
}

func (m *bookModel) startSinks() {
	if m.running {
		return
	}
	inv, led, book := m.inv, m.led, m.book
	m.stopSinks = []func() error{
		runSink(m.env.t, func(ctx context.Context) error {
			return book.SinkStock(ctx, inv, stock.Consumer{Group: "book", Name: "sink", SKUs: m.skus, Poll: 5 * time.Millisecond, MinIdle: time.Hour})
		}),
		runSink(m.env.t, func(ctx context.Context) error {
			return book.SinkWallet(ctx, led, pgjournal.WalletSource{Accounts: m.accounts, Poll: 5 * time.Millisecond, Batch: 7})
		}),
	}
	m.running = true
}

func (m *bookModel) stopAllSinks() {
	for _, stop := range m.stopSinks {
		if err := stop(); err != nil {
			m.fatalf("sink: %v", err)
		}
	}
	m.stopSinks, m.running = nil, false
}

// reconnect moves the model to the pair's (new) primary: the sinks of the
// old clients are stopped and, when they ran, started on the new ones.
func (m *bookModel) reconnect() {
	was := m.running
	m.stopAllSinks()
	m.disconnect()
	m.connect()
	if was {
		m.startSinks()
	}
}

func (m *bookModel) nextID(kind string) string {
	m.seq++
	return fmt.Sprintf("%s-%d", kind, m.seq)
}

// setUp opens the accounts and creates the SKUs (again, after a restart
// without persistence).
func (m *bookModel) setUp() {
	for _, a := range m.accounts {
		if err := m.led.Open(m.ctx, a, wallet.WithCurrency("EUR")); err != nil {
			m.fatalf("open %s: %v", a, err)
		}
		m.posted[a] = 0
	}
	for _, s := range m.skus {
		if err := m.inv.Create(m.ctx, s, modelInitial); err != nil {
			m.fatalf("create %s: %v", s, err)
		}
		m.levels[s] = [2]int64{modelInitial, 0}
	}
}

// effect applies op's effect to the model (sign -1 takes it back).
func (m *bookModel) effect(op *mOp, sign int64) {
	switch op.kind {
	case "credit":
		m.posted[op.tx.Account] += sign * op.tx.Amount
	case "debit":
		m.posted[op.tx.Account] -= sign * op.tx.Amount
	case "transfer":
		m.posted[op.tr.From] -= sign * op.tr.Amount
		m.posted[op.tr.To] += sign * op.tr.Amount
	case "deduct":
		for _, it := range op.order.Items {
			l := m.levels[it.SKU]
			m.levels[it.SKU] = [2]int64{l[0] - sign*it.Qty, l[1] + sign*it.Qty}
		}
	case "restock":
		l := m.levels[op.sku]
		m.levels[op.sku] = [2]int64{l[0] + sign*op.qty, l[1]}
	}
}

// keys are the accounts or SKUs op changes.
func (op *mOp) keys() []string {
	switch op.kind {
	case "credit", "debit":
		return []string{op.tx.Account}
	case "transfer":
		return []string{op.tr.From, op.tr.To}
	case "deduct":
		var ks []string
		for _, it := range op.order.Items {
			ks = append(ks, it.SKU)
		}
		return ks
	}
	return []string{op.sku}
}

// fits reports whether Redis, as the model holds it, accepts op.
func (m *bookModel) fits(op *mOp) bool {
	switch op.kind {
	case "debit":
		return m.posted[op.tx.Account] >= op.tx.Amount
	case "transfer":
		return m.posted[op.tr.From] >= op.tr.Amount
	case "deduct":
		for _, it := range op.order.Items {
			if m.levels[it.SKU][0] < it.Qty {
				return false
			}
		}
	}
	return true
}

// send sends op (new, or a client's retry) and checks Redis's answer
// against the model.
func (m *bookModel) send(op *mOp) {
	var replayed bool
	var err error
	switch op.kind {
	case "credit":
		var r wallet.Result
		r, err = m.led.Credit(m.ctx, op.tx)
		replayed = r.Replayed
	case "debit":
		var r wallet.Result
		r, err = m.led.Debit(m.ctx, op.tx)
		replayed = r.Replayed
	case "transfer":
		var r wallet.Result
		r, err = m.led.Transfer(m.ctx, op.tr)
		replayed = r.Replayed
	case "deduct":
		var r stock.Result
		r, err = m.inv.Deduct(m.ctx, op.order)
		replayed = r.Replayed
	case "restock":
		var r stock.Result
		r, err = m.inv.Restock(m.ctx, op.id, op.sku, op.qty)
		replayed = r.Replayed
	}
	refused := errors.Is(err, wallet.ErrInsufficientFunds) || errors.Is(err, stock.ErrSoldOut)
	if err != nil && !refused {
		m.fatalf("%s %s: %v", op.kind, op.id, err)
	}
	switch op.status {
	case "ok":
		if err != nil || !replayed {
			m.fatalf("BUG: retry of %s %s, which Redis holds: replayed %v, %v; want the stored answer", op.kind, op.id, replayed, err)
		}
	case "refused":
		if !refused {
			m.fatalf("retry of the refused %s %s: %v, want the refusal", op.kind, op.id, err)
		}
	default:
		if want := m.fits(op); refused == want || replayed {
			m.fatalf("%s %s: replayed %v, %v; the model says it fits: %v", op.kind, op.id, replayed, err, want)
		}
		if refused {
			op.status = "refused"
		} else {
			op.status = "ok"
			m.effect(op, 1)
		}
	}
	m.stats["sent"]++
}

func (m *bookModel) newOp() *mOp {
	rt := m.rt
	id := m.nextID("op")
	op := &mOp{id: id}
	switch rapid.SampledFrom([]string{"credit", "credit", "debit", "transfer", "deduct", "deduct", "restock"}).Draw(rt, "kind") {
	case "credit", "debit":
		op.kind = rapid.SampledFrom([]string{"credit", "debit"}).Draw(rt, "posting")
		op.tx = wallet.Tx{ID: id, Account: rapid.SampledFrom(m.accounts).Draw(rt, "account"),
			Amount:   int64(rapid.IntRange(1, 30).Draw(rt, "amount")),
			Currency: rapid.SampledFrom([]string{"", "EUR"}).Draw(rt, "currency"),
			Memo:     rapid.SampledFrom([]string{"", "top-up", "gift\x00card"}).Draw(rt, "memo")}
	case "transfer":
		from := rapid.SampledFrom(m.accounts).Draw(rt, "from")
		to := rapid.SampledFrom(m.accounts).Filter(func(a string) bool { return a != from }).Draw(rt, "to")
		op.kind = "transfer"
		op.tr = wallet.Transfer{ID: id, From: from, To: to, Amount: int64(rapid.IntRange(1, 20).Draw(rt, "amount")),
			Memo: rapid.SampledFrom([]string{"", "pay\x00ment"}).Draw(rt, "memo")}
	case "deduct":
		op.kind = "deduct"
		op.order = stock.Order{ID: id, Buyer: "b" + id}
		for _, s := range m.skus {
			if len(op.order.Items) == 0 || rapid.Bool().Draw(rt, "both") {
				op.order.Items = append(op.order.Items, stock.Item{SKU: s, Qty: int64(rapid.IntRange(1, 4).Draw(rt, "qty"))})
			}
		}
	case "restock":
		op.kind, op.sku, op.qty = "restock", rapid.SampledFrom(m.skus).Draw(rt, "sku"), int64(rapid.IntRange(1, 5).Draw(rt, "qty"))
	}
	m.ops = append(m.ops, op)
	m.byID[id] = op
	return op
}

// checkRedis compares Redis's balances and levels with the model.
func (m *bookModel) checkRedis(when string) {
	for _, a := range m.accounts {
		b, err := m.led.Balance(m.ctx, a)
		if err != nil {
			m.fatalf("%s: balance %s: %v", when, a, err)
		}
		if b.Posted != m.posted[a] || b.Held != 0 {
			m.fatalf("BUG: %s: %s holds %d (held %d) in Redis, the model %d", when, a, b.Posted, b.Held, m.posted[a])
		}
	}
	for _, s := range m.skus {
		l, err := m.inv.Level(m.ctx, s)
		if err != nil {
			m.fatalf("%s: level %s: %v", when, s, err)
		}
		if want := m.levels[s]; l.Available != want[0] || l.Sold != want[1] {
			m.fatalf("BUG: %s: %s holds %+v in Redis, the model %v", when, s, l, want)
		}
	}
}

// reconcile reconciles every key, checks that no key a fault left alone
// is reported, and returns the drifts.
func (m *bookModel) reconcile(when string) map[string]pgjournal.Drift {
	out := map[string]pgjournal.Drift{}
	for _, r := range []func() ([]pgjournal.Drift, error){
		func() ([]pgjournal.Drift, error) { return m.book.ReconcileWallet(m.ctx, m.led, m.accounts...) },
		func() ([]pgjournal.Drift, error) { return m.book.ReconcileStock(m.ctx, m.inv, m.skus...) },
	} {
		ds, err := r()
		if errors.Is(err, pgjournal.ErrBusy) {
			m.stats["busy"]++
			continue
		}
		if err != nil {
			m.fatalf("%s: reconcile: %v", when, err)
		}
		for _, d := range ds {
			if !m.touched[d.Key] {
				m.fatalf("BUG: %s: %s is reported in drift (Redis %v, book %v, %d unbooked, anomalies %v), and no fault touched it",
					when, d.Key, d.Redis, d.Book, d.Unbooked, d.Anomalies)
			}
			out[d.Key] = d
		}
	}
	m.stats["reconciled"]++
	return out
}

func (m *bookModel) repairWallet() {
	a := rapid.SampledFrom(m.accounts).Draw(m.rt, "repair account")
	rs, err := m.book.RepairWallet(m.ctx, m.led, a)
	if err != nil && !errors.Is(err, pgjournal.ErrUnrepairable) && !errors.Is(err, pgjournal.ErrBusy) {
		m.fatalf("repair %s: %v", a, err)
	}
	for _, r := range rs {
		m.repaired(r, "repair of "+a)
	}
	m.checkRedis("after the repair of " + a)
}

func (m *bookModel) repairStock() {
	s := rapid.SampledFrom(m.skus).Draw(m.rt, "repair sku")
	orders := func(_ context.Context, id string) (stock.Order, bool, error) {
		op, ok := m.byID[id]
		if !ok || op.kind != "deduct" {
			return stock.Order{}, false, nil
		}
		return op.order, true, nil
	}
	rs, err := m.book.RepairStock(m.ctx, m.inv, s, orders)
	if err != nil && !errors.Is(err, pgjournal.ErrUnrepairable) && !errors.Is(err, pgjournal.ErrBusy) {
		m.fatalf("repair %s: %v", s, err)
	}
	for _, r := range rs {
		m.repaired(r, "repair of "+s)
	}
	m.checkRedis("after the repair of " + s)
}

// repaired follows one repair's outcome in the model: only an operation
// Redis lost may be applied.
func (m *bookModel) repaired(r pgjournal.Repair, what string) {
	op := m.byID[r.Op]
	switch r.Outcome {
	case "applied":
		if op == nil || op.status != "" {
			m.fatalf("BUG: %s applied %s %s, which Redis did not lose (%+v)", what, r.Kind, r.Op, op)
		}
		if !m.fits(op) {
			m.fatalf("BUG: %s applied %s %s, which does not fit", what, r.Kind, r.Op)
		}
		op.status = "ok"
		m.effect(op, 1)
		m.stats["repaired"]++
		// The client's own retry, within the window, is answered from the
		// marker the repair restored.
		m.send(op)
	case "already":
		if op == nil || op.status == "" {
			m.fatalf("BUG: %s answered %s %s from a marker Redis lost", what, r.Kind, r.Op)
		}
	case "skipped":
		switch {
		case errors.Is(r.Err, pgjournal.ErrUnrepairable):
			m.stats["unrepairable"]++
		case errors.Is(r.Err, wallet.ErrInsufficientFunds), errors.Is(r.Err, stock.ErrSoldOut):
			if op == nil || op.status != "" || m.fits(op) {
				m.fatalf("BUG: %s refused %s %s: %v (%+v)", what, r.Kind, r.Op, r.Err, op)
			}
			op.status = "refused" // stored under its ID
		default:
			m.fatalf("%s: %s %s: %v", what, r.Kind, r.Op, r.Err)
		}
	}
}

func (m *bookModel) checkpoint() {
	a := rapid.SampledFrom(m.accounts).Draw(m.rt, "checkpoint account")
	_, _, err := m.book.CheckpointWallet(m.ctx, m.led, a)
	switch {
	case err == nil, errors.Is(err, pgjournal.ErrBusy):
	case !m.touched[a] && !m.poisoned[a]:
		m.fatalf("BUG: checkpoint of %s, which no fault touched: %v", a, err)
	case errors.Is(err, pgjournal.ErrDrift), errors.Is(err, wallet.ErrMismatch):
		m.stats["checkpoint refused"]++
	default:
		m.fatalf("checkpoint %s: %v", a, err)
	}
}

// caughtUp reports whether the book holds the last entry of every journal
// (booked, or recorded as an anomaly).
func (m *bookModel) caughtUp() bool {
	last := func(module, key, id string) bool {
		var n int64
		err := m.env.pool.QueryRow(m.ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s.%[2]s_entries WHERE %[3]s = $1 AND stream_id = $2)
			+ (SELECT count(*) FROM %[1]s.anomalies WHERE module = '%[2]s' AND key = $1 AND stream_id = $2)`,
			m.schema, module, map[string]string{"stock": "sku", "wallet": "account"}[module]), key, id).Scan(&n)
		return err == nil && n > 0
	}
	for _, a := range m.accounts {
		ids := m.walletIDs(a)
		if len(ids) > 0 && !last("wallet", a, ids[len(ids)-1]) {
			return false
		}
	}
	for _, s := range m.skus {
		ids := m.stockIDs(s)
		if len(ids) > 0 && !last("stock", s, ids[len(ids)-1]) {
			return false
		}
	}
	return true
}

func (m *bookModel) walletIDs(a string) []string {
	return journalIDs(m.rt, func(c string) ([]wallet.Entry, string, error) { return m.led.Entries(m.ctx, a, c, wallet.MaxPage) },
		func(e wallet.Entry) string { return e.ID })
}

func (m *bookModel) stockIDs(s string) []string {
	return journalIDs(m.rt, func(c string) ([]stock.Entry, string, error) { return m.inv.Entries(m.ctx, s, c, stock.MaxPage) },
		func(e stock.Entry) string { return e.ID })
}

func (m *bookModel) waitCaughtUp(what string) {
	m.startSinks()
	deadline := time.Now().Add(60 * time.Second)
	for !m.caughtUp() {
		if time.Now().After(deadline) {
			m.fatalf("BUG: the sinks did not catch up (%s)", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lose runs a few operations on the primary while its replica is cut off,
// lets the sinks book them or not, and fails over to the replica: Redis
// loses them, as in a failover without replica acknowledgement.
func (m *bookModel) lose() {
	ctx := m.ctx
	if err := m.env.pair.Sync(ctx); err != nil {
		m.fatalf("sync: %v", err)
	}
	replica := m.env.pair.Replica.Client()
	m.env.detached = true
	err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err()
	_ = replica.Close()
	if err != nil {
		m.fatalf("detach: %v", err)
	}
	var lost []*mOp
	for range rapid.IntRange(1, 3).Draw(m.rt, "lost ops") {
		var op *mOp
		if len(m.ops) > 0 && rapid.IntRange(0, 3).Draw(m.rt, "lost retry") == 0 {
			op = rapid.SampledFrom(m.ops).Draw(m.rt, "lost retried op")
		} else {
			op = m.newOp()
		}
		before := op.status
		m.send(op)
		if before == "" && op.status != "" {
			lost = append(lost, op)
		}
	}
	if rapid.Bool().Draw(m.rt, "booked before the loss") {
		m.waitCaughtUp("before a loss")
		m.stats["lost booked"] += len(lost)
	}
	if err := m.env.pair.Failover(ctx); err != nil {
		m.fatalf("failover: %v", err)
	}
	m.env.detached = false
	m.reconnect()
	for _, op := range lost {
		// Redis holds nothing under the ID now: its effect, entries and
		// marker (or stored refusal) went with the old primary.
		if op.status == "ok" {
			m.effect(op, -1)
		}
		op.status = ""
		for _, k := range op.keys() {
			m.touched[k] = true
		}
	}
	m.stats["lost"] += len(lost)
}

// restart restarts Redis without persistence: every key is gone; the
// accounts are opened and the SKUs created again.
func (m *bookModel) restart() {
	if err := m.env.pair.Primary.Kill(); err != nil {
		m.fatalf("kill: %v", err)
	}
	// A server that was a replica keeps the snapshot of its last sync:
	// without it, the restart starts empty.
	if err := os.Remove(filepath.Join(m.env.pair.Primary.Dir(), "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.fatalf("%v", err)
	}
	if err := m.env.pair.Primary.Restart(m.ctx); err != nil {
		m.fatalf("restart: %v", err)
	}
	m.reconnect()
	for _, op := range m.ops {
		op.status = ""
	}
	for _, k := range append(append([]string{}, m.accounts...), m.skus...) {
		m.touched[k] = true
	}
	m.setUp()
	m.stats["restarts"]++
}

func (m *bookModel) poison() {
	if rapid.Bool().Draw(m.rt, "poison wallet") {
		a := rapid.SampledFrom(m.accounts).Draw(m.rt, "poisoned account")
		m.rdb.XAdd(m.ctx, &redis.XAddArgs{Stream: m.keyOf("journal", a),
			Values: []any{"tx", m.nextID("bad"), "kind", "gift", "delta", "100", "hdelta", "0", "posted", "999", "held", "0"}})
		m.poisoned[a] = true
		return
	}
	s := rapid.SampledFrom(m.skus).Draw(m.rt, "poisoned sku")
	other := m.skus[0]
	if other == s {
		other = m.skus[1]
	}
	values := rapid.SampledFrom([][]any{
		{"op", m.nextID("bad"), "kind", "teleport", "sku", s, "d_avail", "5", "avail", "999"},
		{"op", m.nextID("bad"), "kind", "deduct", "sku", other, "d_avail", "-1", "d_sold", "1", "avail", "9", "sold", "1"},
	}).Draw(m.rt, "poison")
	m.rdb.XAdd(m.ctx, &redis.XAddArgs{Stream: m.keyOf("journal", s), Values: values})
	m.poisoned[s] = true
}

func (m *bookModel) keyOf(kind, name string) string {
	module := "wallet:v2"
	if slices.Contains(m.skus, name) {
		module = "stock:v1"
	}
	return fmt.Sprintf("%s:%s:{%s}:%s:%s", m.prefix, module, strings.SplitN(name, "/", 2)[0], kind, name)
}

func (m *bookModel) killPostgres() {
	m.env.pg.Kill()
	m.env.pgDown = true
	for range rapid.IntRange(0, 2).Draw(m.rt, "ops while PostgreSQL is down") {
		m.send(m.newOp())
	}
	if err := m.env.heal(m.ctx); err != nil {
		m.fatalf("%v", err)
	}
	m.stats["pg kills"]++
}

func (m *bookModel) step() {
	switch rapid.SampledFrom([]string{"op", "op", "op", "op", "op", "op", "retry", "retry", "reconcile", "reconcile",
		"repair wallet", "repair wallet", "repair stock", "repair stock", "checkpoint", "sink", "loss", "loss", "poison",
		"restart", "postgres"}).Draw(m.rt, "step") {
	case "op":
		m.send(m.newOp())
	case "retry":
		if len(m.ops) > 0 {
			m.send(rapid.SampledFrom(m.ops).Draw(m.rt, "retried op"))
		}
	case "reconcile":
		m.reconcile("mid-run")
	case "repair wallet":
		m.repairWallet()
	case "repair stock":
		m.repairStock()
	case "checkpoint":
		m.checkpoint()
	case "sink":
		if m.running {
			m.stopAllSinks()
			m.stats["sinks killed"]++
		} else {
			m.startSinks()
		}
	case "loss":
		m.lose()
	case "poison":
		m.poison()
	case "restart":
		if rapid.IntRange(0, 2).Draw(m.rt, "really restart") == 0 {
			m.restart()
		}
	case "postgres":
		if rapid.IntRange(0, 2).Draw(m.rt, "really kill") == 0 {
			m.killPostgres()
		}
	}
}

// quiesce lets the sinks catch up and checks the book's claims.
func (m *bookModel) quiesce() {
	m.waitCaughtUp("at the end")
	m.stopAllSinks()
	m.checkRedis("at the end")
	ds := m.reconcile("at the end")
	for k, d := range ds {
		if len(d.BookOnly)+len(d.JournalOnly)+len(d.Anomalies) == 0 {
			m.fatalf("BUG: %s is in drift (Redis %v, book %v) with no entry behind it", k, d.Redis, d.Book)
		}
		m.stats["drift reported"]++
	}
	// Every entry of Redis's journals is booked or recorded.
	for _, a := range m.accounts {
		m.everyEntryAccountedFor("wallet", "account", a, m.walletIDs(a))
	}
	for _, s := range m.skus {
		m.everyEntryAccountedFor("stock", "sku", s, m.stockIDs(s))
	}
	// Every projection is the sum of its entries.
	for _, q := range []string{
		`SELECT count(*) FROM $S.stock_levels l LEFT JOIN (SELECT sku, bucket, sum(d_available) a, sum(d_reserved) r, sum(d_sold) s,
			sum(d_refunded) f, sum(d_supply) u, count(*) n FROM $S.stock_entries GROUP BY sku, bucket) e USING (sku, bucket)
			WHERE (coalesce(e.a,0), coalesce(e.r,0), coalesce(e.s,0), coalesce(e.f,0), coalesce(e.u,0), coalesce(e.n,0)) <>
			(l.available, l.reserved, l.sold, l.refunded, l.supply, l.entries)`,
		`SELECT count(*) FROM $S.wallet_balances b LEFT JOIN (SELECT account, sum(d_posted) p, sum(d_held) h, count(*) n
			FROM $S.wallet_entries GROUP BY account) e USING (account)
			WHERE (coalesce(e.p,0), coalesce(e.h,0), coalesce(e.n,0)) <> (b.posted, b.held, b.entries)`,
	} {
		var n int64
		if err := m.env.pool.QueryRow(m.ctx, strings.ReplaceAll(q, "$S.", m.schema+".")).Scan(&n); err != nil || n != 0 {
			m.fatalf("BUG: %d projections differ from the sum of their entries (%v)", n, err)
		}
	}
}

func (m *bookModel) everyEntryAccountedFor(module, col, key string, ids []string) {
	rows, err := m.env.pool.Query(m.ctx, fmt.Sprintf(`SELECT stream_id FROM %[1]s.%[2]s_entries WHERE %[3]s = $1
		UNION SELECT stream_id FROM %[1]s.anomalies WHERE module = '%[2]s' AND key = $1`, m.schema, module, col), key)
	if err != nil {
		m.fatalf("%v", err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			m.fatalf("%v", err)
		}
		seen[id] = true
	}
	rows.Close()
	for _, id := range ids {
		if !seen[id] {
			m.fatalf("BUG: entry %s of %s's journal is neither booked nor recorded", id, key)
		}
	}
}

func runBookModel(t *testing.T, checks, steps int) {
	env := &modelEnv{t: t, pg: pgtest.New(t), pair: redistest.NewPair(t, redistest.Options{})}
	var err error
	if env.pool, err = pgxpool.New(t.Context(), env.pg.URL()); err != nil {
		t.Fatal(err)
	}
	defer env.pool.Close()
	redistest.SetRapidChecks(t, checks)
	total := map[string]int{}
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		m := &bookModel{rt: rt, env: env, ctx: t.Context(), prefix: fmt.Sprintf("bm%d", run),
			schema: fmt.Sprintf("model_%d", run), accounts: modelAccounts, skus: modelSKUs,
			posted: map[string]int64{}, levels: map[string][2]int64{}, byID: map[string]*mOp{},
			touched: map[string]bool{}, poisoned: map[string]bool{}, stats: total}
		if err := env.heal(t.Context()); err != nil {
			rt.Fatalf("heal: %v", err)
		}
		m.sendOnce = rapid.Bool().Draw(rt, "send once")
		if m.book, err = pgjournal.Open(m.ctx, env.pool, pgjournal.WithSchema(m.schema), pgjournal.WithMaxBackoff(50*time.Millisecond)); err != nil {
			rt.Fatalf("open: %v", err)
		}
		m.connect()
		defer func() { m.stopAllSinks(); m.disconnect() }()
		m.setUp()
		// Funds, so debits and transfers have something to move.
		for _, a := range m.accounts {
			op := &mOp{id: m.nextID("fund"), kind: "credit"}
			op.tx = wallet.Tx{ID: op.id, Account: a, Amount: 100}
			m.ops, m.byID[op.id] = append(m.ops, op), op
			m.send(op)
		}
		if rapid.Bool().Draw(rt, "sinks from the start") {
			m.startSinks()
		}
		n := rapid.IntRange(steps/2, steps).Draw(rt, "steps")
		for i := range n {
			m.step()
			m.checkRedis(fmt.Sprintf("after step %d", i))
		}
		m.quiesce()
	})
	var names []string
	for k := range total {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, total[k])
	}
	t.Logf("book model: %d runs;%s", run, b.String())
}

func TestModel_book(t *testing.T) {
	runBookModel(t, 4, 30)
}

// TestChaos_Model_book is the long run of the model-based test.
func TestChaos_Model_book(t *testing.T) {
	runBookModel(t, 40*redistest.Chaos(t), 80)
}
