package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

const (
	alice = "shop-7/alice" // alice and bob share a slot group
	bob   = "shop-7/bob"
	carol = "shop-8/carol" // another group: transfers to carol take the two-phase path
)

func acct(id string) string { return "/accounts/" + url.PathEscape(id) }

func TestAPI_accounts(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, _ := startAPI(t, rdb)
		r := c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","overdraft":500}`).want(t, 201, "")
		if got := decode[balance](t, r); got != (balance{Account: alice, Currency: "EUR", Overdraft: 500, Available: 0}) {
			t.Fatalf("opened: %+v", got)
		}
		if loc := r.header.Get("Location"); loc != "/accounts/shop-7%2Falice" {
			t.Fatalf("Location %q", loc)
		}
		c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","overdraft":500}`).want(t, 201, "")
		r = c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"USD","overdraft":500}`).want(t, 409, "conflict")
		if r.problem.Field != "currency" {
			t.Fatalf("conflict names %q, want currency", r.problem.Field)
		}
		c.do("POST", "/accounts", "", `{"id":"bad id","currency":"EUR"}`).want(t, 400, "invalid")
		c.do("POST", "/accounts", "", `{"id":"shop-7/dave"}`).want(t, 400, "invalid") // no currency
		c.do("POST", "/accounts", "", `{"id":"shop-7/dave","currency":"EUR"`).want(t, 400, "malformed")
		c.do("POST", "/accounts", "", `{"id":"shop-7/dave","currency":"EUR","colour":"red"}`).want(t, 400, "malformed")
		c.do("POST", "/accounts", "", ``).want(t, 400, "malformed")

		if got := decode[balance](t, c.do("GET", acct(alice), "", "").want(t, 200, "")); got.Account != alice || got.Currency != "EUR" {
			t.Fatalf("balance: %+v", got)
		}
		c.do("GET", acct("shop-7/nobody"), "", "").want(t, 404, "account_not_found")
		c.do("GET", acct("{bad}"), "", "").want(t, 400, "invalid")
	})
}

func TestAPI_postings(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		for _, id := range []string{alice, bob} {
			c.do("POST", "/accounts", "", `{"id":"`+id+`","currency":"EUR"}`).want(t, 201, "")
		}
		credit := acct(alice) + "/credits"

		first := c.do("POST", credit, "topup-1", `{"amount":5000,"memo":"top-up"}`).want(t, 201, "")
		if first.replayed {
			t.Fatal("first credit marked replayed")
		}
		tx := decode[txResponse](t, first)
		if tx.ID != "topup-1" || tx.Kind != "credit" || tx.Amount != 5000 || tx.Balance.Posted != 5000 || tx.EntryID == "" {
			t.Fatalf("credit: %s", first.body)
		}
		// The same key and body: the first response again, marked replayed.
		again := c.do("POST", credit, "topup-1", `{"amount":5000,"memo":"top-up"}`).want(t, 201, "")
		if !again.replayed || !bytes.Equal(again.body, first.body) {
			t.Fatalf("replay: replayed=%v\n%s\nwant\n%s", again.replayed, again.body, first.body)
		}
		// The key in the body works as well, and must agree with the header.
		c.do("POST", credit, "", `{"id":"topup-1","amount":5000,"memo":"top-up"}`).want(t, 201, "")
		c.do("POST", credit, "topup-1", `{"id":"topup-2","amount":5000}`).want(t, 400, "malformed")
		// The same key with another body: 409 naming the field.
		for body, field := range map[string]string{
			`{"amount":5001,"memo":"top-up"}`:                  "amount",
			`{"amount":5000,"memo":"other"}`:                   "memo",
			`{"amount":5000,"memo":"top-up","currency":"EUR"}`: "currency",
		} {
			r := c.do("POST", credit, "topup-1", body).want(t, 409, "conflict")
			if r.problem.Field != field {
				t.Errorf("%s: conflict names %q, want %q", body, r.problem.Field, field)
			}
		}
		r := c.do("POST", acct(alice)+"/debits", "topup-1", `{"amount":5000,"memo":"top-up"}`).want(t, 409, "conflict")
		if r.problem.Field != "kind" {
			t.Errorf("debit under a credit's key names %q, want kind", r.problem.Field)
		}

		c.do("POST", credit, "", `{"amount":100}`).want(t, 400, "malformed") // no key
		c.do("POST", credit, "c-0", `{"amount":0}`).want(t, 400, "invalid")
		c.do("POST", credit, "c-neg", `{"amount":-5}`).want(t, 400, "invalid")
		c.do("POST", credit, "c-big", `{"amount":9007199254740992}`).want(t, 400, "invalid")
		c.do("POST", credit, "c-str", `{"amount":"100"}`).want(t, 400, "malformed")
		c.do("POST", credit, "bad key!", `{"amount":100}`).want(t, 400, "invalid")
		c.do("POST", credit, "c-usd", `{"amount":100,"currency":"USD"}`).want(t, 422, "currency_mismatch")
		c.do("POST", acct("shop-7/nobody")+"/credits", "c-nobody", `{"amount":100}`).want(t, 404, "account_not_found")

		// A refusal stays refused under its key, even once the money is there.
		debit := acct(bob) + "/debits"
		c.do("POST", debit, "d-1", `{"amount":300}`).want(t, 422, "insufficient_funds")
		c.do("POST", acct(bob)+"/credits", "c-bob", `{"amount":1000}`).want(t, 201, "")
		c.do("POST", debit, "d-1", `{"amount":300}`).want(t, 422, "insufficient_funds")
		r = c.do("POST", debit, "d-2", `{"amount":300}`).want(t, 201, "")
		if got := decode[txResponse](t, r).Balance; got.Posted != 700 || got.Available != 700 {
			t.Fatalf("after debit: %+v", got)
		}

		for _, id := range []string{alice, bob} {
			if err := led.Verify(t.Context(), id); err != nil {
				t.Errorf("verify %s: %v", id, err)
			}
		}
	})
}

func TestAPI_transfers(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		for _, id := range []string{alice, bob, carol} {
			c.do("POST", "/accounts", "", `{"id":"`+id+`","currency":"EUR"}`).want(t, 201, "")
		}
		c.do("POST", "/accounts", "", `{"id":"shop-8/yen","currency":"JPY"}`).want(t, 201, "")
		c.do("POST", acct(alice)+"/credits", "fund", `{"amount":1000}`).want(t, 201, "")

		for _, to := range []string{bob, carol} { // within the group, and across
			body := fmt.Sprintf(`{"from":%q,"to":%q,"amount":300}`, alice, to)
			first := c.do("POST", "/transfers", "pay-"+to, body).want(t, 201, "")
			tx := decode[txResponse](t, first)
			if tx.Kind != "transfer" || tx.To == nil || tx.To.Account != to || tx.To.Posted != 300 || tx.ToEntryID == "" {
				t.Fatalf("transfer to %s: %s", to, first.body)
			}
			again := c.do("POST", "/transfers", "pay-"+to, body).want(t, 201, "")
			if first.replayed || !again.replayed || !bytes.Equal(again.body, first.body) {
				t.Fatalf("replay to %s: %v %v\n%s\nwant\n%s", to, first.replayed, again.replayed, again.body, first.body)
			}
			r := c.do("POST", "/transfers", "pay-"+to, fmt.Sprintf(`{"from":%q,"to":%q,"amount":301}`, alice, to)).want(t, 409, "conflict")
			if r.problem.Field != "amount" {
				t.Fatalf("conflict names %q", r.problem.Field)
			}
		}
		pay := func(key, from, to string, amount int) reply {
			return c.do("POST", "/transfers", key, fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, from, to, amount))
		}
		pay("too-much", alice, bob, 401).want(t, 422, "insufficient_funds")
		pay("too-much-x", alice, carol, 401).want(t, 422, "insufficient_funds")
		pay("self", alice, alice, 1).want(t, 400, "invalid")
		pay("nobody", alice, "shop-7/nobody", 1).want(t, 404, "account_not_found")
		pay("nobody-x", alice, "shop-9/nobody", 1).want(t, 404, "account_not_found")
		pay("yen", alice, "shop-8/yen", 1).want(t, 422, "currency_mismatch")
		c.do("POST", "/transfers", "no-to", fmt.Sprintf(`{"from":%q,"amount":1}`, alice)).want(t, 400, "invalid")

		if got := decode[balance](t, c.do("GET", acct(alice), "", "").want(t, 200, "")); got.Posted != 400 || got.Held != 0 {
			t.Fatalf("alice after transfers: %+v", got)
		}
		trial, err := led.TrialBalance(t.Context(), alice, bob, carol)
		if err != nil || !trial.Balanced() || trial.NetTransfers() != 0 || trial.Posted != 1000 {
			t.Fatalf("trial balance %+v, %v", trial, err)
		}
	})
}

func TestAPI_holds(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).want(t, 201, "")
		c.do("POST", acct(alice)+"/credits", "fund", `{"amount":1000}`).want(t, 201, "")
		holds := acct(alice) + "/holds"

		first := c.do("POST", holds, "h-1", `{"amount":600,"ttl":"10m"}`).want(t, 201, "")
		h := decode[txResponse](t, first)
		if h.Kind != "hold" || h.Expires == nil || !h.Expires.After(h.Time) || h.Balance.Held != 600 || h.Balance.Available != 400 {
			t.Fatalf("hold: %s", first.body)
		}
		again := c.do("POST", holds, "h-1", `{"amount":600,"ttl":"600s"}`).want(t, 201, "")
		if !again.replayed || !bytes.Equal(again.body, first.body) {
			t.Fatalf("hold replay: %v\n%s\nwant\n%s", again.replayed, again.body, first.body)
		}
		if r := c.do("POST", holds, "h-1", `{"amount":600,"ttl":"5m"}`).want(t, 409, "conflict"); r.problem.Field != "ttl" {
			t.Fatalf("conflict names %q", r.problem.Field)
		}
		c.do("POST", holds, "h-2", `{"amount":401,"ttl":"10m"}`).want(t, 422, "insufficient_funds")
		c.do("POST", holds, "h-3", `{"amount":1,"ttl":"soon"}`).want(t, 400, "malformed")
		c.do("POST", holds, "h-3", `{"amount":1,"ttl":"10ms"}`).want(t, 400, "invalid")
		c.do("POST", acct(alice)+"/debits", "d-1", `{"amount":401}`).want(t, 422, "insufficient_funds")

		capture := holds + "/h-1/capture"
		c.do("POST", capture, "", `{"amount":601}`).want(t, 400, "invalid")
		first = c.do("POST", capture, "", `{"amount":250}`).want(t, 200, "")
		if got := decode[txResponse](t, first).Balance; got.Posted != 750 || got.Held != 0 {
			t.Fatalf("after capture: %+v", got)
		}
		again = c.do("POST", capture, "", `{"amount":250}`).want(t, 200, "")
		if !again.replayed || !bytes.Equal(again.body, first.body) {
			t.Fatalf("capture replay: %v\n%s\nwant\n%s", again.replayed, again.body, first.body)
		}
		if r := c.do("POST", capture, "", `{"amount":200}`).want(t, 409, "conflict"); r.problem.Field != "amount" {
			t.Fatalf("conflict names %q", r.problem.Field)
		}
		if r := c.do("POST", holds+"/h-1/void", "", "").want(t, 409, "conflict"); r.problem.Field != "resolution" {
			t.Fatalf("void after capture names %q", r.problem.Field)
		}
		c.do("POST", holds+"/nope/capture", "", `{"amount":1}`).want(t, 404, "hold_not_found")
		c.do("POST", holds+"/nope/void", "", "").want(t, 404, "hold_not_found")

		c.do("POST", holds, "h-4", `{"amount":100,"ttl":"10m"}`).want(t, 201, "")
		c.do("POST", holds+"/h-4/void", "", "").want(t, 200, "")
		if r := c.do("POST", holds+"/h-4/void", "", "").want(t, 200, ""); !r.replayed {
			t.Fatal("second void not marked replayed")
		}

		// A hold left alone expires on the server's clock and is released.
		c.do("POST", holds, "h-5", `{"amount":100,"ttl":"1s"}`).want(t, 201, "")
		for decode[balance](t, c.do("GET", acct(alice), "", "").want(t, 200, "")).Held != 0 {
			time.Sleep(50 * time.Millisecond)
		}
		c.do("POST", holds+"/h-5/capture", "", `{"amount":100}`).want(t, 422, "hold_expired")

		if err := led.Verify(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAPI_entries(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, _ := startAPI(t, rdb)
		c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).want(t, 201, "")
		for i := range 4 {
			c.do("POST", acct(alice)+"/credits", fmt.Sprint("c-", i), `{"amount":10}`).want(t, 201, "")
		}
		var got []entry
		cursor, pages := "", 0
		for {
			s := decode[statement](t, c.do("GET", acct(alice)+"/entries?limit=2&cursor="+url.QueryEscape(cursor), "", "").want(t, 200, ""))
			got = append(got, s.Entries...)
			pages++
			if cursor = s.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != 5 || got[0].Kind != wallet.KindOpen || got[4].TxID != "c-3" || got[4].Posted != 40 || pages < 3 {
			t.Fatalf("statement in %d pages: %+v", pages, got)
		}
		c.do("GET", acct(alice)+"/entries?limit=x", "", "").want(t, 400, "malformed")
		c.do("GET", acct(alice)+"/entries?limit=0", "", "").want(t, 400, "invalid")
		c.do("GET", acct("shop-7/nobody")+"/entries", "", "").want(t, 404, "account_not_found")
	})
}

// TestAPI_unknownOutcome holds back every reply from Redis: the service
// answers 503, and the same request sent again once Redis answers gets the
// definite outcome, applied once.
func TestAPI_unknownOutcome(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	c, led := startAPI(t, rdb)
	c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).want(t, 201, "")
	c.do("POST", acct(alice)+"/credits", "c-0", `{"amount":1}`).want(t, 201, "") // loads the script

	px.HoldReplies(time.Second)
	r := c.do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).want(t, 503, "unknown_outcome")
	px.HoldReplies(0)
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	r = c.do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).want(t, 201, "")
	if got := decode[txResponse](t, r).Balance.Posted; got != 101 {
		t.Fatalf("posted %d after the outage, want 101: %s", got, r.body)
	}
	es, _, err := led.Entries(context.Background(), alice, "", 10)
	if err != nil || len(es) != 3 || es[2].TxID != "c-1" {
		t.Fatalf("journal %+v, %v: want the opening and two credits", es, err)
	}
}

// TestRun_serve runs the service as main does and stops it like SIGTERM.
func TestRun_serve(t *testing.T) {
	backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		addrs := make(chan string, 1)
		listening = func(a net.Addr) { addrs <- a.String() }
		t.Cleanup(func() { listening = nil })
		ctx, stop := context.WithCancel(t.Context())
		stderr := newSyncBuffer()
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"-serve", "127.0.0.1:0"}, io.Discard, stderr) }()
		var base string
		select {
		case a := <-addrs:
			base = "http://" + a
		case err := <-done:
			t.Fatalf("run: %v\n%s", err, stderr)
		}
		c := &testClient{t: t, base: base, hc: &http.Client{Transport: &http.Transport{}}}
		t.Cleanup(c.hc.CloseIdleConnections)
		c.do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).want(t, 201, "")
		c.do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).want(t, 201, "")
		c.do("GET", acct(bob), "", "").want(t, 404, "account_not_found")
		stop()
		if err := <-done; err != nil {
			t.Fatalf("run: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "wallet: stopped") {
			t.Fatalf("no graceful stop in the log:\n%s", stderr)
		}
	})
}

// TestRun_load runs the default mode, shortened, and checks its report.
func TestRun_load(t *testing.T) {
	backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		var out bytes.Buffer
		stderr := newSyncBuffer()
		err := run(t.Context(), []string{"-duration", "1s", "-workers", "4", "-accounts", "12", "-groups", "3"}, &out, stderr)
		report := out.String()
		if err != nil {
			t.Fatalf("run: %v\n%s\n%s", err, report, stderr)
		}
		for _, want := range []string{
			"double charges                        0\n",
			"acknowledged but not in the journal   0\n",
			"in the journal but not acknowledged   0\n",
			"negative balances without overdraft   0\n",
			"Verify                                12 of 12 accounts OK\n",
			"transfers net 0\n",
			"\nOK\n",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("report lacks %q:\n%s", want, report)
			}
		}
	})
}

func TestRun_usage(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-groups", "1"}, {"-accounts", "3", "-groups", "2"}} {
		if err := run(t.Context(), args, io.Discard, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want errUsage", args, err)
		}
	}
	if err := run(t.Context(), []string{"-h"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}
