package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
)

// With DATABASE_URL set, the load test books every account's journal in a
// real PostgreSQL and ends with the book's balances beside Redis's and the
// reconciler's verdict; the totals printed for the book are the database's.
func TestRun_bookOfRecord(t *testing.T) {
	pg := pgtest.New(t)
	var total int64 // the sums of balances the runs printed, for the accounts the book holds
	args := []string{"-accounts", "12", "-groups", "3", "-workers", "4", "-duration", "1s"}
	exampletest.RunWithBook(t, pg.URL(), run, args, func(t *testing.T, report string) {
		m := regexp.MustCompile(`(?m)^sum of balances +(-?\d+) `).FindStringSubmatch(report)
		if m == nil {
			t.Fatalf("no sum of balances in the report:\n%s", report)
		}
		sum, _ := strconv.ParseInt(m[1], 10, 64)
		total += sum
		var posted, entries int64
		if err := pg.Pool(t).QueryRow(t.Context(), "SELECT coalesce(sum(posted), 0)::bigint, count(*) FROM wallet_book.wallet_balances").Scan(&posted, &entries); err != nil {
			t.Fatal(err)
		}
		if entries == 0 {
			t.Fatal("the book holds no account")
		}
		row := regexp.MustCompile(`(?m)^  posted +Redis (-?\d+) +book (-?\d+)$`).FindStringSubmatch(report)
		if row == nil || row[1] != m[1] || row[2] != m[1] {
			t.Errorf("posted row %q, want Redis and book both %s (the sum of balances)\n%s", row, m[1], report)
		}
		if posted != total {
			t.Errorf("the book's balances sum to %d, the runs printed %d", posted, total)
		}
		if !strings.Contains(report, "OK\n") {
			t.Errorf("the load test's checks failed:\n%s", report)
		}
	})
}
