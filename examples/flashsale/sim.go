package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/stock"
)

// saleConfig describes a simulated sale.
type saleConfig struct {
	Stock       int64         // units of the hot SKU
	Buyers      int           // buyers who come
	Concurrency int           // buyers shopping at once
	Limit       int64         // units per buyer, 0 for none
	Buckets     int           // stock.WithBuckets
	Duration    time.Duration // stop admitting buyers after this long; 0: never
	Hold        time.Duration // reservation TTL
	Abandon     float64       // fraction of orders reserved and abandoned
	Reserve     float64       // fraction of orders reserved and confirmed
	Resend      float64       // fraction of orders sent twice

	// book, when DATABASE_URL is set, books the SKU's journal in
	// PostgreSQL while the sale runs and reconciles it at the end.
	book *book.Book
}

// defaultSale runs for a few seconds on the embedded Redis of a small
// machine: the stock sells out early, abandoned holds come back a second
// later and are sold again, and most late buyers hear "sold out".
func defaultSale() saleConfig {
	return saleConfig{Stock: 1000, Buyers: 5000, Concurrency: 64, Limit: 2, Buckets: 1,
		Hold: time.Second, Abandon: 0.05, Reserve: 0.15, Resend: 0.1}
}

func (c saleConfig) check() error {
	frac := func(f float64) bool { return f >= 0 && f <= 1 }
	switch {
	case c.Stock < 1:
		return errors.New("-stock must be at least 1")
	case c.Buyers < 1 || c.Concurrency < 1:
		return errors.New("-buyers and -concurrency must be at least 1")
	case c.Limit < 0:
		return errors.New("-limit must not be negative")
	case c.Buckets < 1 || c.Buckets > stock.MaxBuckets:
		return fmt.Errorf("-buckets must be 1..%d", stock.MaxBuckets)
	case c.Duration < 0:
		return errors.New("-duration must not be negative")
	case c.Hold < time.Second:
		return errors.New("-hold must be at least 1s")
	case !frac(c.Abandon) || !frac(c.Reserve) || !frac(c.Resend) || c.Abandon+c.Reserve > 1:
		return errors.New("-abandon, -reserve and -resend are fractions 0..1; -abandon + -reserve at most 1")
	}
	return nil
}

// sale is one running simulation.
type sale struct {
	cfg saleConfig
	inv *stock.Inventory
	ids idgen.Generator
	sku string

	// Read by the progress line while the sale runs.
	orders, refused atomic.Int64
}

// tally is what one worker's buyers did; tallies are added up at the end.
type tally struct {
	orders, deducted, reserved, confirmed, abandoned, late int64
	soldOut, overLimit, unknown, told, replays, mismatches int64
	retried                                                int64
	firstRetried                                           error
	violations                                             int
	latencies                                              []time.Duration
	deducts                                                []time.Duration // of Deduct calls alone
	expectExpired                                          []string        // order IDs whose hold must expire
}

