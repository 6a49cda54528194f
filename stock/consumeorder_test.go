package stock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// orderCheck records what the consumers of one group were handed and
// counts every batch handed out while an older entry of the journal was
// pending (handed to a consumer, not acknowledged): at the start of each
// handler it asks Redis for the group's pending entries older than the
// batch. Entries, once acknowledged, are never pending again, so a hit is
// a break of the order, whatever the timing.
type orderCheck struct {
	rdb            *redis.Client
	journal, group string

	mu         sync.Mutex
	handled    map[string]int // entry ID -> times handed to a handler
	violations []string
}

func (o *orderCheck) handler(name string, pause time.Duration) func(ctx context.Context, es []stock.Entry) error {
	return func(ctx context.Context, es []stock.Entry) error {
		older, err := o.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: o.journal, Group: o.group,
			Start: "-", End: "(" + es[0].ID, Count: 1}).Result()
		if err != nil {
			return err
		}
		o.mu.Lock()
		if len(older) > 0 {
			o.violations = append(o.violations, fmt.Sprintf("%s was handed %s..%s while %s held %s",
				name, es[0].ID, es[len(es)-1].ID, older[0].Consumer, older[0].ID))
		}
		for _, e := range es {
			o.handled[e.ID]++
		}
		o.mu.Unlock()
		time.Sleep(pause) // a handler's work: the batch stays pending meanwhile
		return nil
	}
}

// done reports whether the group has acknowledged every entry of the
// journal.
func (o *orderCheck) done(ctx context.Context) bool {
	last, err := o.rdb.XRevRangeN(ctx, o.journal, "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		return false
	}
	groups, err := o.rdb.XInfoGroups(ctx, o.journal).Result()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g.Name == o.group {
			return g.LastDeliveredID == last[0].ID && g.Pending == 0
		}
	}
	return false
}

// consumeOrder runs Consume on consumers goroutines until the group has
// acknowledged the whole journal, then checks that no batch was handed out
// while an older entry was held by another consumer and that every entry
// was handled.
func (o *orderCheck) run(t *testing.T, inv *stock.Inventory, sku string, consumers []stock.Consumer, pause time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(consumers))
	for _, c := range consumers {
		wg.Go(func() {
			if err := inv.Consume(ctx, c, o.handler(c.Name, pause)); !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
	}
	require.Eventually(t, func() bool { return o.done(t.Context()) }, time.Minute, 10*time.Millisecond,
		"the group never acknowledged the whole journal")
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	all, err := o.rdb.XRange(t.Context(), o.journal, "-", "+").Result()
	require.NoError(t, err)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range all {
		require.Positive(t, o.handled[m.ID], "entry %s never handled", m.ID)
	}
	require.Empty(t, o.violations, "entries handed out while an older one was held by another consumer")
}

// Consume keeps a journal's order across consumers: no consumer is handed
// an entry while an older one is pending for another. A consumer fails
// holding 40 entries; two others (batch 5) take them over: each takeover
// claims the oldest pending entries (a second consumer does not skip the
// five the first just claimed and take the next five while those are still
// held). And two healthy consumers with batch 1 over 300 entries never both
// pass the "nothing older pending" check: deciding and reading are one
// step. Both on go-redis's defaults and on a client that sends once.
func TestConsume_orderAcrossConsumers(t *testing.T) {
	for _, sendOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("send once %v", sendOnce), func(t *testing.T) {
			srv := redistest.New(t, redistest.Options{})
			rdb := srv.Client(func(o *redis.Options) {
				if sendOnce {
					o.MaxRetries = -1
				}
			})
			defer rdb.Close()
			inv := mustNew(t, rdb, stock.WithReclaimInterval(0))
			defer inv.Close()
			ctx := t.Context()

			t.Run("takeover of a failed consumer's 40 entries", func(t *testing.T) {
				const sku = "order/takeover"
				require.NoError(t, inv.Create(ctx, sku, 1000))
				fill(t, inv, sku, "t", 49) // 50 entries with the creation
				died := errors.New("died")
				err := inv.Consume(ctx, stock.Consumer{Group: "db", Name: "dead", SKUs: []string{sku}, Batch: 40},
					func(context.Context, []stock.Entry) error { return died })
				require.ErrorIs(t, err, died)
				o := &orderCheck{rdb: rdb, journal: inv.JournalKeyForTest(sku), group: "db", handled: map[string]int{}}
				var cs []stock.Consumer
				for _, name := range []string{"x", "y"} {
					cs = append(cs, stock.Consumer{Group: "db", Name: name, SKUs: []string{sku}, Batch: 5,
						MinIdle: 200 * time.Millisecond, Poll: 5 * time.Millisecond})
				}
				o.run(t, inv, sku, cs, 20*time.Millisecond)
			})

			t.Run("two healthy consumers, batch 1", func(t *testing.T) {
				const sku = "order/healthy"
				require.NoError(t, inv.Create(ctx, sku, 1000))
				fill(t, inv, sku, "h", 299)
				o := &orderCheck{rdb: rdb, journal: inv.JournalKeyForTest(sku), group: "db", handled: map[string]int{}}
				var cs []stock.Consumer
				for _, name := range []string{"x", "y"} {
					cs = append(cs, stock.Consumer{Group: "db", Name: name, SKUs: []string{sku}, Batch: 1,
						MinIdle: 30 * time.Second, Poll: time.Millisecond})
				}
				o.run(t, inv, sku, cs, time.Millisecond)
			})
		})
	}
}

