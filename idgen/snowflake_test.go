package idgen_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

func TestSnowflake_Next_bwmarrinLayout(t *testing.T) {
	sf, err := idgen.NewSnowflake(777)
	require.NoError(t, err)
	defer sf.Close()
	before := time.Now().UnixMilli()
	id, err := sf.Next(t.Context())
	require.NoError(t, err)
	after := time.Now().UnixMilli()
	sid := id.Snowflake()
	require.Equal(t, int64(777), sid.Node())
	require.GreaterOrEqual(t, sid.Time(), before-1)
	require.LessOrEqual(t, sid.Time(), after+1)
	parsed, err := snowflake.ParseString(id.String())
	require.NoError(t, err)
	require.Equal(t, sid, parsed)
	require.Equal(t, int64(777), sf.Node())
}

func TestSnowflake_Next_uniqueIncreasing_ConcurrentSafe(t *testing.T) {
	sf, err := idgen.NewSnowflake(1)
	require.NoError(t, err)
	defer sf.Close()
	all := drain(t, []idgen.Generator{sf}, 8, 25_000) // 200,000 IDs: > 4,096 per ms, so sequences run out
	requireUnique(t, all)
	for _, v := range all {
		require.Equal(t, int64(1), idgen.ID(v).SnowflakeNode())
	}
}

// A clock that jumps backwards (a wall-clock step seen by a custom time
// source) makes Next wait for it to catch up, never repeat an ID.
func TestSnowflake_Next_clockJumpsBack_noDuplicate(t *testing.T) {
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	sf, err := idgen.NewSnowflake(3, idgen.WithClock(clock))
	require.NoError(t, err)
	var ids []int64
	for i := 0; i < 20_000; i++ {
		if i == 10_000 {
			offset.Store(int64(-30 * time.Millisecond))
		}
		id, err := sf.Next(t.Context())
		require.NoError(t, err)
		ids = append(ids, id.Int64())
	}
	requireIncreasing(t, ids)
	require.NoError(t, sf.Close())
	_, err = sf.Next(t.Context())
	require.ErrorIs(t, err, idgen.ErrClosed)
}

func TestSnowflake_new_badNode(t *testing.T) {
	for _, n := range []int64{-1, 1024, 1 << 40} {
		_, err := idgen.NewSnowflake(n)
		require.ErrorIs(t, err, idgen.ErrInvalid, n)
	}
	_, err := idgen.NewSnowflake(1023)
	require.NoError(t, err)
}

func nodeTable(service string) string { return "redkit:idgen:v1:{" + service + "}:nodes:" + service }

func TestLeasedSnowflake_concurrentStarters_distinctNodes(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const n = 64
	gens := make([]*idgen.Snowflake, n)
	var wg sync.WaitGroup
	for i := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "checkout")
			if err != nil {
				t.Error(err)
				return
			}
			gens[i] = sf
		}()
	}
	wg.Wait()
	nodes := map[int64]bool{}
	var all []int64
	for _, sf := range gens {
		require.NotNil(t, sf)
		nodes[sf.Node()] = true
		for j := 0; j < 100; j++ {
			id, err := sf.Next(t.Context())
			require.NoError(t, err)
			require.Equal(t, sf.Node(), id.SnowflakeNode())
			all = append(all, id.Int64())
		}
	}
	require.Len(t, nodes, n)
	requireUnique(t, all)
	for _, sf := range gens {
		require.NoError(t, sf.Close())
	}
	require.Equal(t, int64(n), rdb.HLen(t.Context(), nodeTable("checkout")).Val())
	ttl := rdb.PTTL(t.Context(), nodeTable("checkout")).Val()
	require.Greater(t, ttl, time.Hour, "the table is retained, with a TTL")
}

