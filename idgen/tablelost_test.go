package idgen_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// issueUntil calls sf.Next about once a millisecond until stop is closed and
// returns the IDs and the errors seen.
func issueUntil(sf *idgen.Snowflake, stop <-chan struct{}) func() ([]int64, []error) {
	var ids []int64
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, err := sf.Next(context.Background())
			if err != nil {
				errs = append(errs, err)
			} else {
				ids = append(ids, id.Int64())
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() ([]int64, []error) { <-done; return ids, errs }
}

// meteredSnowflake returns a leased Snowflake of service on rdb with a
// one-second lease, closed at the end of t, and the reader of its metrics.
func meteredSnowflake(t *testing.T, rdb redis.UniversalClient, service string) (*idgen.Snowflake, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, service, idgen.WithLeaseTTL(time.Second), idgen.WithMeterProvider(mp))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sf.Close() })
	return sf, reader
}

// After the node table is lost, a running holder writes its entry back at
// its next renewal and keeps its node without failing; processes that start
// from then on never take that node.
func TestLeasedSnowflake_tableLost_holderWritesEntryBack(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	ctx := t.Context()
	h, reader := meteredSnowflake(t, rdb, "lost")
	node := h.Node()
	stop := make(chan struct{})
	results := issueUntil(h, stop)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, rdb.FlushAll(ctx).Err())
	require.Eventually(t, func() bool {
		v, err := rdb.HGet(ctx, nodeTable("lost"), itoa(node)).Result()
		return err == nil && !strings.HasPrefix(v, "|")
	}, 30*time.Second, time.Millisecond, "the holder's entry is back")
	var others []*idgen.Snowflake
	for i := 0; i < 50; i++ {
		sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "lost")
		require.NoError(t, err)
		others = append(others, sf)
		require.NotEqual(t, node, sf.Node())
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	ids, errs := results()
	require.Empty(t, errs, "the holder never failed")
	require.Equal(t, node, h.Node())
	for k, n := range leaseOps(t, reader) {
		op, outcome, _ := strings.Cut(k, "/")
		if op == "acquire" {
			require.EqualValues(t, 1, n, "leased once")
		}
		require.NotEqual(t, "lost", outcome, "no renewal found the lease lost")
	}
	requireIncreasing(t, ids)
	for _, sf := range others {
		require.NoError(t, sf.Close())
	}
}

// A process that starts right after the table was lost, before a running
// holder wrote its entry back, takes a free node picked at random: it shares
// the holder's node (and may then issue the same IDs) only by that chance,
// not every time, as taking the lowest free node did.
func TestLeasedSnowflake_tableLost_newProcessRarelySharesNode(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	ctx := t.Context()
	const trials = 3
	shared := 0
	for trial := 0; trial < trials; trial++ {
		service := "fresh" + itoa(int64(trial))
		h, err := idgen.NewLeasedSnowflake(ctx, rdb, service, idgen.WithLeaseTTL(time.Hour))
		require.NoError(t, err)
		require.NoError(t, rdb.FlushAll(ctx).Err())
		n, err := idgen.NewLeasedSnowflake(ctx, rdb, service, idgen.WithLeaseTTL(time.Hour))
		require.NoError(t, err)
		stop := make(chan struct{})
		ch, cn := issueUntil(h, stop), issueUntil(n, stop)
		time.Sleep(30 * time.Millisecond)
		close(stop)
		a, errs := ch()
		require.Empty(t, errs)
		b, errs := cn()
		require.Empty(t, errs)
		seen := map[int64]bool{}
		for _, id := range a {
			seen[id] = true
		}
		dup := 0
		for _, id := range b {
			if seen[id] {
				dup++
			}
		}
		t.Logf("trial %d: nodes %d and %d, %d of %d IDs shared", trial, h.Node(), n.Node(), dup, len(b))
		if dup > 0 {
			require.Equal(t, h.Node(), n.Node(), "IDs are shared only on a shared node")
			shared++
		}
		require.NoError(t, h.Close())
		require.NoError(t, n.Close())
	}
	require.LessOrEqual(t, shared, 1, "a node is shared by chance (1 in 1,023 per start), not every time")
}

// Free nodes are picked at random, not lowest first.
func TestLeasedSnowflake_freeNodePickedAtRandom(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	nodes := map[int64]bool{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < 20; i++ {
		wg.Go(func() {
			sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "rnd"+itoa(int64(i)))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			nodes[sf.Node()] = true
			mu.Unlock()
			_ = sf.Close()
		})
	}
	wg.Wait()
	require.Greater(t, len(nodes), 10, "20 empty tables, 20 first nodes: %v", nodes)
}

// A generator whose lease may have expired in Redis (its renewals failed
// past Until) does not write a lost entry back: someone may have taken the
// node before the table was lost. It fails closed and leases a node anew.
func TestLeasedSnowflake_tableLostAfterLeaseRanOut_leasesAnew(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	direct := s.Client()
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	h, reader := meteredSnowflake(t, rdb, "ranout")
	require.NoError(t, px.Cut(true))
	require.Eventually(t, func() bool {
		_, err := h.Next(ctx)
		return errors.Is(err, idgen.ErrLeaseLost)
	}, 30*time.Second, time.Millisecond, "the lease ran out")
	require.NoError(t, direct.FlushAll(ctx).Err())
	require.NoError(t, px.Cut(false))
	require.Eventually(t, func() bool { _, err := h.Next(ctx); return err == nil }, 30*time.Second, time.Millisecond)
	got := leaseOps(t, reader)
	require.Equal(t, int64(1), got["renew/lost"], "the renewal found the entry gone: %v", got)
	require.Equal(t, int64(2), got["acquire/ok"], "leased anew: %v", got)
}
