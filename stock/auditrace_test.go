package stock_test

import (
	"errors"
	"fmt"
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

// commandCalls is the number of times the server ran cmd (INFO
// commandstats).
func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// fill appends n deductions of one unit each to sku's journal, in batches.
func fill(t *testing.T, inv *stock.Inventory, sku, prefix string, n int) {
	t.Helper()
	for done := 0; done < n; done += 500 {
		var orders []stock.Order
		for i := done; i < min(done+500, n); i++ {
			orders = append(orders, order(fmt.Sprintf("%s-%d", prefix, i), "u"+strconv.Itoa(i), sku, 1))
		}
		for _, r := range inv.DeductBatch(t.Context(), orders) {
			require.NoError(t, r.Err)
		}
	}
}

// An audit reads the journal in pages of 1000 entries. When another process
// writes a checkpoint and trims the journal between two of those reads (here
// the auditor's link answers 400ms late, and the checkpoint and trim run in
// that gap on a link without delay), the audit starts over from the new
// checkpoint instead of reporting drift that is not there, and a Checkpoint
// whose own audit was caught so writes its checkpoint instead of refusing.
// The moment is found from the server's own count of XRANGE (a page read)
// and EXEC (the audit's first read, of the counters).
func TestAudit_checkpointAndTrimBetweenPages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       string // Audit, Verify or Checkpoint, on the slow link
		earlier  bool   // a checkpoint before the 1,500 entries
		afterCmd string // the checkpoint and trim run once the server ran this command of the audit
	}{
		{"Verify, no checkpoint yet, between the pages", "Verify", false, "xrange"},
		{"Audit, after a checkpoint, between the pages", "Audit", true, "xrange"},
		{"Checkpoint, after a checkpoint, between the pages", "Checkpoint", true, "xrange"},
		{"Verify, no checkpoint yet, before the first page", "Verify", false, "exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.New(t, redistest.Options{})
			px := redistest.NewProxy(t, srv.Addr())
			fast := srv.Client()
			defer fast.Close()
			slowRdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
			defer slowRdb.Close()
			ctx := t.Context()
			writer := mustNew(t, fast, stock.WithReclaimInterval(0))
			defer writer.Close()
			auditor := mustNew(t, slowRdb, stock.WithReclaimInterval(0))
			defer auditor.Close()
			const sku = "race/sku"
			require.NoError(t, writer.Create(ctx, sku, 1_000_000))
			if tc.earlier {
				fill(t, writer, sku, "before", 10)
				_, err := writer.Checkpoint(ctx, sku)
				require.NoError(t, err)
			}
			fill(t, writer, sku, "since", 1500)
			require.NoError(t, auditor.Verify(ctx, sku), "quiet books audit clean")

			px.SetLatency(400 * time.Millisecond)
			before := commandCalls(t, fast, tc.afterCmd)
			result := make(chan error, 1)
			go func() {
				switch tc.op {
				case "Audit":
					rep, err := auditor.Audit(ctx, sku)
					if err == nil {
						err = rep.Err()
					}
					result <- err
				case "Verify":
					result <- auditor.Verify(ctx, sku)
				case "Checkpoint":
					_, err := auditor.Checkpoint(ctx, sku)
					result <- err
				}
			}()
			waitFor(t, func() bool { return commandCalls(t, fast, tc.afterCmd) > before })
			_, err := writer.Checkpoint(ctx, sku)
			require.NoError(t, err)
			n, err := writer.Trim(ctx, sku)
			require.NoError(t, err)
			require.Positive(t, n)

			require.NoError(t, <-result, "a checkpoint and a trim explain everything the audit saw change")
			px.SetLatency(0)
			require.NoError(t, writer.Verify(ctx, sku))
		})
	}
}

// TestAudit_besideCheckpointsConcurrentSafe runs audits over a slow link
// for a few seconds while other processes sell and checkpoint and trim the
// same SKUs; TestChaos_auditBesideCheckpoints does it for a minute.
func TestAudit_besideCheckpointsConcurrentSafe(t *testing.T) {
	auditBesideCheckpoints(t, 3*time.Second)
}

func TestChaos_auditBesideCheckpoints(t *testing.T) {
	auditBesideCheckpoints(t, time.Duration(redistest.Chaos(t))*time.Minute)
}