// simulate runs a sale on a new SKU and checks the outcome. Progress goes to
// out while it runs. A signal (ctx) stops admitting buyers; orders in flight
// finish, and the report is still made.
func simulate(ctx context.Context, rdb redis.UniversalClient, inv *stock.Inventory, cfg saleConfig, out io.Writer) (*saleReport, error) {
	// Work that must finish even after a signal: orders in flight, the
	// final reads. Redis calls are bounded by the client's timeouts.
	bg := context.WithoutCancel(ctx)

	// A run number makes the SKU new on every run against the same Redis.
	runs, err := idgen.NewSequence(rdb, "flashsale-runs", idgen.WithKeyPrefix(keyPrefix))
	if err != nil {
		return nil, err
	}
	run, err := runs.Next(bg)
	if err != nil {
		return nil, fmt.Errorf("run number: %w", err)
	}
	sku := fmt.Sprintf("sale-%d-hot", run)
	// The book outlives an embedded Redis, whose run numbers start again
	// at 1: skip names the book already holds.
	for cfg.book != nil {
		known, err := cfg.book.HasSKU(bg, sku)
		if err != nil {
			return nil, err
		}
		if !known {
			break
		}
		if run, err = runs.Next(bg); err != nil {
			return nil, fmt.Errorf("run number: %w", err)
		}
		sku = fmt.Sprintf("sale-%d-hot", run)
	}
	// Order numbers come from memory, a range of a Redis counter at a time.
	ids, err := idgen.NewSegment(rdb, "flashsale-orders", idgen.WithKeyPrefix(keyPrefix))
	if err != nil {
		return nil, err
	}
	defer ids.Close()

	opts := []stock.SKUOption{stock.WithBuyerLimit(cfg.Limit), stock.WithBuckets(cfg.Buckets)}
	if err := inv.Create(bg, sku, cfg.Stock, opts...); err != nil {
		return nil, err
	}
	s := &sale{cfg: cfg, inv: inv, ids: ids, sku: sku}
	fmt.Fprintf(out, "flash sale of %s: %d units, %d buyers (%d at a time), %s, %s, holds of %s\n",
		sku, cfg.Stock, cfg.Buyers, cfg.Concurrency, limitText(cfg.Limit), plural(cfg.Buckets, "bucket"), cfg.Hold)

	jr := startJournal(bg, inv, sku)
	defer jr.stop()
	if cfg.book != nil {
		cfg.book.SinkStock(bg, inv, sku)
	}

	start := time.Now()
	stopProgress := s.progress(bg, out, start)
	tallies, shopped, err := s.admit(ctx, bg)
	elapsed := time.Since(start)
	if err == nil {
		err = s.settle(bg)
	}
	stopProgress()
	if err != nil {
		return nil, err
	}

	rep := &saleReport{Config: cfg, SKU: sku, Buyers: shopped, Elapsed: elapsed}
	if rep.Audit, err = inv.Audit(bg, sku); err != nil {
		return nil, err
	}
	if rep.Levels, err = inv.Level(bg, sku); err != nil {
		return nil, err
	}
	expired, entries, err := jr.wait(bg, rep.Audit.Entries)
	if err != nil {
		return nil, err
	}
	rep.Journal = entries
	rep.add(tallies, expired)
	jr.mu.Lock()
	rep.ExpiredUnits = jr.expiredUnits
	jr.mu.Unlock()
	if cfg.book != nil {
		if rep.Book, err = cfg.book.FinishStock(bg, inv, sku, rep.Audit.Entries); err != nil {
			return nil, err
		}
	}
	rep.check()
	return rep, nil
}

