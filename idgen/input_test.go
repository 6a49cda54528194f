package idgen_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

func TestNew_badInput_nothingWritten(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	ctx := t.Context()
	badNames := []string{"", " ", "a b", "{tag}", "a*", "/a", "a/", "a/b/c", strings.Repeat("x", 129), "é"}
	for _, name := range badNames {
		_, err := idgen.NewSequence(rdb, name)
		require.ErrorIs(t, err, idgen.ErrInvalid, "sequence %q", name)
		_, err = idgen.NewSegment(rdb, name)
		require.ErrorIs(t, err, idgen.ErrInvalid, "segment %q", name)
		_, err = idgen.NewLeasedSnowflake(ctx, rdb, name)
		require.ErrorIs(t, err, idgen.ErrInvalid, "snowflake %q", name)
	}
	badCounterOpts := [][]idgen.Option{
		{idgen.WithMinStep(0)}, {idgen.WithMinStep(-5)}, {idgen.WithMaxStep(0)},
		{idgen.WithMinStep(1 << 54)}, {idgen.WithMinStep(100), idgen.WithMaxStep(10)},
		{idgen.WithFetchTimeout(0)}, {idgen.WithFetchTimeout(-time.Second)}, {idgen.WithFetchTimeout(time.Hour)},
		{idgen.WithReplicaAckTimeout(0)}, {idgen.WithReplicaAckTimeout(time.Hour)},
		{idgen.WithKeyPrefix("")}, {idgen.WithKeyPrefix("a:b")}, {idgen.WithKeyPrefix("{x}")},
	}
	for i, opts := range badCounterOpts {
		_, err := idgen.NewSegment(rdb, "ok", opts...)
		require.ErrorIs(t, err, idgen.ErrInvalid, "segment options %d", i)
		_, err = idgen.NewSequence(rdb, "ok", opts...)
		require.ErrorIs(t, err, idgen.ErrInvalid, "sequence options %d", i)
	}
	badLeaseOpts := [][]idgen.Option{
		{idgen.WithLeaseTTL(0)}, {idgen.WithLeaseTTL(-time.Second)}, {idgen.WithLeaseTTL(999 * time.Millisecond)},
		{idgen.WithLeaseTTL(2 * time.Hour)}, {idgen.WithMaxClockWait(-1)}, {idgen.WithMaxClockWait(48 * time.Hour)},
		{idgen.WithKeyPrefix("a b")},
	}
	for i, opts := range badLeaseOpts {
		_, err := idgen.NewLeasedSnowflake(ctx, rdb, "ok", opts...)
		require.ErrorIs(t, err, idgen.ErrInvalid, "lease options %d", i)
	}
	_, err := idgen.NewSegment(nil, "ok")
	require.ErrorIs(t, err, idgen.ErrInvalid)
	_, err = idgen.NewSequence(nil, "ok")
	require.ErrorIs(t, err, idgen.ErrInvalid)
	_, err = idgen.NewLeasedSnowflake(ctx, nil, "ok")
	require.ErrorIs(t, err, idgen.ErrInvalid)

	require.Zero(t, rdb.DBSize(ctx).Val(), "nothing written")
	// Creating valid generators writes nothing either until they are used.
	_, err = idgen.NewSegment(rdb, "shop-7/orders")
	require.NoError(t, err)
	_, err = idgen.NewSequence(rdb, "shop-7/orders")
	require.NoError(t, err)
	require.Zero(t, rdb.DBSize(ctx).Val())
}
