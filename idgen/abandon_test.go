package idgen_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// fillTable leases every node of service but free to owners that hold them
// for an hour, and leaves free free with its high-water mark ahead of now by
// ahead: the table of a fleet with one node left, which its last holder
// used on a clock ahead of this one.
func fillTable(t *testing.T, rdb *redis.Client, service string, free int, ahead time.Duration) {
	t.Helper()
	ctx := t.Context()
	srv, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	nowMs := time.Now().UnixMilli() - idgen.Epoch
	fields := make([]any, 0, 2*1024)
	for n := range 1024 {
		v := fmt.Sprintf("%032x|%d|%d|0", n+1, srv.UnixMilli()+time.Hour.Milliseconds(), nowMs)
		if n == free {
			hw := nowMs + ahead.Milliseconds()
			v = fmt.Sprintf("|0|%d|%d", hw, hw)
		}
		fields = append(fields, fmt.Sprint(n), v)
	}
	require.NoError(t, rdb.HSet(ctx, nodeTable(service), fields...).Err())
}

// nodeOwner returns the owner of node in service's table ("" when free).
func nodeOwner(t *testing.T, rdb *redis.Client, service string, node int) string {
	v, err := rdb.HGet(t.Context(), nodeTable(service), fmt.Sprint(node)).Result()
	require.NoError(t, err)
	owner, _, _ := strings.Cut(v, "|")
	return owner
}

// NewLeasedSnowflake takes the only free node, whose high-water mark is
// 1.5s ahead, and waits for its clock; Redis is paused during the wait, so
// the renewal after it is given up at the caller's deadline. The start
// fails with the cause (not ErrLeaseLost: the node was never lost) and
// gives the node back, so the next process that starts once Redis answers
// gets it instead of ErrNoFreeNode until the lease's TTL.
func TestNewLeasedSnowflake_clockWaitThenRenewalGivenUp_releasesNode(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const service, free = "one-left", 700
	fillTable(t, rdb, service, free, 1500*time.Millisecond)

	type result struct {
		sf  *idgen.Snowflake
		err error
	}
	started := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		sf, err := idgen.NewLeasedSnowflake(ctx, rdb, service, idgen.WithLeaseTTL(30*time.Second))
		started <- result{sf, err}
	}()
	eventuallyT(t, func() bool { return nodeOwner(t, rdb, service, free) != "" }, "the free node leased")
	require.NoError(t, s.Pause()) // the start now waits for its clock
	t.Cleanup(func() { _ = s.Resume() })
	r := <-started
	require.NoError(t, s.Resume())
	require.Nil(t, r.sf)
	require.ErrorIs(t, r.err, context.DeadlineExceeded)

	var next *idgen.Snowflake
	deadline := time.Now().Add(15 * time.Second) // half the TTL: the lease has not run out by itself
	for {
		var err error
		next, err = idgen.NewLeasedSnowflake(t.Context(), rdb, service, idgen.WithLeaseTTL(30*time.Second))
		if err == nil {
			break
		}
		require.ErrorIs(t, err, idgen.ErrNoFreeNode)
		require.Truef(t, time.Now().Before(deadline), "BUG: the node stays leased to nobody: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	require.EqualValues(t, free, next.Node())
	require.NoError(t, next.Close())
	require.NotErrorIsf(t, r.err, idgen.ErrLeaseLost, "BUG: a start that gave up reports its node lost: %v", r.err)
}

// eventuallyT polls cond until it holds or 20s pass.
func eventuallyT(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, "timed out waiting: %s", msg)
}