func TestLeasedSnowflake_fullTable_thenClockBehind(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	ctx := t.Context()
	gens := make([]*idgen.Snowflake, 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < 1024; i = next.Add(1) - 1 {
				sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "full", idgen.WithLeaseTTL(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				gens[i] = sf
			}
		}()
	}
	wg.Wait()
	defer func() {
		var wg sync.WaitGroup
		for _, sf := range gens {
			if sf != nil {
				wg.Go(func() { _ = sf.Close() })
			}
		}
		wg.Wait()
	}()
	require.False(t, t.Failed())
	_, err := idgen.NewLeasedSnowflake(ctx, rdb, "full")
	require.ErrorIs(t, err, idgen.ErrNoFreeNode)

	// One process issues IDs, then stops: its node is the only free one.
	old := gens[500]
	var last idgen.ID
	for i := 0; i < 10; i++ {
		last, err = old.Next(ctx)
		require.NoError(t, err)
	}
	node := old.Node()
	require.NoError(t, old.Close())
	gens[500] = nil

	// A restart whose clock is 10s behind the node's high-water mark refuses.
	behind := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(-d) } }
	_, err = idgen.NewLeasedSnowflake(ctx, rdb, "full", idgen.WithClock(behind(10*time.Second)))
	require.ErrorIs(t, err, idgen.ErrClockBehind)
	_, err = idgen.NewLeasedSnowflake(ctx, rdb, "full", idgen.WithClock(behind(10*time.Second)),
		idgen.WithMaxClockWait(0))
	require.ErrorIs(t, err, idgen.ErrClockBehind)

	// One 300ms behind waits for its clock, then never goes below the old IDs.
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "full", idgen.WithClock(behind(300*time.Millisecond)))
	require.NoError(t, err)
	gens[500] = sf
	require.Equal(t, node, sf.Node())
	id, err := sf.Next(ctx)
	require.NoError(t, err)
	require.Greater(t, id, last)
}

// issuedOnce returns a leased Snowflake of service on rdb that issued one ID
// and was closed, and the node it held.
func issuedOnce(t *testing.T, rdb redis.UniversalClient, service string) (*idgen.Snowflake, int64) {
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, service)
	require.NoError(t, err)
	_, err = sf.Next(t.Context())
	require.NoError(t, err)
	node := sf.Node()
	require.NoError(t, sf.Close())
	return sf, node
}

func TestLeasedSnowflake_restartClockBehind_picksSafeNode(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	_, node := issuedOnce(t, rdb, "svc")

	// The restarted process is 10s behind: the node's IDs are ahead of its
	// clock, so it leases a node that never issued later IDs, without waiting.
	for i := 0; i < 20; i++ {
		b, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "svc", idgen.WithMaxClockWait(0),
			idgen.WithClock(func() time.Time { return time.Now().Add(-10 * time.Second) }))
		require.NoError(t, err)
		defer b.Close()
		require.NotEqual(t, node, b.Node())
	}
}

func TestLeasedSnowflake_pausedRedis_ErrLeaseLostBeforeExpiry(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	const ttl = time.Second
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "paused", idgen.WithLeaseTTL(ttl))
	require.NoError(t, err)
	defer sf.Close()
	var ids []int64
	for i := 0; i < 100; i++ {
		id, err := sf.Next(t.Context())
		require.NoError(t, err)
		ids = append(ids, id.Int64())
	}

	require.NoError(t, s.Pause())
	paused := time.Now()
	// Every renewal the server processed was before paused, so the lease
	// expires in Redis by paused+ttl: no ID may be issued by a call that
	// starts after that.
	expiresNoSoonerThan := paused.Add(ttl)
	var lost error
	for lost == nil {
		start := time.Now()
		id, err := sf.Next(t.Context())
		if err != nil {
			lost = err
			break
		}
		if !start.Before(expiresNoSoonerThan) {
			t.Fatalf("ID issued after the lease could have expired")
		}
		ids = append(ids, id.Int64())
		time.Sleep(time.Millisecond)
	}
	require.ErrorIs(t, lost, idgen.ErrLeaseLost)
	require.NoError(t, s.Resume())
	require.Eventually(t, func() bool {
		id, err := sf.Next(t.Context())
		if err != nil {
			return false
		}
		ids = append(ids, id.Int64())
		return true
	}, 30*time.Second, 10*time.Millisecond)
	requireUnique(t, ids)
}