// A consumer whose handler runs past MinIdle loses its batch to another
// consumer; its acknowledgement, when it finally comes, acknowledges
// nothing the other still holds, so no newer entry is handed out while the
// other handles the batch.
func TestConsume_lateAckLeavesTakenOverBatchHeld(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	defer rdb.Close()
	inv := mustNew(t, rdb, stock.WithReclaimInterval(0))
	defer inv.Close()
	ctx := t.Context()
	const sku = "late/sku"
	require.NoError(t, inv.Create(ctx, sku, 100))
	fill(t, inv, sku, "l", 9) // 10 entries
	o := &orderCheck{rdb: rdb, journal: inv.JournalKeyForTest(sku), group: "db", handled: map[string]int{}}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// stalling runs a consumer whose first batch blocks its handler until
	// release is closed; has is closed once it holds that batch.
	stalling := func(name string, minIdle time.Duration, has, release chan struct{}) <-chan error {
		done := make(chan error, 1)
		var first atomic.Bool
		check := o.handler(name, 0)
		go func() {
			done <- inv.Consume(cctx, stock.Consumer{Group: "db", Name: name, SKUs: []string{sku}, Batch: 5,
				MinIdle: minIdle, Poll: 5 * time.Millisecond},
				func(ctx context.Context, es []stock.Entry) error {
					if err := check(ctx, es); err != nil {
						return err
					}
					if first.CompareAndSwap(false, true) {
						close(has)
						<-release
					}
					return nil
				})
		}()
		return done
	}
	slowHas, slowRelease := make(chan struct{}), make(chan struct{})
	slowDone := stalling("slow", time.Hour, slowHas, slowRelease)
	<-slowHas
	// fast takes slow's 5 over once they are idle for 100ms, and stalls.
	fastHas, fastRelease := make(chan struct{}), make(chan struct{})
	fastDone := stalling("fast", 100*time.Millisecond, fastHas, fastRelease)
	<-fastHas

	// slow finishes late, acknowledges and polls again: wait until the
	// server ran a few commands besides this test's own INFO.
	processed := func() int64 {
		info, err := rdb.Info(ctx, "stats").Result()
		require.NoError(t, err)
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return 0
	}
	before, polls := processed(), int64(0)
	close(slowRelease)
	waitFor(t, func() bool { polls++; return processed()-before-polls >= 5 })
	p, err := rdb.XPending(ctx, o.journal, "db").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"fast": 5}, p.Consumers, "the batch fast took over is still fast's")
	o.mu.Lock()
	require.Empty(t, o.violations)
	o.mu.Unlock()

	close(fastRelease)
	require.Eventually(t, func() bool { return o.done(ctx) }, time.Minute, 5*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-slowDone, context.Canceled)
	require.ErrorIs(t, <-fastDone, context.Canceled)
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Empty(t, o.violations)
}

