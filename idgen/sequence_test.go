package idgen_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/health"
	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

func TestSequence_Next_strictlyIncreasing_ConcurrentSafe(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const workers, each = 8, 500
	var gens []idgen.Generator
	for w := 0; w < workers; w++ {
		seq, err := idgen.NewSequence(rdb, "orders/seq") // one per goroutine: the key is shared
		require.NoError(t, err)
		gens = append(gens, seq)
	}
	all := drain(t, gens, 1, each)
	require.Len(t, all, workers*each)
	requireUnique(t, all)
	for _, v := range all { // one INCR per value: exactly 1..N, no gaps
		require.True(t, v >= 1 && v <= workers*each, v)
	}
	require.Equal(t, "4000", rdb.Get(t.Context(), "redkit:idgen:v1:{orders}:seq:orders/seq").Val())
}

func TestSequence_Next_counterBehind_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	seq, err := idgen.NewSequence(rdb, "fence", idgen.WithKeyPrefix("t1"))
	require.NoError(t, err)
	var last idgen.ID
	for i := 0; i < 10; i++ {
		last, err = seq.Next(t.Context())
		require.NoError(t, err)
	}
	require.Equal(t, idgen.ID(10), last)
	// The counter goes backwards (deleted, or lost in a failover).
	require.NoError(t, rdb.Set(t.Context(), "t1:idgen:v1:{fence}:seq:fence", 3, 0).Err())
	id, err := seq.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, idgen.ID(11), id)
	require.Equal(t, "11", rdb.Get(t.Context(), "t1:idgen:v1:{fence}:seq:fence").Val())
}

func TestSequence_Next_badCounter(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	key := "redkit:idgen:v1:{x}:seq:x"
	seq, err := idgen.NewSequence(rdb, "x")
	require.NoError(t, err)
	require.NoError(t, rdb.Set(t.Context(), key, "abc", 0).Err())
	_, err = seq.Next(t.Context())
	require.ErrorContains(t, err, "integer")
	require.NoError(t, rdb.Set(t.Context(), key, "9007199254740991", 0).Err())
	_, err = seq.Next(t.Context())
	require.ErrorIs(t, err, idgen.ErrExhausted)
	require.Equal(t, "9007199254740991", rdb.Get(t.Context(), key).Val())
}

func TestSequence_Check_reportsRiskySettings(t *testing.T) {
	s := redistest.New(t, redistest.Options{}) // no AOF, no snapshots
	seq, err := idgen.NewSequence(s.Client(), "chk")
	require.NoError(t, err)
	rep, err := seq.Check(t.Context())
	require.NoError(t, err)
	require.Equal(t, "critical", strings.ToLower(rep.Worst().String()))

	safe := redistest.New(t, redistest.Options{AOF: true, AppendFsync: "always"})
	seg, err := idgen.NewSegment(safe.Client(), "chk")
	require.NoError(t, err)
	defer seg.Close()
	rep, err = seg.Check(t.Context())
	require.NoError(t, err)
	require.NoError(t, rep.Err(health.Warning))
}