func TestLeasedSnowflake_takenOver_releasesAndRecovers(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "stolen", idgen.WithLeaseTTL(time.Second))
	require.NoError(t, err)
	defer sf.Close()
	first, err := sf.Next(t.Context())
	require.NoError(t, err)
	node := sf.Node()
	// Another owner holds the node now (its lease was taken after expiry).
	far := time.Now().Add(time.Hour).UnixMilli()
	require.NoError(t, rdb.HSet(t.Context(), nodeTable("stolen"), itoa(node),
		"ffffffffffffffff|"+itoa(far)+"|0|0").Err())
	// The next renewal finds the node taken: Next fails closed (briefly)
	// and the generator moves to another node by itself.
	var id idgen.ID
	require.Eventually(t, func() bool {
		id, err = sf.Next(t.Context())
		if err != nil {
			assert.ErrorIs(t, err, idgen.ErrLeaseLost)
			return false
		}
		return id.SnowflakeNode() != node
	}, 30*time.Second, time.Millisecond)
	require.NotEqual(t, node, sf.Node())
	require.NotEqual(t, first, id)
}

func TestLeasedSnowflake_Close_releases(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	a, node := issuedOnce(t, rdb, "rel")
	require.NoError(t, a.Close())
	_, err := a.Next(t.Context())
	require.ErrorIs(t, err, idgen.ErrClosed)
	v := rdb.HGet(t.Context(), nodeTable("rel"), itoa(node)).Val()
	require.Regexp(t, `^\|0\|\d+\|\d+$`, v, "released, high-water kept")
}

// The node table disappears (FLUSHALL, a failover that lost it): the
// generator writes its entry back at its next renewal and keeps its node,
// and never repeats an ID.
func TestLeasedSnowflake_tableLost_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	// A clock 1000 times slow: the re-lease happens within the millisecond
	// of the last IDs issued before it.
	start := time.Now()
	slow := func() time.Time { return start.Add(time.Since(start) / 1000) }
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "flushed", idgen.WithLeaseTTL(time.Second),
		idgen.WithClock(slow))
	require.NoError(t, err)
	defer sf.Close()
	node := sf.Node()
	var ids []int64
	for i := 0; i < 1000; i++ {
		id, err := sf.Next(t.Context())
		require.NoError(t, err)
		ids = append(ids, id.Int64())
	}
	require.NoError(t, rdb.FlushAll(t.Context()).Err())
	// Keep issuing while the next renewal finds the lease gone and re-leases.
	require.Eventually(t, func() bool {
		released := rdb.Exists(t.Context(), nodeTable("flushed")).Val() == 1
		id, err := sf.Next(t.Context())
		if err != nil {
			assert.ErrorIs(t, err, idgen.ErrLeaseLost)
			return false
		}
		ids = append(ids, id.Int64())
		return released
	}, 30*time.Second, 10*time.Millisecond)
	for i := 0; i < 1000; i++ {
		id, err := sf.Next(t.Context())
		require.NoError(t, err)
		ids = append(ids, id.Int64())
	}
	require.Equal(t, node, sf.Node(), "the same node again")
	requireIncreasing(t, ids)
}

func TestSnowflake_Lease_staticNode(t *testing.T) {
	sf, err := idgen.NewSnowflake(42)
	require.NoError(t, err)
	require.Equal(t, idgen.LeaseStatus{Node: 42}, sf.Lease())
	require.NoError(t, sf.Close())
	require.Equal(t, idgen.LeaseStatus{Node: -1}, sf.Lease())
}

