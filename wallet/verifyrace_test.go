package wallet_test

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
	"github.com/redkit-go/redkit/wallet"
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

// Verify reads the journal in pages of MaxPage entries; a Checkpoint (which
// trims) by another process between two of those reads, or between the
// first read of the account and the first page, makes it start over from
// the new checkpoint, never report drift. The auditor's link answers 400ms
// late; the checkpoint runs in that gap on a link without delay, once the
// server has run the audit's XRANGE (a page) or EVALSHA (its first read).
// Checkpoint's own verification is caught the same way and still writes.
func TestVerify_checkpointBetweenPages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool   // the slow call is a Checkpoint, not a Verify
		earlier    bool   // a checkpoint before the 1,500 entries
		afterCmd   string // the other checkpoint runs once the server ran this command of the slow call
	}{
		{"Verify, no checkpoint yet, between the pages", false, false, "xrange"},
		{"Verify, after a checkpoint, between the pages", false, true, "xrange"},
		{"Checkpoint, after a checkpoint, between the pages", true, true, "xrange"},
		{"Verify, after a checkpoint, before the first page", false, true, "evalsha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.New(t, redistest.Options{})
			px := redistest.NewProxy(t, srv.Addr())
			fast := srv.Client()
			defer fast.Close()
			slowRdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
			defer slowRdb.Close()
			ctx := t.Context()
			writer := mustNew(t, fast)
			defer writer.Close()
			auditor := mustNew(t, slowRdb)
			defer auditor.Close()
			const acct = "race/a"
			openFunded(t, writer, map[string]int64{acct: 0})
			credit := func(from, to int) {
				for i := from; i < to; i++ {
					_, err := writer.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c-%d", i), Account: acct, Amount: 1})
					require.NoError(t, err)
				}
			}
			if tc.earlier {
				credit(0, 10)
				_, _, err := writer.Checkpoint(ctx, acct)
				require.NoError(t, err)
			}
			credit(10, 1510)
			require.NoError(t, auditor.Verify(ctx, acct))

			px.SetLatency(400 * time.Millisecond)
			before := commandCalls(t, fast, tc.afterCmd)
			result := make(chan error, 1)
			go func() {
				if tc.checkpoint {
					_, _, err := auditor.Checkpoint(ctx, acct)
					result <- err
					return
				}
				result <- auditor.Verify(ctx, acct)
			}()
			waitFor(t, func() bool { return commandCalls(t, fast, tc.afterCmd) > before })
			_, trimmed, err := writer.Checkpoint(ctx, acct)
			require.NoError(t, err)
			require.Positive(t, trimmed)
			require.NoError(t, <-result, "a checkpoint explains everything the verification saw change")
			px.SetLatency(0)
			require.NoError(t, writer.Verify(ctx, acct))
		})
	}
}

// TestVerify_besideCheckpointsConcurrentSafe runs Verify and Checkpoint
// over a slow link for a few seconds while other processes post and
// checkpoint the same accounts; TestChaos_verifyBesideCheckpoints does it
// for a minute.
func TestVerify_besideCheckpointsConcurrentSafe(t *testing.T) {
	verifyBesideCheckpoints(t, 3*time.Second)
}

func TestChaos_verifyBesideCheckpoints(t *testing.T) {
	verifyBesideCheckpoints(t, time.Duration(redistest.Chaos(t))*time.Minute)
}

// verifyBesideCheckpoints: writers transfer between three accounts of one
// group, a checkpointer runs Checkpoint on them in a loop, and verifiers
// over a link 20ms slow run Verify and Checkpoint on them, for d. None
// reports a mismatch (one may give up, saying to call again, while
// checkpoints or, for a Checkpoint, postings keep coming). Halfway through, a fourth account, posted to
// and checkpointed the same way, gets real drift (its posted balance
// changed behind the scripts' back): from then on every Verify of it
// reports it and every Checkpoint of it refuses.
func verifyBesideCheckpoints(t *testing.T, d time.Duration) {
	srv := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, srv.Addr())
	px.SetLatency(20 * time.Millisecond)
	fast := srv.Client()
	defer fast.Close()
	slowRdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
	defer slowRdb.Close()
	ctx := t.Context()
	writer := mustNew(t, fast)
	defer writer.Close()
	auditor := mustNew(t, slowRdb)
	defer auditor.Close()
	clean := []string{"soak/a", "soak/b", "soak/c"}
	const victim = "soak/victim"
	all := append(append([]string{}, clean...), victim)
	funds := map[string]int64{}
	for _, a := range all {
		funds[a] = 1 << 40
	}
	openFunded(t, writer, funds)

	var (
		stop, drifted                   atomic.Bool
		wg                              sync.WaitGroup
		mu                              sync.Mutex
		failures                        []string
		verified, gaveUp, caught, ckpts atomic.Int64
		fail                            = func(format string, a ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(format, a...))
			mu.Unlock()
		}
		isGiveUp = func(err error) bool { return err != nil && strings.Contains(err.Error(), "call again") }
	)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				var ts []wallet.Transfer
				for k := range 20 {
					ts = append(ts, wallet.Transfer{ID: fmt.Sprintf("t%d-%d-%d", w, i, k),
						From: all[(i+k)%len(all)], To: all[(i+k+1)%len(all)], Amount: 1})
				}
				for _, r := range writer.TransferBatch(ctx, ts) {
					if r.Err != nil && !stop.Load() {
						fail("transfer: %v", r.Err)
					}
				}
				// Gaps: a Checkpoint writes only when nothing was posted
				// between its verification and its script.
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			a := all[i%len(all)]
			_, _, err := writer.Checkpoint(ctx, a)
			switch {
			case a == victim && drifted.Load() && errors.Is(err, wallet.ErrMismatch):
			case isGiveUp(err):
			case err != nil:
				fail("checkpoint %s: %v", a, err)
			default:
				ckpts.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	for v := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				a := all[(v+i)%len(all)]
				wasDrifted := drifted.Load()
				var err error
				if (v+i)%2 == 0 {
					err = auditor.Verify(ctx, a)
				} else {
					_, _, err = auditor.Checkpoint(ctx, a)
				}
				verified.Add(1)
				switch {
				case isGiveUp(err):
					gaveUp.Add(1)
				case a == victim && wasDrifted:
					if errors.Is(err, wallet.ErrMismatch) {
						caught.Add(1)
					} else {
						fail("the drift of %s went unreported: %v", a, err)
					}
				case err != nil && a == victim && drifted.Load():
				case err != nil:
					fail("false report on %s: %v", a, err)
				}
			}
		})
	}
	time.Sleep(d / 2)
	require.NoError(t, fast.HIncrBy(ctx, "redkit:wallet:v2:{soak}:acct:"+victim, "posted", 1).Err())
	drifted.Store(true)
	time.Sleep(d / 2)
	waitFor(t, func() bool { return caught.Load() >= 1 })
	stop.Store(true)
	wg.Wait()
	require.Empty(t, failures)
	t.Logf("%d verifications (%d gave up: postings or checkpoints kept coming), %d checkpoints written, %d reported the drift",
		verified.Load(), gaveUp.Load(), ckpts.Load(), caught.Load())
	for _, a := range clean {
		require.NoError(t, writer.Verify(ctx, a))
	}
	require.ErrorIs(t, writer.Verify(ctx, victim), wallet.ErrMismatch)
}
