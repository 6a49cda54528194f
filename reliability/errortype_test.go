package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/otelx/otelxtest"
	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// idAlphabet builds the IDs of the error-path test: upper-case letters
// that no error type, sentinel text or Redis error code redkit records
// contains, so an ID of one character found in error.type is a leak.
const idAlphabet = "QJZ"

// errorPath is one way a public call fails: run drives it with IDs of n
// characters (newID(k) returns the k-th, k < 3) under the key prefix of
// the path, and returns the call's error; the call's span must have the
// outcome want, and the error must match is.
type errorPath struct {
	module, name string
	want         string // redkit.outcome of the module's span
	is           error
	minLen       int // shortest n the path can use (an ID "g/x" needs 3)
	run          func(ctx context.Context, c *pathClients, newID func(k int) string) error
}

// pathClients are one path's clients, each on the path's key prefix.
type pathClients struct {
	prefix   string
	locks    *lock.Client
	inv      *stock.Inventory
	led      *wallet.Ledger
	rdb      redis.UniversalClient
	lost     redis.UniversalClient // through a proxy that drops every reply
	lockOpts []lock.Option
	lopts    []idgen.Option
	sopts    []stock.Option
	wopts    []wallet.Option
}

func idOf(n, k int) string {
	return string(idAlphabet[k]) + strings.Repeat(idAlphabet[(k+1)%3:(k+1)%3+1], n-1)
}

// groupedID is an ID "Q/..." of n characters (n >= 3) in the slot group Q.
func groupedID(n, k int) string { return "Q/" + idOf(n-2, k) }

