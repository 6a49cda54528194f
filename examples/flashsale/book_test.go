package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/pgjournal/pgtest"
)

// With DATABASE_URL set, a simulated sale books its journal in a real
// PostgreSQL and ends with the book's levels beside Redis's and the
// reconciler's verdict; the levels come from the database, not from Redis.
func TestRun_bookOfRecord(t *testing.T) {
	pg := pgtest.New(t)
	args := []string{"-stock", "60", "-buyers", "300", "-concurrency", "8", "-buckets", "2",
		"-abandon", "0.3", "-reserve", "0.2", "-resend", "0.3"}
	exampletest.RunWithBook(t, pg.URL(), run, args, func(t *testing.T, report string) {
		sku := regexp.MustCompile(`flash sale of (\S+):`).FindStringSubmatch(report)[1]
		pool := pg.Pool(t)
		var sold, entries int64
		if err := pool.QueryRow(t.Context(), "SELECT sold, entries FROM flashsale_book.stock_sku_levels WHERE sku = $1", sku).Scan(&sold, &entries); err != nil {
			t.Fatal(err)
		}
		for row, want := range map[string]string{"sold": regexp.QuoteMeta(reportNumber(t, report, "sold")) + ` +book ` + itoa(sold)} {
			if !regexp.MustCompile(`(?m)^  ` + row + ` +Redis ` + want + `$`).MatchString(report) {
				t.Errorf("no %q row with Redis and the book's %d in the report:\n%s", row, sold, report)
			}
		}
		if want := "book of record (PostgreSQL): " + itoa(entries) + " entries booked"; !strings.Contains(report, want) || entries == 0 {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
		if audit := reportNumber(t, report, "audit"); audit != "OK" {
			t.Errorf("audit %s", audit)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