// A round of Consume whose reply is lost, sent again (by go-redis, on its
// defaults) or called again (by Consume's caller, on a client that sends
// once), hands the same entries to the same consumer: the first send made
// them its pending entries, and a consumer's own pending entries come
// first. Nothing is skipped, and no other consumer gets them meanwhile.
func TestConsume_lostReplyHandsTheSameEntriesAgain(t *testing.T) {
	for _, sendOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("send once %v", sendOnce), func(t *testing.T) {
			srv := redistest.New(t, redistest.Options{})
			px := redistest.NewProxy(t, srv.Addr())
			direct := srv.Client()
			defer direct.Close()
			lossy := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond,
				MaxRetries: map[bool]int{false: 0, true: -1}[sendOnce]})
			defer lossy.Close()
			ctx := t.Context()
			inv := mustNew(t, direct, stock.WithReclaimInterval(0))
			defer inv.Close()
			const sku = "lost/sku"
			require.NoError(t, inv.Create(ctx, sku, 100))
			fill(t, inv, sku, "l", 4)
			journal := inv.JournalKeyForTest(sku)
			require.NoError(t, direct.XGroupCreate(ctx, journal, "db", "0").Err())
			all, err := direct.XRange(ctx, journal, "-", "+").Result()
			require.NoError(t, err)
			consumer := mustNew(t, lossy, stock.WithReclaimInterval(0))
			defer consumer.Close()
			require.NoError(t, lossy.Ping(ctx).Err()) // connected: the reply lost is the script's

			var ids []string
			err = redistest.LostReply(t, px, func() error {
				var err error
				ids, _, err = consumer.NextEntriesForTest(ctx, sku, "db", "c", 3, time.Hour)
				return err
			}, func() {})
			if sendOnce {
				require.Error(t, err, "the reply was lost and nothing sent it again")
				ids, _, err = consumer.NextEntriesForTest(ctx, sku, "db", "c", 3, time.Hour)
			}
			require.NoError(t, err)
			require.Equal(t, []string{all[0].ID, all[1].ID, all[2].ID}, ids)
			p, err := direct.XPending(ctx, journal, "db").Result()
			require.NoError(t, err)
			require.Equal(t, map[string]int64{"c": 3}, p.Consumers)
			other, _, err := inv.NextEntriesForTest(ctx, sku, "db", "d", 3, time.Hour)
			require.NoError(t, err)
			require.Empty(t, other, "c holds the oldest entries")
		})
	}
}