// auditBesideCheckpoints: writers sell units of three SKUs (one split into
// four buckets), a checkpointer runs Checkpoint and Trim on them in a
// loop, and auditors over a link 20ms slow run Audit, Verify and
// Checkpoint on them (reading 50 entries per page), for d. No audit reports a problem and no Checkpoint
// refuses (an audit may give up, without a finding, when checkpoints keep
// coming: it says to call again). Halfway through, a fourth SKU, sold and
// checkpointed the same way and audited clean until then, gets real drift
// (a level changed behind the scripts' back): from then on every audit of
// it reports it and every Checkpoint of it refuses.
func auditBesideCheckpoints(t *testing.T, d time.Duration) {
	defer stock.SetAuditPageForTest(50)() // many pages per audit, each a chance for a checkpoint to come between
	srv := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, srv.Addr())
	px.SetLatency(20 * time.Millisecond)
	fast := srv.Client()
	defer fast.Close()
	slowRdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
	defer slowRdb.Close()
	ctx := t.Context()
	writer := mustNew(t, fast, stock.WithReclaimInterval(0))
	defer writer.Close()
	auditor := mustNew(t, slowRdb, stock.WithReclaimInterval(0))
	defer auditor.Close()
	clean := []string{"soak/a", "soak/b", "soak/hot"}
	const victim = "soak/victim"
	for _, sku := range append(clean, victim) {
		var opts []stock.SKUOption
		if sku == "soak/hot" {
			opts = append(opts, stock.WithBuckets(4))
		}
		require.NoError(t, writer.Create(ctx, sku, 1<<40, opts...))
	}

	var (
		stop     atomic.Bool
		drifted  atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		audits   atomic.Int64
		gaveUp   atomic.Int64
		ckpts    atomic.Int64
		refusals atomic.Int64 // Checkpoints of the victim refused after the drift
		caught   atomic.Int64 // audits of the victim that reported the drift
		victimOK atomic.Int64 // clean audits of the victim before the drift
		fail     = func(format string, a ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(format, a...))
			mu.Unlock()
		}
		isGiveUp  = func(err error) bool { return err != nil && strings.Contains(err.Error(), "call again") }
		allSKUs   = append(append([]string{}, clean...), victim)
		deadline  = time.Now().Add(d)
		driftTime = time.Now().Add(d / 2)
	)
	// Writers: orders of every SKU, in batches so that checkpoints have
	// hundreds of entries behind them.
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				var orders []stock.Order
				for k := range 50 {
					buyer := fmt.Sprintf("w%d-%d-%d", w, i, k)
					orders = append(orders, order("o-"+buyer, buyer, allSKUs[(i+k)%len(allSKUs)], 1))
				}
				for _, r := range writer.DeductBatch(ctx, orders) {
					if r.Err != nil && !stop.Load() {
						fail("deduct: %v", r.Err)
					}
				}
			}
		})
	}
	// The checkpointer.
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			sku := allSKUs[i%len(allSKUs)]
			_, err := writer.Checkpoint(ctx, sku)
			switch {
			case sku == victim && drifted.Load() && errors.Is(err, stock.ErrMismatch):
				refusals.Add(1)
			case isGiveUp(err):
			case err != nil:
				fail("checkpoint %s: %v", sku, err)
			default:
				ckpts.Add(1)
			}
			if _, err := writer.Trim(ctx, sku); err != nil {
				fail("trim %s: %v", sku, err)
			}
			time.Sleep(50 * time.Millisecond) // each SKU about every 250ms
		}
	})
	// Auditors on the slow link.
	for a := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				sku := allSKUs[(a+i)%len(allSKUs)]
				wasDrifted := drifted.Load()
				var err error
				switch (a + i) % 3 {
				case 0:
					var rep stock.AuditReport
					if rep, err = auditor.Audit(ctx, sku); err == nil {
						err = rep.Err()
					}
				case 1:
					err = auditor.Verify(ctx, sku)
				case 2:
					_, err = auditor.Checkpoint(ctx, sku)
				}
				audits.Add(1)
				switch {
				case isGiveUp(err):
					gaveUp.Add(1)
				case sku == victim && wasDrifted:
					if errors.Is(err, stock.ErrMismatch) {
						caught.Add(1)
					} else {
						fail("the drift of %s went unreported: %v", sku, err)
					}
				case err != nil && sku == victim && drifted.Load():
					// The drift came while this audit ran: either answer is right.
				case err != nil:
					fail("false report on %s (drift not yet injected: %v): %v", sku, sku == victim, err)
				case sku == victim:
					victimOK.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Until(driftTime))
	require.NoError(t, fast.HIncrBy(ctx, "redkit:stock:v1:{soak}:sku:"+victim, "available", 1).Err())
	require.NoError(t, fast.HIncrBy(ctx, "redkit:stock:v1:{soak}:sku:"+victim, "supply", 1).Err())
	drifted.Store(true)
	time.Sleep(time.Until(deadline))
	// Each auditor checks the victim at least once more after the drift.
	waitFor(t, func() bool { return caught.Load() >= 1 && refusals.Load() >= 1 })
	stop.Store(true)
	wg.Wait()
	require.Empty(t, failures)
	t.Logf("%d audits (%d gave up while checkpoints kept coming), %d checkpoints written, "+
		"victim: %d clean audits before the drift, %d reporting it after, %d checkpoints refused",
		audits.Load(), gaveUp.Load(), ckpts.Load(), victimOK.Load(), caught.Load(), refusals.Load())
	for _, sku := range clean {
		require.NoError(t, writer.Verify(ctx, sku))
	}
	require.ErrorIs(t, writer.Verify(ctx, victim), stock.ErrMismatch)
}
