package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/redkit-go/redkit/examples/kit/book"
	"github.com/redkit-go/redkit/stock"
)

// saleReport is what a sale did, from the buyers' own records and from
// Redis. Problems lists every check that failed.
type saleReport struct {
	Config saleConfig
	SKU    string
	Buyers int // buyers who shopped; fewer than Config.Buyers when the sale was stopped

	Orders      int64 // orders placed (the first call of each; re-sends are Replays)
	Deducted    int64 // orders sold by Deduct
	Reserved    int64 // orders held by Reserve
	Confirmed   int64 // holds confirmed in time
	Abandoned   int64 // holds the buyer walked away from
	LateConfirm int64 // holds confirmed after their deadline (refused: ErrHoldExpired)
	SoldOut     int64 // orders refused with ErrSoldOut
	OverLimit   int64 // orders refused with ErrBuyerLimit
	Unknown     int64 // orders whose outcome stayed unknown
	Told        int64 // units buyers were told they bought

	Replays          int64 // orders sent a second time
	ReplayMismatches int64 // second answers that differed from the first or were not marked replayed
	Retried          int64 // calls that failed without an answer and were sent again
	FirstRetried     error

	Levels          stock.Levels // at the end
	Oversold        int64
	LimitViolations int   // buyers whose successful orders add up to more than the limit
	Expired         int   // holds the journal shows expired and reclaimed
	ExpiredExpected int   // abandoned and late-confirmed holds
	ExpiredUnits    int64 // units the expired holds gave back to available
	Journal         int   // journal entries the consumer received
	Elapsed         time.Duration
	P50, P99        time.Duration
	DeductP99       time.Duration // of Deduct calls alone, first sends and re-sends
	Audit           stock.AuditReport
	Book            *book.Verdict // with DATABASE_URL set: the book beside Redis
	Problems        []string
}

// OrdersPerSec is the rate at which orders were decided.
func (r *saleReport) OrdersPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Orders) / r.Elapsed.Seconds()
}

// add sums the workers' tallies into r.
func (r *saleReport) add(tallies []tally, expired map[string]bool) {
	var lat, deducts []time.Duration
	expect := map[string]bool{}
	for _, t := range tallies {
		r.Orders += t.orders
		r.Deducted += t.deducted
		r.Reserved += t.reserved
		r.Confirmed += t.confirmed
		r.Abandoned += t.abandoned
		r.LateConfirm += t.late
		r.SoldOut += t.soldOut
		r.OverLimit += t.overLimit
		r.Unknown += t.unknown
		r.Told += t.told
		r.Replays += t.replays
		r.ReplayMismatches += t.mismatches
		r.LimitViolations += t.violations
		r.Retried += t.retried
		if r.FirstRetried == nil {
			r.FirstRetried = t.firstRetried
		}
		lat = append(lat, t.latencies...)
		deducts = append(deducts, t.deducts...)
		for _, id := range t.expectExpired {
			expect[id] = true
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)*50/100], lat[len(lat)*99/100]
	}
	slices.Sort(deducts)
	if len(deducts) > 0 {
		r.DeductP99 = deducts[len(deducts)*99/100]
	}
	r.ExpiredExpected = len(expect)
	for id := range expired {
		if expect[id] {
			r.Expired++
		} else {
			r.problemf("order %s expired in the journal, but its buyer confirmed it in time", id)
		}
	}
}