// Consume keeps each journal's order and delivers every entry at least
// once with everything at once: a SKU split into 4 buckets (a journal
// each), three consumers whose handlers fail now and then (Consume returns;
// the consumer comes back under its name) or stall past MinIdle (taken
// over), replies of consume.lua and consumed.lua lost on the consumers'
// link (go-redis's defaults send them again; a client that sends once
// fails the call), and a writer that checkpoints and trims meanwhile. No
// batch is handed out while an older entry of its journal is pending for
// another consumer, and every entry is handled.
func TestConsume_bucketsCrashesStallsLostRepliesAndTrims(t *testing.T) {
	for _, sendOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("send once %v", sendOnce), func(t *testing.T) {
			srv := redistest.New(t, redistest.Options{})
			px := redistest.NewProxy(t, srv.Addr())
			direct := srv.Client()
			defer direct.Close()
			lossy := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 300 * time.Millisecond,
				MaxRetries: map[bool]int{false: 0, true: -1}[sendOnce]})
			defer lossy.Close()
			ctx := t.Context()
			inv := mustNew(t, direct, stock.WithReclaimInterval(0))
			defer inv.Close()
			const sku = "b/hot"
			require.NoError(t, inv.Create(ctx, sku, 100000, stock.WithBuckets(4)))
			fill(t, inv, sku, "x", 400)
			var journals []string
			for k := range 4 {
				journals = append(journals, "redkit:stock:v1:{"+stock.BucketTagForTest("b", k)+"}:journal:"+sku)
				n, err := direct.XLen(ctx, journals[k]).Result()
				require.NoError(t, err)
				require.Positive(t, n, "no journal at %s", journals[k])
			}
			cinv := mustNew(t, lossy, stock.WithReclaimInterval(0))
			defer cinv.Close()

			var mu sync.Mutex
			handled := map[string]int{}
			var violations []string
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var wg sync.WaitGroup
			for _, name := range []string{"a", "b", "c"} {
				wg.Go(func() {
					rnd := rand.New(rand.NewPCG(uint64(len(name)), uint64(name[0])))
					for cctx.Err() == nil {
						c := stock.Consumer{Group: "db", Name: name, SKUs: []string{sku}, Batch: int64(1 + rnd.IntN(7)),
							MinIdle: 150 * time.Millisecond, Poll: 2 * time.Millisecond}
						_ = cinv.Consume(cctx, c, func(_ context.Context, es []stock.Entry) error {
							j := journals[es[0].Bucket]
							older, err := direct.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: j, Group: "db",
								Start: "-", End: "(" + es[0].ID, Count: 10}).Result()
							if err != nil {
								return err
							}
							mu.Lock()
							for _, o := range older {
								if o.Consumer != name {
									violations = append(violations, fmt.Sprintf("%s was handed %d/%s while %s held %s",
										name, es[0].Bucket, es[0].ID, o.Consumer, o.ID))
								}
							}
							for _, e := range es {
								handled[fmt.Sprint(e.Bucket, "/", e.ID)]++
							}
							mu.Unlock()
							switch r := rnd.IntN(20); {
							case r == 0:
								return errors.New("the handler failed")
							case r == 1:
								time.Sleep(200 * time.Millisecond) // past MinIdle: taken over
							case r == 2: // the next reply on the consumers' link is lost
								d := px.Dropped()
								px.DropRepliesAfter(0)
								go func() {
									for i := 0; i < 200 && px.Dropped() == d; i++ {
										time.Sleep(5 * time.Millisecond)
									}
									px.DropReplies(false)
								}()
							}
							return nil
						})
					}
				})
			}
			wdone := make(chan struct{})
			go func() {
				defer close(wdone)
				for i := range 300 {
					if _, err := inv.Deduct(ctx, order(fmt.Sprintf("w-%d", i), fmt.Sprintf("wu%d", i), sku, 1)); err != nil {
						t.Error(err)
						return
					}
					if i%20 == 0 {
						if _, err := inv.Checkpoint(ctx, sku); err != nil {
							t.Error(err)
						}
						if _, err := inv.Trim(ctx, sku); err != nil {
							t.Error(err)
						}
					}
				}
			}()
			<-wdone
			require.Eventually(t, func() bool {
				for _, j := range journals {
					last, _ := direct.XRevRangeN(ctx, j, "+", "-", 1).Result()
					gs, _ := direct.XInfoGroups(ctx, j).Result()
					if len(gs) == 0 || len(last) == 0 || gs[0].LastDeliveredID != last[0].ID || gs[0].Pending != 0 {
						return false
					}
				}
				return true
			}, 2*time.Minute, 20*time.Millisecond, "the group never acknowledged every journal")
			cancel()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for k, j := range journals {
				all, err := direct.XRange(ctx, j, "-", "+").Result()
				require.NoError(t, err)
				for _, m := range all {
					require.Positive(t, handled[fmt.Sprint(k, "/", m.ID)], "entry %d/%s never handled", k, m.ID)
				}
			}
			t.Logf("%d entries handled, %d replies lost", len(handled), px.Dropped())
			require.Empty(t, violations, "entries handed out while an older one was held by another consumer")
		})
	}
}