// tableHighWater reads a node's high-water mark from the node table, in ID
// time.
func tableHighWater(t *testing.T, rdb redis.UniversalClient, service string, node int64) time.Time {
	t.Helper()
	v, err := rdb.HGet(t.Context(), nodeTable(service), itoa(node)).Result()
	require.NoError(t, err)
	f := strings.Split(v, "|")
	require.Len(t, f, 4, v)
	hw, err := strconv.ParseInt(f[2], 10, 64)
	require.NoError(t, err)
	return time.UnixMilli(idgen.Epoch + hw)
}

func TestLeasedSnowflake_Lease_matchesTable(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const ttl = time.Hour // no renewal during the test
	before := time.Now()
	sf, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "status", idgen.WithLeaseTTL(ttl))
	require.NoError(t, err)
	defer sf.Close()
	id, err := sf.Next(t.Context())
	require.NoError(t, err)

	st := sf.Lease()
	require.Equal(t, "status", st.Service)
	require.Equal(t, sf.Node(), st.Node)
	require.True(t, st.Leased)
	require.Equal(t, ttl, st.TTL)
	require.NoError(t, st.Err)
	require.False(t, st.Renewed.Before(before.Truncate(time.Millisecond)), "renewed %v, before the start %v", st.Renewed, before)
	require.False(t, st.Renewed.After(time.Now()))
	require.True(t, st.Until.Equal(st.Renewed.Add(ttl-ttl/10)), "until %v, renewed %v", st.Until, st.Renewed)
	require.True(t, st.HighWater.Equal(tableHighWater(t, rdb, "status", st.Node)), "high-water %v", st.HighWater)
	require.False(t, id.SnowflakeTime().After(st.HighWater))

	require.NoError(t, sf.Close())
	st = sf.Lease()
	require.Equal(t, idgen.LeaseStatus{Service: "status", Node: -1, Leased: true, TTL: ttl}, st)
}

// Until moves with each renewal. While Redis does not answer, it stays put,
// Err says why, and Next fails from Until on; once Redis is back, both
// recover.
func TestLeasedSnowflake_Lease_renewals(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	ctx := t.Context()
	sf, err := idgen.NewLeasedSnowflake(ctx, rdb, "renewals", idgen.WithLeaseTTL(time.Second))
	require.NoError(t, err)
	defer sf.Close()
	first := sf.Lease()
	require.NoError(t, first.Err)
	var renewed idgen.LeaseStatus
	require.Eventually(t, func() bool {
		renewed = sf.Lease()
		return renewed.Renewed.After(first.Renewed)
	}, 30*time.Second, 10*time.Millisecond)
	require.True(t, renewed.Until.After(first.Until), "until %v after a renewal, %v before", renewed.Until, first.Until)
	require.True(t, renewed.HighWater.After(first.HighWater))
	require.Equal(t, first.Node, renewed.Node)
	require.NoError(t, renewed.Err)
	// The table agrees once no renewal runs between the two reads.
	require.Eventually(t, func() bool {
		a := sf.Lease()
		hw := tableHighWater(t, rdb, "renewals", a.Node)
		return sf.Lease().Renewed.Equal(a.Renewed) && hw.Equal(a.HighWater)
	}, 30*time.Second, time.Millisecond)

	require.NoError(t, s.Pause())
	for {
		_, err := sf.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, idgen.ErrLeaseLost)
			break
		}
		time.Sleep(time.Millisecond)
	}
	failed := time.Now()
	st := sf.Lease()
	require.Equal(t, first.Node, st.Node, "the node is kept while renewal fails")
	require.False(t, failed.Before(st.Until), "Next failed at %v, before Until %v", failed, st.Until)
	require.Eventually(t, func() bool { return sf.Lease().Err != nil }, 30*time.Second, 10*time.Millisecond)
	require.True(t, sf.Lease().Until.Equal(st.Until), "Until moved without a renewal")

	require.NoError(t, s.Resume())
	require.Eventually(t, func() bool {
		now := sf.Lease()
		return now.Err == nil && now.Until.After(st.Until)
	}, 30*time.Second, 10*time.Millisecond)
	_, err = sf.Next(ctx)
	require.NoError(t, err)
}
