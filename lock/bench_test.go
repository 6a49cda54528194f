package lock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
)

// benchClient returns a client of the shared server whose pool fits 16
// goroutines, with a round-trip counter.
func benchClient(b *testing.B) (*redis.Client, *rtCounter) {
	rdb := redis.NewClient(&redis.Options{Addr: shared.Addr(), PoolSize: 32})
	b.Cleanup(func() { _ = rdb.Close() })
	rt := &rtCounter{}
	rdb.AddHook(rt)
	return rdb, rt
}

// BenchmarkMutex_AcquireRelease: uncontended TryAcquire + Release pairs,
// fence token included; each goroutine uses its own name.
func BenchmarkMutex_AcquireRelease(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			rdb, rt := benchClient(b)
			locks := newLocks(b, rdb)
			warmUp(b, locks)
			var id atomic.Int64
			rt.n.Store(0)
			b.ReportAllocs()
			runGoroutines(b, par, func() func() {
				m := locks.Mutex(fmt.Sprintf("uncontended-%d", id.Add(1)))
				return func() { pair(b, m) }
			})
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "RT/op")
		})
	}
}

// runGoroutines runs op b.N times on par goroutines (1: the benchmark's own),
// each with its own op from newOp.
func runGoroutines(b *testing.B, par int, newOp func() func()) {
	if par == 1 {
		op := newOp()
		for b.Loop() {
			op()
		}
		return
	}
	b.SetParallelism(max(1, par/runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		op := newOp()
		for pb.Next() {
			op()
		}
	})
}

func pair(b *testing.B, m *lock.Mutex) {
	l, err := m.TryAcquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBaseline_SetNXDel is the hand-written lock this package replaces:
// SET NX PX, then a compare-and-delete script; no fence, no lease, no
// notifications. Same goroutine counts as BenchmarkMutex_AcquireRelease.
func BenchmarkBaseline_SetNXDel(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			rdb, rt := benchClient(b)
			prefix := testPrefix(b)
			del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
			if err := del.Load(context.Background(), rdb).Err(); err != nil {
				b.Fatal(err)
			}
			var id atomic.Int64
			rt.n.Store(0)
			b.ReportAllocs()
			runGoroutines(b, par, func() func() {
				key := fmt.Sprintf("%s:baseline-%d", prefix, id.Add(1))
				return func() {
					owner := lock.NewOwner()
					ok, err := rdb.SetNX(context.Background(), key, owner, 10*time.Second).Result()
					if err != nil || !ok {
						b.Fatal(ok, err)
					}
					if err := del.Run(context.Background(), rdb, []string{key}, owner).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "RT/op")
		})
	}
}

// BenchmarkMutex_Handoff16: 16 goroutines take turns on one name, each
// asking again right after its release. Reports the gap from a release to
// the next acquire by another goroutine (p50), the wait of an Acquire (p99),
// how often the releaser took the lock straight back, and Redis commands per
// acquisition (fair mode adds queue heartbeats).
func BenchmarkMutex_Handoff16(b *testing.B) {
	for _, mode := range []struct {
		name string
		opt  lock.Option
	}{{"notify", lock.WithFair(false)}, {"fair", lock.WithFair(true)}} {
		b.Run(mode.name, func(b *testing.B) { benchHandoff(b, mode.opt) })
	}
}

func benchHandoff(b *testing.B, opt lock.Option) {
	rdb, rt := benchClient(b)
	locks := newLocks(b, rdb, opt)
	warmUp(b, locks)
	m := locks.Mutex("handoff")
	var (
		mu          sync.Mutex
		lastHolder  = -1
		lastRelease time.Time
		gaps, waits []time.Duration
		reacquired  int
		acquired    int
		id          atomic.Int64
	)
	rt.n.Store(0)
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		me := int(id.Add(1))
		for pb.Next() {
			asked := time.Now()
			l, err := m.Acquire(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			now := time.Now()
			mu.Lock()
			acquired++
			waits = append(waits, now.Sub(asked))
			switch {
			case lastHolder == me:
				reacquired++
			case lastHolder >= 0:
				gaps = append(gaps, now.Sub(lastRelease))
			}
			lastHolder = me
			lastRelease = time.Now()
			mu.Unlock()
			if err := l.Release(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	slices.Sort(gaps)
	slices.Sort(waits)
	if len(gaps) > 0 {
		b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-handoff-µs")
	}
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "p99-wait-µs")
	}
	if acquired > 0 {
		b.ReportMetric(100*float64(reacquired)/float64(acquired), "%reacquired")
		b.ReportMetric(float64(rt.n.Load())/float64(acquired), "cmds/acquire")
	}
}
