package wallet_test

import (
	"fmt"
	"strconv"
	"strings"
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
