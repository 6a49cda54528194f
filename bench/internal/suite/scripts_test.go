package suite

import (
	"bytes"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// TestMeasureScripts_everyScript runs every script case a few times on a
// server of its own: each must succeed, be counted once per call as an
// EVALSHA, and take some server time.
func TestMeasureScripts_everyScript(t *testing.T) {
	srv := redistest.New(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	const calls = 20
	costs := MeasureScripts(t.Context(), rdb, calls, nil)
	cases, done := scriptCases()
	done()
	require.Len(t, costs, len(cases))
	for _, c := range costs {
		name := c.Group + "/" + c.Name
		require.Empty(t, c.Failed, name)
		// A call may run its script twice (a refusal that asks to be sent
		// again after a sweep), never less than once.
		require.GreaterOrEqual(t, c.Calls, int64(calls), name)
		require.Positive(t, c.USec, name)
	}
	var buf bytes.Buffer
	require.NoError(t, WriteScriptTable(&buf, costs))
	require.Contains(t, buf.String(), "stock/Deduct (1 item)")
	require.NotContains(t, buf.String(), "FAILED")
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=123,usec_per_call=12.30,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=4,usec=8,usec_per_call=2.00\r\n"
	got := parseCommandStats(info)
	require.Equal(t, map[string]cmdStat{"evalsha": {10, 123}, "get": {4, 8}}, got)
}