// admit lets buyers in, cfg.Concurrency at a time, until all have shopped
// or ctx ends or cfg.Duration has passed. Orders use bg, so a buyer who is
// in the middle of one finishes it.
func (s *sale) admit(ctx, bg context.Context) ([]tally, int, error) {
	open, cancel := context.WithCancel(ctx)
	if s.cfg.Duration > 0 {
		open, cancel = context.WithTimeout(ctx, s.cfg.Duration)
	}
	defer cancel()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		failed  error
	)
	tallies := make([]tally, s.cfg.Concurrency)
	for w := range tallies {
		wg.Go(func() {
			for open.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(s.cfg.Buyers) {
					return
				}
				if err := s.shop(bg, fmt.Sprintf("buyer-%d", i), &tallies[w]); err != nil {
					errOnce.Do(func() { failed = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	return tallies, int(min(next.Load(), int64(s.cfg.Buyers))), failed
}

// shop is one buyer: one to three orders of one or two units, each deducted,
// reserved and confirmed, or reserved and abandoned. A buyer who is refused
// goes home. The error is for failures that end the sale (Redis is gone).
func (s *sale) shop(ctx context.Context, buyer string, t *tally) error {
	var bought int64 // from this buyer's own records
	defer func() {
		if s.cfg.Limit > 0 && bought > s.cfg.Limit {
			t.violations++
		}
	}()
	for range 1 + weighted(60, 30, 10) {
		id, err := s.ids.Next(ctx)
		if err != nil {
			return err
		}
		qty := int64(1 + weighted(75, 25))
		o := stock.Order{ID: id.String(), Buyer: buyer, Items: []stock.Item{{SKU: s.sku, Qty: qty}}}
		p := rand.Float64()
		held, abandon := p < s.cfg.Abandon+s.cfg.Reserve, p < s.cfg.Abandon
		place := func() (stock.Result, error) { return s.inv.Deduct(ctx, o) }
		if held {
			place = func() (stock.Result, error) { return s.inv.Reserve(ctx, o, s.cfg.Hold) }
		}

		res, err := t.call(place)
		t.noteDeduct(held)
		t.orders++
		s.orders.Add(1)
		if rand.Float64() < s.cfg.Resend && (err == nil || decided(err)) {
			// The same order again, as a client sends it when the first
			// reply was lost: the first answer comes back, nothing changes.
			again, err2 := t.call(place)
			t.noteDeduct(held)
			t.replays++
			if !again.Replayed || outcome(err) != outcome(err2) || !sameResult(res, again) {
				t.mismatches++
			}
		}
		switch {
		case errors.Is(err, stock.ErrSoldOut):
			t.soldOut++
			s.refused.Add(1)
			return nil
		case errors.Is(err, stock.ErrBuyerLimit):
			t.overLimit++
			s.refused.Add(1)
			return nil
		case errors.Is(err, stock.ErrUnknownOutcome):
			t.unknown++
			return nil
		case err != nil:
			return err
		case !held:
			t.deducted++
			t.told += qty
			bought += qty
			continue
		}

		t.reserved++
		if abandon {
			t.abandoned++
			t.expectExpired = append(t.expectExpired, o.ID)
			continue
		}
		time.Sleep(rand.N(20 * time.Millisecond)) // paying
		_, err = t.call(func() (stock.Result, error) { return s.inv.Confirm(ctx, o) })
		switch {
		case errors.Is(err, stock.ErrHoldExpired):
			t.late++
			t.expectExpired = append(t.expectExpired, o.ID)
		case errors.Is(err, stock.ErrUnknownOutcome):
			t.unknown++
		case err != nil:
			return err
		default:
			t.confirmed++
			t.told += qty
			bought += qty
		}
	}
	return nil
}

// call runs one operation, timing it. An error that is not a decision (a
// lost reply, a failed connection) is handled the way a client should: by
// sending the same operation, with the same order ID, again.
func (t *tally) call(op func() (stock.Result, error)) (stock.Result, error) {
	start := time.Now()
	res, err := op()
	for i := 0; i < 3 && err != nil && !decided(err); i++ {
		t.retried++
		if t.firstRetried == nil {
			t.firstRetried = err
		}
		time.Sleep(time.Duration(i+1) * 10 * time.Millisecond)
		res, err = op()
	}
	t.latencies = append(t.latencies, time.Since(start))
	return res, err
}

// noteDeduct files the latency of the call just made under Deduct's own
// when it was one (held is false), so the report can set Deduct's p99
// beside what telemetry says of it.
func (t *tally) noteDeduct(held bool) {
	if !held {
		t.deducts = append(t.deducts, t.latencies[len(t.latencies)-1])
	}
}

// decided reports whether err is an answer to the operation (a refusal, a
// conflict, bad input: what the service answers with a 4xx) rather than a
// failure to get one.
func decided(err error) bool {
	var se *httpx.StatusError
	return errors.As(statusError(err), &se) && se.Status < http.StatusInternalServerError
}

// settle waits until every hold has ended: abandoned ones run out on the
// server's clock and the reclaimer returns their units.
func (s *sale) settle(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.Hold + 10*time.Second)
	for {
		lv, err := s.inv.Level(ctx, s.sku)
		if err != nil {
			return err
		}
		if lv.Reserved == 0 || time.Now().After(deadline) {
			return nil // a hold left over is reported by check
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// progress prints a status line until the returned function is called: one
// line rewritten in place on a terminal, a line a second otherwise.
func (s *sale) progress(ctx context.Context, out io.Writer, start time.Time) (stop func()) {
	tty, every := isTerminal(out), time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	line := func() string {
		lv, err := s.inv.Level(ctx, s.sku)
		if err != nil {
			return fmt.Sprintf("%5.1fs  levels: %v", time.Since(start).Seconds(), err)
		}
		return fmt.Sprintf("%5.1fs  orders %d  sold %d  held %d  available %d  refused %d",
			time.Since(start).Seconds(), s.orders.Load(), lv.Sold, lv.Reserved, lv.Available, s.refused.Load())
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintf(out, "\r%s\x1b[K\n", line())
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(out, "\r%s\x1b[K", line())
				} else {
					fmt.Fprintln(out, line())
				}
			}
		}
	}()
	return func() { close(done); <-exited }
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// journalReader consumes the SKU's journal (every bucket) while the sale
// runs, as a service would to copy it into its database, and notes which
// holds expired.
type journalReader struct {
	mu      sync.Mutex
	seen    map[string]bool // bucket/entry ID: delivery is at least once
	expired map[string]bool // order IDs
	// expiredUnits is how many units the expired holds gave back to
	// available (the Available delta of their expire entries).
	expiredUnits int64

	cancel context.CancelFunc
	done   chan struct{} // closed when Consume has returned err
	err    error
}

func startJournal(ctx context.Context, inv *stock.Inventory, sku string) *journalReader {
	ctx, cancel := context.WithCancel(ctx)
	j := &journalReader{seen: map[string]bool{}, expired: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	c := stock.Consumer{Group: "flashsale-report", Name: "sim", SKUs: []string{sku}, Poll: 50 * time.Millisecond}
	go func() {
		defer close(j.done)
		j.err = inv.Consume(ctx, c, func(_ context.Context, entries []stock.Entry) error {
			j.mu.Lock()
			defer j.mu.Unlock()
			for _, e := range entries {
				j.seen[fmt.Sprint(e.Bucket, "/", e.ID)] = true
				if e.Kind == stock.KindExpire {
					j.expired[e.Op] = true
					j.expiredUnits += e.Delta.Available
				}
			}
			return nil
		})
	}()
	return j
}

// wait returns what the consumer saw once it has received want entries
// (or after a few seconds), and stops it.
func (j *journalReader) wait(ctx context.Context, want int) (expired map[string]bool, entries int, err error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.mu.Lock()
		n := len(j.seen)
		j.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		select {
		case <-j.done: // it failed
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	if err := j.stop(); err != nil {
		return nil, 0, err
	}
	return j.expired, len(j.seen), nil
}

// stop stops the consumer and returns its error, if it failed. It may be
// called more than once.
func (j *journalReader) stop() error {
	j.cancel()
	<-j.done
	if errors.Is(j.err, context.Canceled) {
		return nil
	}
	return j.err
}

// outcome names the answer an error carries, for comparing two answers:
// "ok", a refusal's code, or "error".
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var se *httpx.StatusError
	if errors.As(statusError(err), &se) && se.Status == http.StatusUnprocessableEntity {
		return se.Code
	}
	return "error"
}

func sameResult(a, b stock.Result) bool {
	return a.Deadline.Equal(b.Deadline) && maps.Equal(a.Levels, b.Levels)
}

// weighted returns i with probability w[i]/sum(w).
func weighted(w ...int) int {
	sum := 0
	for _, x := range w {
		sum += x
	}
	n := rand.IntN(sum)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}
