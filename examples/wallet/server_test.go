package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/app"
	"github.com/redkit-go/redkit/examples/kit/exampletest"
	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

const (
	alice = "shop-7/alice" // alice and bob share a slot group
	bob   = "shop-7/bob"
	carol = "shop-8/carol" // another group: transfers to carol take the two-phase path
)

func acct(id string) string { return "/accounts/" + url.PathEscape(id) }

// startAPI serves newServer over a Ledger on rdb and returns a client
// with a key that has every scope.
func startAPI(t *testing.T, rdb redis.UniversalClient) (*exampletest.Client, *wallet.Ledger) {
	t.Helper()
	led, err := wallet.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	authn, keys := exampletest.Keys(t, "admin:"+strings.Join(scopes, ","))
	c := exampletest.NewServer(t, newServer(led, rdb, httpx.Edge{Auth: authn, Log: slog.New(slog.DiscardHandler)}))
	return c.As(keys["admin"]), led
}

func TestAPI_accounts(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, _ := startAPI(t, rdb)
		r := c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","overdraft":500}`).Want(t, 201, "")
		if got := exampletest.Decode[balance](t, r); got != (balance{Account: alice, Currency: "EUR", Overdraft: 500, Available: 0, Owner: "admin"}) {
			t.Fatalf("opened: %+v", got)
		}
		if loc := r.Header.Get("Location"); loc != "/accounts/shop-7%2Falice" {
			t.Fatalf("Location %q", loc)
		}
		c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR","overdraft":500}`).Want(t, 201, "")
		r = c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"USD","overdraft":500}`).Want(t, 409, "conflict")
		if r.Problem.Field != "currency" {
			t.Fatalf("conflict names %q, want currency", r.Problem.Field)
		}
		c.Do("POST", "/accounts", "", `{"id":"bad id","currency":"EUR"}`).Want(t, 400, "invalid")
		c.Do("POST", "/accounts", "", `{"id":"shop-7/dave"}`).Want(t, 400, "invalid") // no currency
		c.Do("POST", "/accounts", "", `{"id":"shop-7/dave","currency":"EUR"`).Want(t, 400, "malformed")
		c.Do("POST", "/accounts", "", `{"id":"shop-7/dave","currency":"EUR","colour":"red"}`).Want(t, 400, "malformed")
		c.Do("POST", "/accounts", "", ``).Want(t, 400, "malformed")

		if got := exampletest.Decode[balance](t, c.Get(acct(alice)).Want(t, 200, "")); got.Account != alice || got.Currency != "EUR" {
			t.Fatalf("balance: %+v", got)
		}
		c.Get(acct("shop-7/nobody")).Want(t, 404, "account_not_found")
		c.Get(acct("{bad}")).Want(t, 400, "invalid")
	})
}

func TestAPI_postings(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		for _, id := range []string{alice, bob} {
			c.Do("POST", "/accounts", "", `{"id":"`+id+`","currency":"EUR"}`).Want(t, 201, "")
		}
		credit := acct(alice) + "/credits"

		first := c.Do("POST", credit, "topup-1", `{"amount":5000,"memo":"top-up"}`).Want(t, 201, "")
		if first.Replayed() {
			t.Fatal("first credit marked replayed")
		}
		tx := exampletest.Decode[txResponse](t, first)
		if tx.ID != "topup-1" || tx.Kind != "credit" || tx.Amount != 5000 || tx.Balance.Posted != 5000 || tx.EntryID == "" {
			t.Fatalf("credit: %s", first.Body)
		}
		// The same key and body: the first response again, marked replayed.
		again := c.Do("POST", credit, "topup-1", `{"amount":5000,"memo":"top-up"}`).Want(t, 201, "")
		if !again.Replayed() || again.Body != first.Body {
			t.Fatalf("replay: replayed=%v\n%s\nwant\n%s", again.Replayed(), again.Body, first.Body)
		}
		// The key in the body works as well, and must agree with the header.
		c.Do("POST", credit, "", `{"id":"topup-1","amount":5000,"memo":"top-up"}`).Want(t, 201, "")
		c.Do("POST", credit, "topup-1", `{"id":"topup-2","amount":5000}`).Want(t, 400, "malformed")
		// The same key with another body: 409 naming the field.
		for body, field := range map[string]string{
			`{"amount":5001,"memo":"top-up"}`:                  "amount",
			`{"amount":5000,"memo":"other"}`:                   "memo",
			`{"amount":5000,"memo":"top-up","currency":"EUR"}`: "currency",
		} {
			r := c.Do("POST", credit, "topup-1", body).Want(t, 409, "conflict")
			if r.Problem.Field != field {
				t.Errorf("%s: conflict names %q, want %q", body, r.Problem.Field, field)
			}
		}
		r := c.Do("POST", acct(alice)+"/debits", "topup-1", `{"amount":5000,"memo":"top-up"}`).Want(t, 409, "conflict")
		if r.Problem.Field != "kind" {
			t.Errorf("debit under a credit's key names %q, want kind", r.Problem.Field)
		}

		c.Do("POST", credit, "", `{"amount":100}`).Want(t, 400, "malformed") // no key
		c.Do("POST", credit, "c-0", `{"amount":0}`).Want(t, 400, "invalid")
		c.Do("POST", credit, "c-neg", `{"amount":-5}`).Want(t, 400, "invalid")
		c.Do("POST", credit, "c-big", `{"amount":9007199254740992}`).Want(t, 400, "invalid")
		c.Do("POST", credit, "c-str", `{"amount":"100"}`).Want(t, 400, "malformed")
		c.Do("POST", credit, "bad key!", `{"amount":100}`).Want(t, 400, "invalid")
		c.Do("POST", credit, "c-usd", `{"amount":100,"currency":"USD"}`).Want(t, 422, "currency_mismatch")
		c.Do("POST", acct("shop-7/nobody")+"/credits", "c-nobody", `{"amount":100}`).Want(t, 404, "account_not_found")

		// A refusal stays refused under its key, even once the money is there.
		debit := acct(bob) + "/debits"
		c.Do("POST", debit, "d-1", `{"amount":300}`).Want(t, 422, "insufficient_funds")
		c.Do("POST", acct(bob)+"/credits", "c-bob", `{"amount":1000}`).Want(t, 201, "")
		c.Do("POST", debit, "d-1", `{"amount":300}`).Want(t, 422, "insufficient_funds")
		r = c.Do("POST", debit, "d-2", `{"amount":300}`).Want(t, 201, "")
		if got := exampletest.Decode[txResponse](t, r).Balance; got.Posted != 700 || got.Available != 700 {
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
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		for _, id := range []string{alice, bob, carol} {
			c.Do("POST", "/accounts", "", `{"id":"`+id+`","currency":"EUR"}`).Want(t, 201, "")
		}
		c.Do("POST", "/accounts", "", `{"id":"shop-8/yen","currency":"JPY"}`).Want(t, 201, "")
		c.Do("POST", acct(alice)+"/credits", "fund", `{"amount":1000}`).Want(t, 201, "")

		for _, to := range []string{bob, carol} { // within the group, and across
			body := fmt.Sprintf(`{"from":%q,"to":%q,"amount":300}`, alice, to)
			first := c.Do("POST", "/transfers", "pay-"+to, body).Want(t, 201, "")
			tx := exampletest.Decode[txResponse](t, first)
			if tx.Kind != "transfer" || tx.To == nil || tx.To.Account != to || tx.To.Posted != 300 || tx.ToEntryID == "" {
				t.Fatalf("transfer to %s: %s", to, first.Body)
			}
			again := c.Do("POST", "/transfers", "pay-"+to, body).Want(t, 201, "")
			if first.Replayed() || !again.Replayed() || again.Body != first.Body {
				t.Fatalf("replay to %s: %v %v\n%s\nwant\n%s", to, first.Replayed(), again.Replayed(), again.Body, first.Body)
			}
			r := c.Do("POST", "/transfers", "pay-"+to, fmt.Sprintf(`{"from":%q,"to":%q,"amount":301}`, alice, to)).Want(t, 409, "conflict")
			if r.Problem.Field != "amount" {
				t.Fatalf("conflict names %q", r.Problem.Field)
			}
		}
		pay := func(key, from, to string, amount int) exampletest.Reply {
			return c.Do("POST", "/transfers", key, fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, from, to, amount))
		}
		pay("too-much", alice, bob, 401).Want(t, 422, "insufficient_funds")
		pay("too-much-x", alice, carol, 401).Want(t, 422, "insufficient_funds")
		pay("self", alice, alice, 1).Want(t, 400, "invalid")
		pay("nobody", alice, "shop-7/nobody", 1).Want(t, 404, "account_not_found")
		pay("nobody-x", alice, "shop-9/nobody", 1).Want(t, 404, "account_not_found")
		pay("yen", alice, "shop-8/yen", 1).Want(t, 422, "currency_mismatch")
		c.Do("POST", "/transfers", "no-to", fmt.Sprintf(`{"from":%q,"amount":1}`, alice)).Want(t, 400, "invalid")

		if got := exampletest.Decode[balance](t, c.Get(acct(alice)).Want(t, 200, "")); got.Posted != 400 || got.Held != 0 {
			t.Fatalf("alice after transfers: %+v", got)
		}
		trial, err := led.TrialBalance(t.Context(), alice, bob, carol)
		if err != nil || !trial.Balanced() || trial.NetTransfers() != 0 || trial.Posted != 1000 {
			t.Fatalf("trial balance %+v, %v", trial, err)
		}
	})
}

func TestAPI_holds(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, led := startAPI(t, rdb)
		c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, 201, "")
		c.Do("POST", acct(alice)+"/credits", "fund", `{"amount":1000}`).Want(t, 201, "")
		holds := acct(alice) + "/holds"

		first := c.Do("POST", holds, "h-1", `{"amount":600,"ttl":"10m"}`).Want(t, 201, "")
		h := exampletest.Decode[txResponse](t, first)
		if h.Kind != "hold" || h.Expires == nil || !h.Expires.After(h.Time) || h.Balance.Held != 600 || h.Balance.Available != 400 {
			t.Fatalf("hold: %s", first.Body)
		}
		again := c.Do("POST", holds, "h-1", `{"amount":600,"ttl":"600s"}`).Want(t, 201, "")
		if !again.Replayed() || again.Body != first.Body {
			t.Fatalf("hold replay: %v\n%s\nwant\n%s", again.Replayed(), again.Body, first.Body)
		}
		if r := c.Do("POST", holds, "h-1", `{"amount":600,"ttl":"5m"}`).Want(t, 409, "conflict"); r.Problem.Field != "ttl" {
			t.Fatalf("conflict names %q", r.Problem.Field)
		}
		c.Do("POST", holds, "h-2", `{"amount":401,"ttl":"10m"}`).Want(t, 422, "insufficient_funds")
		c.Do("POST", holds, "h-3", `{"amount":1,"ttl":"soon"}`).Want(t, 400, "malformed")
		c.Do("POST", holds, "h-3", `{"amount":1,"ttl":"10ms"}`).Want(t, 400, "invalid")
		c.Do("POST", acct(alice)+"/debits", "d-1", `{"amount":401}`).Want(t, 422, "insufficient_funds")

		capture := holds + "/h-1/capture"
		c.Do("POST", capture, "", `{"amount":601}`).Want(t, 400, "invalid")
		first = c.Do("POST", capture, "", `{"amount":250}`).Want(t, 200, "")
		if got := exampletest.Decode[txResponse](t, first).Balance; got.Posted != 750 || got.Held != 0 {
			t.Fatalf("after capture: %+v", got)
		}
		again = c.Do("POST", capture, "", `{"amount":250}`).Want(t, 200, "")
		if !again.Replayed() || again.Body != first.Body {
			t.Fatalf("capture replay: %v\n%s\nwant\n%s", again.Replayed(), again.Body, first.Body)
		}
		if r := c.Do("POST", capture, "", `{"amount":200}`).Want(t, 409, "conflict"); r.Problem.Field != "amount" {
			t.Fatalf("conflict names %q", r.Problem.Field)
		}
		if r := c.Do("POST", holds+"/h-1/void", "", "").Want(t, 409, "conflict"); r.Problem.Field != "resolution" {
			t.Fatalf("void after capture names %q", r.Problem.Field)
		}
		c.Do("POST", holds+"/nope/capture", "", `{"amount":1}`).Want(t, 404, "hold_not_found")
		c.Do("POST", holds+"/nope/void", "", "").Want(t, 404, "hold_not_found")

		c.Do("POST", holds, "h-4", `{"amount":100,"ttl":"10m"}`).Want(t, 201, "")
		c.Do("POST", holds+"/h-4/void", "", "").Want(t, 200, "")
		if r := c.Do("POST", holds+"/h-4/void", "", "").Want(t, 200, ""); !r.Replayed() {
			t.Fatal("second void not marked replayed")
		}

		// A hold left alone expires on the server's clock and is released.
		c.Do("POST", holds, "h-5", `{"amount":100,"ttl":"1s"}`).Want(t, 201, "")
		for exampletest.Decode[balance](t, c.Get(acct(alice)).Want(t, 200, "")).Held != 0 {
			time.Sleep(50 * time.Millisecond)
		}
		c.Do("POST", holds+"/h-5/capture", "", `{"amount":100}`).Want(t, 422, "hold_expired")

		if err := led.Verify(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAPI_entries(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, _ string) {
		c, _ := startAPI(t, rdb)
		c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, 201, "")
		for i := range 4 {
			c.Do("POST", acct(alice)+"/credits", fmt.Sprint("c-", i), `{"amount":10}`).Want(t, 201, "")
		}
		var got []entry
		cursor, pages := "", 0
		for {
			s := exampletest.Decode[statement](t, c.Get(acct(alice)+"/entries?limit=2&cursor="+url.QueryEscape(cursor)).Want(t, 200, ""))
			got = append(got, s.Entries...)
			pages++
			if cursor = s.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != 5 || got[0].Kind != wallet.KindOpen || got[4].TxID != "c-3" || got[4].Posted != 40 || pages < 3 {
			t.Fatalf("statement in %d pages: %+v", pages, got)
		}
		c.Get(acct(alice)+"/entries?limit=x").Want(t, 400, "malformed")
		c.Get(acct(alice)+"/entries?limit=0").Want(t, 400, "invalid")
		c.Get(acct("shop-7/nobody")+"/entries").Want(t, 404, "account_not_found")
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
	c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, 201, "")
	c.Do("POST", acct(alice)+"/credits", "c-0", `{"amount":1}`).Want(t, 201, "") // loads the script

	px.HoldReplies(time.Second)
	r := c.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).Want(t, 503, "unknown_outcome")
	px.HoldReplies(0)
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	r = c.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).Want(t, 201, "")
	if !r.Replayed() {
		t.Fatal("the credit ran before its reply was held back, but the repeat is not marked replayed")
	}
	if got := exampletest.Decode[txResponse](t, r).Balance.Posted; got != 101 {
		t.Fatalf("posted %d after the outage, want 101: %s", got, r.Body)
	}
	es, _, err := led.Entries(context.Background(), alice, "", 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("journal %+v, %v: want the opening and two credits", es, err)
	}
	if key, _ := httpx.KeyOf("admin", es[2].TxID); key != "c-1" {
		t.Fatalf("the last credit is %q, want admin's c-1", es[2].TxID)
	}
}

// TestRun_serve runs the service as main does and stops it like SIGTERM.
func TestRun_serve(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		svc := exampletest.Serve(t, run, "-serve", "127.0.0.1:0")
		c := exampletest.NewClient(t, svc.URL).As(svc.AdminKey)
		c.Do("POST", "/accounts", "", `{"id":"shop-7/alice","currency":"EUR"}`).Want(t, 201, "")
		c.Do("POST", acct(alice)+"/credits", "c-1", `{"amount":100}`).Want(t, 201, "")
		c.Get(acct(bob)).Want(t, 404, "account_not_found")
		if err := svc.Stop(); err != nil {
			t.Fatalf("run: %v\n%s", err, svc.Log)
		}
		if !strings.Contains(svc.Log.String(), "wallet: stopped") {
			t.Fatalf("no graceful stop in the log:\n%s", svc.Log)
		}
	})
}

// TestRun_load runs the default mode, shortened, and checks its report.
func TestRun_load(t *testing.T) {
	exampletest.Backends(t, func(t *testing.T, _ redis.UniversalClient, redisURL string) {
		t.Setenv("REDIS_URL", redisURL)
		var out bytes.Buffer
		var stderr exampletest.SyncBuffer
		err := run(t.Context(), []string{"-duration", "1s", "-workers", "4", "-accounts", "12", "-groups", "3"}, &out, &stderr)
		report := out.String()
		if err != nil {
			t.Fatalf("run: %v\n%s\n%s", err, report, &stderr)
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
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-groups", "1"}, {"-accounts", "3", "-groups", "2"},
		{"-recover-every", "-1s"}, {"-serve", "127.0.0.1:0", "-recover-every", "-1s"}} {
		if err := run(t.Context(), args, io.Discard, &stderr); !errors.Is(err, app.ErrUsage) {
			t.Errorf("%q: %v, want app.ErrUsage", args, err)
		}
	}
	if err := run(t.Context(), []string{"-h"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// TestStatusError_crossGroupRefusals: the two stored refusals of a transfer
// across slot groups are business refusals (422), not a 500.
func TestStatusError_crossGroupRefusals(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("transfer x: %w", wallet.ErrDestinationFull), "destination_full"},
		{fmt.Errorf("transfer x: %w", wallet.ErrTransferExpired), "transfer_expired"},
	} {
		var se *httpx.StatusError
		if !errors.As(statusError(tc.err), &se) || se.Status != 422 || se.Code != tc.code {
			t.Fatalf("%v: got %#v, want 422 %s", tc.err, se, tc.code)
		}
	}
}
