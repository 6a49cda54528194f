package idgen_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// A call in flight carries the floor it read before its round trip. When
// another call of the same Sequence returns meanwhile and the key is then
// lost, the late call must not be handed that call's value again.
func TestSequence_Next_staleFloorAfterKeyLoss_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	direct := s.Client()
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	const key = "redkit:idgen:v1:{stale}:seq:stale"
	seq, err := idgen.NewSequence(rdb, "stale")
	require.NoError(t, err)
	var got []int64
	for i := 0; i < 5; i++ {
		id, err := seq.Next(t.Context())
		require.NoError(t, err)
		got = append(got, id.Int64())
	}

	// The first call runs (the counter moves to 6) but its reply is held.
	px.HoldReplies(time.Second)
	first := make(chan idgen.ID, 1)
	go func() {
		id, err := seq.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		first <- id
	}()
	require.Eventually(t, func() bool { return direct.Get(t.Context(), key).Val() == "6" },
		10*time.Second, time.Millisecond)
	// The key is lost, then a second call starts before the first returns.
	require.NoError(t, direct.Del(t.Context(), key).Err())
	second, err := seq.Next(t.Context())
	require.NoError(t, err)
	got = append(got, (<-first).Int64(), second.Int64())
	requireUnique(t, got)
}

// seqLoad runs workers goroutines calling seq.Next until stop is closed,
// tolerating errors (the server may be down), and returns every value.
func seqLoad(t *testing.T, g idgen.Generator, workers int, stop <-chan struct{}) func() []int64 {
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			var got []int64
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, got...)
					mu.Unlock()
					return
				default:
				}
				id, err := g.Next(context.Background())
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				if len(got) > 0 && id.Int64() <= got[len(got)-1] {
					t.Errorf("%d after %d in one goroutine", id, got[len(got)-1])
				}
				got = append(got, id.Int64())
			}
		})
	}
	return func() []int64 { wg.Wait(); return all }
}

// 16 goroutines share one Sequence while its key is deleted again and again.
func TestSequence_Next_concurrentKeyLoss_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	seq, err := idgen.NewSequence(rdb, "del")
	require.NoError(t, err)
	stop := make(chan struct{})
	collect := seqLoad(t, seq, 16, stop)
	for i := 0; i < 40; i++ {
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, rdb.Del(t.Context(), "redkit:idgen:v1:{del}:seq:del").Err())
	}
	close(stop)
	all := collect()
	require.Greater(t, len(all), 100)
	requireUnique(t, all)
}

// A Redis without persistence is killed and restarted under load: the
// Sequence never repeats its own values.
func TestSequence_Next_restartWithoutPersistence_neverRepeats(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	// go-redis re-sends a failed call (MaxRetries 3 by default), with the
	// floor it read before the server went down.
	rdb := s.Client(func(o *redis.Options) { o.DialTimeout = 200 * time.Millisecond })
	seq, err := idgen.NewSequence(rdb, "restart")
	require.NoError(t, err)
	stop := make(chan struct{})
	collect := seqLoad(t, seq, 16, stop)
	for i := 0; i < 10; i++ {
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, s.Kill())
		require.NoError(t, s.Restart(t.Context()))
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	all := collect()
	require.Greater(t, len(all), 100)
	requireUnique(t, all)
}

// A background fetch refused once (a short network blip at the prefetch
// point) is tried again after the backoff while the current range lasts.
func TestSegment_prefetch_refusedOnce_retried(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	seg, err := idgen.NewSegment(rdb, "blip", idgen.WithMinStep(100), idgen.WithMaxStep(100),
		idgen.WithTracerProvider(tp))
	require.NoError(t, err)
	defer seg.Close()
	for i := 0; i < 19; i++ { // the 20th value starts the prefetch
		_, err := seg.Next(t.Context())
		require.NoError(t, err)
	}
	require.NoError(t, px.Cut(true))
	_, err = seg.Next(t.Context())
	require.NoError(t, err)
	failed := func() bool {
		return slices.ContainsFunc(spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Status().Code == codes.Error })
	}
	require.Eventually(t, failed, 10*time.Second, time.Millisecond, "the prefetch failed")
	require.EqualValues(t, 80, seg.Runway(), "nothing fetched ahead")
	require.NoError(t, px.Cut(false))
	// No Next meanwhile: the retry comes from the backoff, not from a caller.
	require.Eventually(t, func() bool { return seg.Runway() == 180 }, 10*time.Second, time.Millisecond,
		"the next range was fetched after the blip")
	// The whole runway is served through the next outage.
	require.NoError(t, px.Cut(true))
	served := 0
	for {
		if _, err := seg.Next(t.Context()); err != nil {
			require.ErrorIs(t, err, idgen.ErrUnavailable)
			break
		}
		served++
	}
	require.Equal(t, 180, served)
}

// A counter below zero is moved up to the floor exactly: the counter then
// covers the whole range reserved above it, and a Sequence of the same name
// gets a value above that range.
func TestCounter_negative_movedUpExactly(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	const key = "redkit:idgen:v1:{neg}:seq:neg"
	require.NoError(t, rdb.Set(t.Context(), key, "-9007199254740991", 0).Err())
	seg, err := idgen.NewSegment(rdb, "neg", idgen.WithMinStep(10), idgen.WithMaxStep(10))
	require.NoError(t, err)
	a, err := seg.Next(t.Context()) // the range [1, 10]; its prefetch starts at 2
	require.NoError(t, err)
	require.Equal(t, idgen.ID(1), a)
	require.NoError(t, seg.Close())
	require.Equal(t, "10", rdb.Get(t.Context(), key).Val(), "the counter covers the range reserved")
	seq, err := idgen.NewSequence(rdb, "neg")
	require.NoError(t, err)
	id, err := seq.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, idgen.ID(11), id)
}