var errorPaths = []errorPath{
	// lock
	{"lock", "held", otelx.OutcomeNotAcquired, lock.ErrNotAcquired, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		l, err := c.locks.Mutex(id(0)).TryAcquire(ctx)
		if err != nil {
			return err
		}
		defer l.Release(ctx)
		_, err = c.locks.Mutex(id(0)).TryAcquire(ctx)
		return err
	}},
	{"lock", "release after expiry", otelx.OutcomeExpired, lock.ErrLeaseExpired, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		l, err := c.locks.Mutex(id(0), lock.WithTTL(20*time.Millisecond), lock.WithWatchdog(false)).TryAcquire(ctx)
		if err != nil {
			return err
		}
		key := c.prefix + ":lock:v2:{" + id(0) + "}:mutex:" + id(0)
		for c.rdb.Exists(ctx, key).Val() == 1 {
			time.Sleep(time.Millisecond) // until Redis has expired it
		}
		return l.Release(ctx)
	}},
	{"lock", "unknown outcome", otelx.OutcomeUnknownOutcome, lock.ErrUnknownOutcome, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		locks, err := lock.New(c.lost, c.lockOpts...)
		if err != nil {
			return err
		}
		defer locks.Close()
		_, err = locks.Mutex(id(1)).TryAcquire(ctx)
		return err
	}},
	// idgen
	{"idgen", "exhausted", "", idgen.ErrExhausted, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		seq, err := idgen.NewSequence(c.rdb, id(0), c.lopts...)
		if err != nil {
			return err
		}
		if _, err := seq.Next(ctx); err != nil {
			return err
		}
		if err := c.rdb.Set(ctx, counterKey(c, id(0)), int64(1<<53-1), 0).Err(); err != nil {
			return err
		}
		_, err = seq.Next(ctx)
		return err
	}},
	{"idgen", "segment unavailable", otelx.OutcomeError, idgen.ErrUnavailable, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		seg, err := idgen.NewSegment(c.lost, id(1), append(c.lopts, idgen.WithFetchTimeout(50*time.Millisecond), idgen.WithReplicaAckTimeout(10*time.Millisecond))...)
		if err != nil {
			return err
		}
		defer seg.Close()
		_, err = seg.Next(ctx)
		return err
	}},
	// stock
	{"stock", "sold out", otelx.OutcomeSoldOut, stock.ErrSoldOut, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 1); err != nil {
			return err
		}
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 2}}})
		return err
	}},
	{"stock", "buyer limit", otelx.OutcomeBuyerLimit, stock.ErrBuyerLimit, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9, stock.WithBuyerLimit(1)); err != nil {
			return err
		}
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 2}}})
		return err
	}},
	{"stock", "sku not found", otelx.OutcomeSKUNotFound, stock.ErrSKUNotFound, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}})
		return err
	}},
	{"stock", "order not found", otelx.OutcomeOrderNotFound, stock.ErrOrderNotFound, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		_, err := c.inv.Confirm(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}})
		return err
	}},
	{"stock", "conflict", otelx.OutcomeConflict, stock.ErrConflict, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		o := stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}}
		if _, err := c.inv.Deduct(ctx, o); err != nil {
			return err
		}
		o.Items[0].Qty = 2
		_, err := c.inv.Deduct(ctx, o)
		return err
	}},
	{"stock", "cancelled", otelx.OutcomeCancelled, stock.ErrCancelled, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		o := stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}}
		if _, err := c.inv.Cancel(ctx, o); err != nil {
			return err
		}
		_, err := c.inv.Reserve(ctx, o, time.Minute)
		return err
	}},
	{"stock", "closed", otelx.OutcomeClosed, stock.ErrSKUClosed, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		if err := c.inv.CloseSKU(ctx, id(0)); err != nil {
			return err
		}
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}})
		return err
	}},
	{"stock", "cross group", otelx.OutcomeCrossGroup, stock.ErrCrossGroup, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2),
			Items: []stock.Item{{SKU: id(0), Qty: 1}, {SKU: id(1), Qty: 1}}})
		return err
	}},
	{"stock", "stale fence", otelx.OutcomeStaleFence, stock.ErrStaleFence, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		o := stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}}
		if _, err := c.inv.Deduct(ctx, o, stock.WithFence(lock.Fence{Name: id(2), Token: 7})); err != nil {
			return err
		}
		o.ID = id(2)
		_, err := c.inv.Deduct(ctx, o, stock.WithFence(lock.Fence{Name: id(2), Token: 6}))
		return err
	}},
	{"stock", "invalid quantity", otelx.OutcomeInvalid, stock.ErrInvalid, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: -1}}})
		return err
	}},
	{"stock", "unknown outcome", otelx.OutcomeUnknownOutcome, stock.ErrUnknownOutcome, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.inv.Create(ctx, id(0), 9); err != nil {
			return err
		}
		inv, err := stock.New(c.lost, c.sopts...)
		if err != nil {
			return err
		}
		defer inv.Close()
		_, err = inv.Deduct(ctx, stock.Order{ID: id(1), Buyer: id(2), Items: []stock.Item{{SKU: id(0), Qty: 1}}})
		return err
	}},
	// wallet
	{"wallet", "insufficient funds", otelx.OutcomeInsufficientFunds, wallet.ErrInsufficientFunds, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		_, err := c.led.Debit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5})
		return err
	}},
	{"wallet", "account not found", otelx.OutcomeAccountNotFound, wallet.ErrAccountNotFound, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5})
		return err
	}},
	{"wallet", "closed", otelx.OutcomeClosed, wallet.ErrAccountClosed, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if err := c.led.CloseAccount(ctx, id(0)); err != nil {
			return err
		}
		_, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5})
		return err
	}},
	{"wallet", "conflict", otelx.OutcomeConflict, wallet.ErrConflict, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if _, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5}); err != nil {
			return err
		}
		_, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 6})
		return err
	}},
	{"wallet", "currency mismatch", otelx.OutcomeCurrencyMismatch, wallet.ErrCurrencyMismatch, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if err := c.led.Open(ctx, id(1), wallet.WithCurrency("EUR")); err != nil {
			return err
		}
		if _, err := c.led.Credit(ctx, wallet.Tx{ID: id(2), Account: id(0), Amount: 5}); err != nil {
			return err
		}
		_, err := c.led.Transfer(ctx, wallet.Transfer{ID: id(1), From: id(0), To: id(1), Amount: 5})
		return err
	}},
	{"wallet", "hold not found", otelx.OutcomeHoldNotFound, wallet.ErrHoldNotFound, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		_, err := c.led.Capture(ctx, id(0), id(1), 1)
		return err
	}},
	{"wallet", "stale fence", otelx.OutcomeStaleFence, wallet.ErrStaleFence, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if _, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5},
			wallet.WithFence(lock.Fence{Name: id(2), Token: 7})); err != nil {
			return err
		}
		_, err := c.led.Credit(ctx, wallet.Tx{ID: id(2), Account: id(0), Amount: 5},
			wallet.WithFence(lock.Fence{Name: id(2), Token: 6}))
		return err
	}},
	{"wallet", "same account", otelx.OutcomeInvalid, wallet.ErrSameAccount, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.led.Transfer(ctx, wallet.Transfer{ID: id(1), From: id(0), To: id(0), Amount: 5})
		return err
	}},
	{"wallet", "invalid amount", otelx.OutcomeInvalid, wallet.ErrInvalid, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		_, err := c.led.Debit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 0})
		return err
	}},
	{"wallet", "transfer to a missing destination", otelx.OutcomeAccountNotFound, wallet.ErrAccountNotFound, 3, func(ctx context.Context, c *pathClients, id func(int) string) error {
		n := len(id(0))
		from, to := groupedID(n, 0), groupedID(n, 1)
		if err := c.led.Open(ctx, from, wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if _, err := c.led.Credit(ctx, wallet.Tx{ID: id(2), Account: from, Amount: 5}); err != nil {
			return err
		}
		_, err := c.led.Transfer(ctx, wallet.Transfer{ID: id(1), From: from, To: to, Amount: 5})
		return err
	}},
	// A transfer record whose void reason this version does not know (a
	// newer version's, during a rolling deploy, or a damaged record): the
	// error names the transfer in its text, made without %w.
	{"wallet", "void reason from a newer version", otelx.OutcomeError, nil, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		if _, err := c.led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5}); err != nil {
			return err
		}
		tr := wallet.Transfer{ID: id(2), From: id(0), To: id(1), Amount: 5} // to another slot group
		if _, err := c.led.Transfer(ctx, tr); !errors.Is(err, wallet.ErrAccountNotFound) {
			return fmt.Errorf("want the transfer voided for its missing destination, got %w", err)
		}
		key := c.prefix + ":wallet:v2:{" + id(0) + "}:tx:" + id(2)
		if err := c.rdb.HSet(ctx, key, "r", "later_reason").Err(); err != nil {
			return err
		}
		_, err := c.led.Transfer(ctx, tr)
		return err
	}},
	{"wallet", "unknown outcome", otelx.OutcomeUnknownOutcome, wallet.ErrUnknownOutcome, 1, func(ctx context.Context, c *pathClients, id func(int) string) error {
		if err := c.led.Open(ctx, id(0), wallet.WithCurrency("CNY")); err != nil {
			return err
		}
		led, err := wallet.New(c.lost, c.wopts...)
		if err != nil {
			return err
		}
		defer led.Close()
		_, err = led.Credit(ctx, wallet.Tx{ID: id(1), Account: id(0), Amount: 5})
		return err
	}},
}