// A Sequence on a client without a read timeout (ReadTimeout -1) loses one
// reply for good: that Next is given up at its deadline and its call never
// returns. Every later Next must cost nothing more: the given-up call keeps
// no registration, and no returned value is kept to check it against.
func TestSequence_Next_replyLostForGood_memoryFlat(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	seq, err := idgen.NewSequence(rdb, "lost-for-good")
	require.NoError(t, err)
	_, err = seq.Next(t.Context())
	require.NoError(t, err)

	px.DropReplies(true)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = seq.Next(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	px.DropReplies(false)

	const calls = 5000
	for range calls {
		_, err := seq.Next(t.Context())
		require.NoError(t, err)
	}
	inflight, recent := seq.Pending()
	require.Zerof(t, inflight, "BUG: the given-up call is still registered")
	require.Zerof(t, recent, "BUG: %d values kept for a call nobody waits for", recent)
}

// TestChaos_Sequence_Next_replyLostForGood_heapFlat: as above, measured as
// the heap over a million Next (RUN_CHAOS=1): flat, where the registration
// of the given-up call made it grow by about 29 bytes per Next.
func TestChaos_Sequence_Next_replyLostForGood_heapFlat(t *testing.T) {
	redistest.Chaos(t)
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: -1, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	seq, err := idgen.NewSequence(rdb, "lost-for-good")
	require.NoError(t, err)
	_, err = seq.Next(t.Context())
	require.NoError(t, err)
	px.DropReplies(true)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = seq.Next(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	px.DropReplies(false)

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	run := func(n int) {
		errs := make(chan error, 16)
		for w := range 16 {
			go func() {
				var err error
				for i := w; i < n && err == nil; i += 16 {
					_, err = seq.Next(context.Background())
				}
				errs <- err
			}()
		}
		for range 16 {
			require.NoError(t, <-errs)
		}
	}
	run(100_000) // pools, buffers and maps at their working size
	before := heap()
	run(1_000_000)
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("heap %d -> %d bytes over 1,000,000 Next", before, after)
	require.Lessf(t, grown, int64(1<<20), "BUG: the heap grew by %d bytes over a million Next", grown)
}

// heldNodes returns the nodes of service's table that have an owner.
func heldNodes(t *testing.T, rdb *redis.Client, service string) []string {
	var owners []string
	for node, v := range rdb.HGetAll(t.Context(), nodeTable(service)).Val() {
		if !strings.HasPrefix(v, "|") { // "owner|expires|hw|start"; released: no owner
			owners = append(owners, node)
		}
	}
	return owners
}

// A start whose acquire ran in Redis but whose reply (and those of
// go-redis's re-sends) was lost fails, and gives the node it may have
// leased back once Redis answers again, instead of leaving it leased to
// nobody for the lease's TTL: on go-redis's defaults, on a client that
// sends once, and when ctx ends before the reply is lost (the call given
// up, its late result an error).
func TestNewLeasedSnowflake_acquireReplyLost_releasesNode(t *testing.T) {
	for _, mode := range []struct {
		name    string
		retries int
		ctx     time.Duration
	}{{"defaults", 0, 5 * time.Second}, {"sendOnce", -1, 5 * time.Second}, {"ctxEndedFirst", 0, 50 * time.Millisecond}} {
		t.Run(mode.name, func(t *testing.T) {
			s := redistest.New(t, redistest.Options{})
			px := redistest.NewProxy(t, s.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: mode.retries})
			t.Cleanup(func() { _ = rdb.Close() })
			warm, err := idgen.NewLeasedSnowflake(t.Context(), rdb, "warm") // loads the script
			require.NoError(t, err)
			require.NoError(t, warm.Close())
			const service = "lost-acquire"
			px.DropReplies(true)
			ctx, cancel := context.WithTimeout(t.Context(), mode.ctx)
			sf, err := idgen.NewLeasedSnowflake(ctx, rdb, service, idgen.WithLeaseTTL(time.Minute))
			cancel()
			require.Error(t, err)
			require.Nil(t, sf)
			direct := s.Client()
			eventuallyT(t, func() bool { return direct.HLen(t.Context(), nodeTable(service)).Val() > 0 }, "the acquire ran (its reply was lost)")
			px.DropReplies(false)
			eventuallyT(t, func() bool { return len(heldNodes(t, direct, service)) == 0 }, "the node leased by the failed start is given back")
		})
	}
}
