package wallet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// TestMemory_perPosting measures what a posting leaves in Redis
// (MEMORY USAGE ... SAMPLES 0): the marker of a Debit and of a same-group
// Transfer, and a journal entry, after 2,000 of each with key prefix "m",
// group "g" and 14-byte transaction IDs. The README's wallet memory row
// comes from it:
//
//	go test -count=1 -run '^TestMemory_perPosting$' -v ./wallet/
//
// A marker is stored as a string (the hash form took 248 B per Debit and
// 280 B per Transfer); the test fails if one is a hash or grows past 200 B
// (Debit) or 240 B (Transfer).
func TestMemory_perPosting(t *testing.T) {
	const n = 2000
	srv := redistest.New(t, redistest.Options{}) // nothing else in its memory
	rdb := srv.Client()
	ctx := t.Context()
	led, err := wallet.New(rdb, wallet.WithKeyPrefix("m"))
	require.NoError(t, err)
	defer led.Close()
	for _, a := range []string{"g/alice", "g/bob"} {
		require.NoError(t, led.Open(ctx, a, wallet.WithCurrency("EUR")))
	}
	_, err = led.Credit(ctx, wallet.Tx{ID: "topup-0000001", Account: "g/alice", Amount: 1 << 40})
	require.NoError(t, err)

	var ts []wallet.Transfer
	for i := range n {
		_, err := led.Debit(ctx, wallet.Tx{ID: fmt.Sprintf("debit-%08d", i), Account: "g/alice", Amount: 1})
		require.NoError(t, err)
		ts = append(ts, wallet.Transfer{ID: fmt.Sprintf("xfer-%09d", i), From: "g/alice", To: "g/bob", Amount: 1})
	}
	for i := 0; i < n; i += 100 {
		for _, r := range led.TransferBatch(ctx, ts[i:i+100]) {
			require.NoError(t, r.Err)
		}
	}

	perKey := func(format string) float64 {
		t.Helper()
		var sum int64
		for i := range n {
			key := "m:wallet:v2:{g}:tx:" + fmt.Sprintf(format, i)
			require.Equal(t, "string", rdb.Type(ctx, key).Val(), key)
			b, err := rdb.MemoryUsage(ctx, key, 0).Result()
			require.NoError(t, err)
			sum += b
		}
		return float64(sum) / n
	}
	debit, transfer := perKey("debit-%08d"), perKey("xfer-%09d")
	t.Logf("marker per Debit %.0f B, per Transfer %.0f B", debit, transfer)
	for _, a := range []string{"g/alice", "g/bob"} {
		key := "m:wallet:v2:{g}:journal:" + a
		stream, err := rdb.MemoryUsage(ctx, key, 0).Result()
		require.NoError(t, err)
		entries := rdb.XLen(ctx, key).Val()
		t.Logf("journal of %s: %.0f B per entry (%d B for %d entries)", a, float64(stream)/float64(entries), stream, entries)
	}
	require.LessOrEqual(t, debit, 200.0)
	require.LessOrEqual(t, transfer, 240.0)
}