// check compares the buyers' records with the levels in Redis and the audit.
func (r *saleReport) check() {
	lv, supply := r.Levels, r.Audit.Supply
	fromTold := max(0, r.Told-supply)
	fromLevels := max(0, lv.Sold-lv.Refunded-supply, -lv.Available, -lv.Reserved)
	r.Oversold = max(fromTold, fromLevels)
	if r.Oversold > 0 {
		r.problemf("oversold by %d units", r.Oversold)
	}
	if r.Unknown == 0 && r.Told != lv.Sold-lv.Refunded {
		r.problemf("buyers were told %d units, Redis says %d sold", r.Told, lv.Sold-lv.Refunded)
	}
	if r.Unknown > 0 {
		r.problemf("%d orders with unknown outcome", r.Unknown)
	}
	if r.LimitViolations > 0 {
		r.problemf("%d buyers over the limit of %d", r.LimitViolations, r.Config.Limit)
	}
	if r.ReplayMismatches > 0 {
		r.problemf("%d re-sent orders answered differently", r.ReplayMismatches)
	}
	if lv.Reserved != 0 {
		r.problemf("%d units still reserved after every hold ran out", lv.Reserved)
	}
	if r.Expired != r.ExpiredExpected {
		r.problemf("%d holds were abandoned or confirmed late, the journal shows %d of them expired", r.ExpiredExpected, r.Expired)
	}
	if got := lv.Available + lv.Reserved + lv.Sold - lv.Refunded; got != r.Config.Stock {
		r.problemf("available + reserved + sold - refunded = %d, not the %d units of the sale", got, r.Config.Stock)
	}
	if r.Journal != r.Audit.Entries {
		r.problemf("the journal consumer received %d entries, the audit replayed %d", r.Journal, r.Audit.Entries)
	}
	for _, p := range r.Audit.Problems {
		r.problemf("audit: %s", p)
	}
	if r.Book != nil && !r.Book.OK() {
		r.problemf("the reconciler found Redis and the book of record apart")
	}
}

func (r *saleReport) problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// print writes the closing report.
func (r *saleReport) print(w io.Writer) {
	lv, a := r.Levels, r.Audit
	row := func(name string, n any, format string, args ...any) {
		line := fmt.Sprintf("  %-18s %8v   %s", name, n, fmt.Sprintf(format, args...))
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w)
	if r.Buyers < r.Config.Buyers {
		fmt.Fprintf(w, "  stopped early: %d of %d buyers shopped\n", r.Buyers, r.Config.Buyers)
	}
	row("units", r.Config.Stock, "")
	row("sold", lv.Sold, "buyers were told %d", r.Told)
	row("available", lv.Available, "")
	row("reserved", lv.Reserved, "")
	row("oversold", r.Oversold, "from what buyers were told and from the levels")
	if r.Config.Limit > 0 {
		row("limit violations", r.LimitViolations, "buyers with more than %d units, summed from their own records", r.Config.Limit)
	} else {
		row("limit violations", r.LimitViolations, "no limit per buyer")
	}
	row("orders", r.Orders, "%d deducted, %d reserved, %d refused, %d unknown",
		r.Deducted, r.Reserved, r.SoldOut+r.OverLimit, r.Unknown)
	row("  reserved", r.Reserved, "%d confirmed, %d abandoned, %d confirmed too late", r.Confirmed, r.Abandoned, r.LateConfirm)
	row("  refused", r.SoldOut+r.OverLimit, "%d sold out, %d over the limit", r.SoldOut, r.OverLimit)
	row("holds reclaimed", r.Expired, "of %d abandoned or confirmed too late (expire entries in the journal); their %d units went back to available, which is why units can be left when every buyer was refused",
		r.ExpiredExpected, r.ExpiredUnits)
	row("replays", r.Replays, "re-sent orders; %d answered differently from the first time", r.ReplayMismatches)
	if r.Retried > 0 {
		row("retried", r.Retried, "calls failed without an answer and were sent again with the same ID; the first: %v", r.FirstRetried)
	} else {
		row("retried", r.Retried, "calls that failed without an answer")
	}
	row("orders/s", fmt.Sprintf("%.0f", r.OrdersPerSec()), "%d orders in %.1fs", r.Orders, r.Elapsed.Seconds())
	row("latency p50", r.P50.Round(10*time.Microsecond), "p99 %v; Deduct alone p99 %v (what redkit.stock.operation.duration shows)",
		r.P99.Round(10*time.Microsecond), r.DeductP99.Round(time.Microsecond))
	row("journal", r.Journal, "entries consumed while the sale ran")
	verdict := "OK"
	if !a.OK() {
		verdict = "FAILED"
	}
	row("audit", verdict, "supply %d = available %d + reserved %d + sold %d - refunded %d; %d entries replayed",
		a.Supply, a.Levels.Available, a.Levels.Reserved, a.Levels.Sold, a.Levels.Refunded, a.Entries)
	if r.Book != nil {
		fmt.Fprintln(w)
		r.Book.Print(w)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  PROBLEM:", p)
	}
}

func limitText(limit int64) string {
	if limit == 0 {
		return "no limit per buyer"
	}
	return fmt.Sprintf("limit %d per buyer", limit)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