// TestErrorType_noIDReachesTelemetry drives every error path above, each
// with IDs of every length from 1 to 80 characters (the paths that wait
// for a lost reply with a sample of lengths), and scans the error.type of
// every span for the IDs: a sentinel's text or a Go type, never an
// error's text that holds an ID (an error made by fmt.Errorf without %w,
// however short). It also checks that each call's span records the
// outcome the shared vocabulary gives its result, the same word in every
// module, and that no recorded outcome is outside the vocabulary.
func TestErrorType_noIDReachesTelemetry(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	px := redistest.NewProxy(t, srv.Addr())
	px.DropReplies(true)
	lost := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 30 * time.Millisecond,
		WriteTimeout: 30 * time.Millisecond, DialTimeout: time.Second})
	t.Cleanup(func() { _ = lost.Close() })
	tel := otelxtest.New(t)
	require.NoError(t, otelx.InstrumentRedis(rdb, tel.Providers()))
	require.NoError(t, otelx.InstrumentRedis(lost, tel.Providers()))
	caller := tel.TracerProvider.Tracer("caller")
	ctx := t.Context()

	type call struct {
		path errorPath
		n    int
		span trace.SpanID
	}
	var calls []call
	var ids []string
	faulty := map[int]bool{1: true, 2: true, 17: true, 80: true}
	for n := 1; n <= 80; n++ {
		for _, p := range errorPaths {
			if n < p.minLen || (strings.Contains(p.name, "unknown") || strings.Contains(p.name, "unavailable")) && !faulty[n] {
				continue
			}
			prefix := fmt.Sprintf("et%d-%s-%s", n, p.module, strings.ReplaceAll(p.name, " ", "_"))
			c := &pathClients{prefix: prefix, rdb: rdb, lost: lost}
			c.lockOpts = []lock.Option{lock.WithKeyPrefix(prefix), lock.WithTracerProvider(tel.TracerProvider),
				lock.WithMeterProvider(tel.MeterProvider), lock.WithRetry(1, time.Millisecond, time.Millisecond)}
			c.lopts = []idgen.Option{idgen.WithKeyPrefix(prefix), idgen.WithTracerProvider(tel.TracerProvider),
				idgen.WithMeterProvider(tel.MeterProvider)}
			c.sopts = []stock.Option{stock.WithKeyPrefix(prefix), stock.WithTracerProvider(tel.TracerProvider),
				stock.WithMeterProvider(tel.MeterProvider), stock.WithReclaimInterval(0),
				stock.WithRetry(1, time.Millisecond, time.Millisecond)}
			c.wopts = []wallet.Option{wallet.WithKeyPrefix(prefix), wallet.WithTracerProvider(tel.TracerProvider),
				wallet.WithMeterProvider(tel.MeterProvider), wallet.WithRecovery(0),
				wallet.WithRetry(1, time.Millisecond, time.Millisecond)}
			var err error
			c.locks, err = lock.New(rdb, c.lockOpts...)
			require.NoError(t, err)
			c.inv, err = stock.New(rdb, c.sopts...)
			require.NoError(t, err)
			c.led, err = wallet.New(rdb, c.wopts...)
			require.NoError(t, err)

			newID := func(k int) string {
				id := idOf(n, k)
				ids = append(ids, id)
				return id
			}
			pctx, span := caller.Start(ctx, "path")
			err = p.run(pctx, c, newID)
			span.End()
			require.Error(t, err, "%s %s (n=%d)", p.module, p.name, n)
			if p.is != nil {
				require.ErrorIs(t, err, p.is, "%s %s (n=%d)", p.module, p.name, n)
			}
			calls = append(calls, call{p, n, span.SpanContext().SpanID()})
			_ = c.locks.Close()
			_ = c.inv.Close()
			_ = c.led.Close()
		}
	}

	ended := tel.Spans.Ended()
	outcomes := map[string]bool{}
	for _, o := range otelx.Outcomes() {
		outcomes[o] = true
	}
	errTypes := map[string]bool{}
	for _, s := range ended {
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case attribute.Key(otelx.AttrErrorType):
				errTypes[kv.Value.AsString()] = true
			case attribute.Key(otelx.AttrOutcome):
				require.True(t, outcomes[kv.Value.AsString()], "span %s: outcome %q is not in otelx.Outcomes", s.Name(), kv.Value.AsString())
			}
		}
		if s.Status().Code == codes.Error {
			require.NotEmpty(t, attr(s, otelx.AttrErrorType), "span %s failed without error.type", s.Name())
		}
	}
	require.NotEmpty(t, errTypes)
	for typ := range errTypes {
		for _, id := range ids {
			require.NotContains(t, typ, id, "error.type %q holds the ID %q", typ, id)
		}
	}
	t.Logf("error.type values seen: %v", keysOf(errTypes))
	var long []string
	for _, id := range ids {
		if len(id) >= 3 {
			long = append(long, id)
		}
	}
	tel.RequireNoSecrets(t, long...)

	// Each call's span has the outcome of the shared vocabulary.
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
	}
	for _, c := range calls {
		if c.path.want == "" {
			continue // idgen's Sequence has no span of its own
		}
		var last sdktrace.ReadOnlySpan
		for _, s := range children[c.span] {
			out := attr(s, otelx.AttrOutcome)
			if strings.HasPrefix(s.Name(), c.path.module+".") && out != otelx.OutcomeOK && out != otelx.OutcomeReplayed &&
				(last == nil || s.EndTime().After(last.EndTime())) {
				last = s
			}
		}
		if last == nil && c.path.module == "idgen" {
			continue // a Segment's fetch is a root of its own, linked to the caller
		}
		require.NotNil(t, last, "%s %s (n=%d): no failed %s span under the caller", c.path.module, c.path.name, c.n, c.path.module)
		require.Equal(t, c.path.want, attr(last, otelx.AttrOutcome), "%s %s (n=%d): span %s", c.path.module, c.path.name, c.n, last.Name())
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// counterKey is the key of idgen's counter name (an ID without '/') under
// the path's prefix.
func counterKey(c *pathClients, name string) string {
	return c.prefix + ":idgen:v1:{" + name + "}:seq:" + name
}
