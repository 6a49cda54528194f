package redistest

import (
	"context"
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewFailoverCluster starts a Cluster of 3 masters with a replica each and
// a cluster-node-timeout of 1 s (a killed master's replica is promoted
// within seconds), stopped when tb ends, and returns it with an ordinary
// ClusterClient on it (go-redis defaults), closed when tb ends.
func NewFailoverCluster(tb testing.TB) (*Cluster, *redis.ClusterClient) {
	tb.Helper()
	c := NewCluster(tb, ClusterOptions{Masters: 3, Replicas: 1,
		Options: Options{Config: []string{"cluster-node-timeout 1000"}}})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { _ = rdb.Close() })
	return c, rdb
}

// FaultRounds runs FaultRound rounds times on the shard of each key, one
// after the other, and returns how many faults ran.
func (c *Cluster) FaultRounds(ctx context.Context, rounds int, pause time.Duration, keys ...string) (int, error) {
	faults := 0
	for range rounds {
		for _, k := range keys {
			n, err := c.FaultRound(ctx, k, pause)
			faults += n
			if err != nil {
				return faults, err
			}
		}
	}
	return faults, nil
}

// Chaos skips tb unless RUN_CHAOS is set (make chaos sets it), and returns
// CHAOS_SCALE, the multiplier of a chaos test's work: 1 when it is unset or
// not a positive whole number.
func Chaos(tb testing.TB) int {
	tb.Helper()
	if os.Getenv("RUN_CHAOS") == "" {
		tb.Skip("chaos tier: make chaos")
	}
	if n, err := strconv.Atoi(os.Getenv("CHAOS_SCALE")); err == nil && n > 0 {
		return n
	}
	return 1
}

// WhileFailingOver runs work(w, i) on workers goroutines, i = 0, 1, 2... on
// each, while FaultRounds runs rounds rounds of faults on the shards of
// keys, pause apart, and returns how many faults ran once every worker has
// stopped. A worker stops when the faults are over or when work returns
// false. tb fails if a fault could not be injected.
func (c *Cluster) WhileFailingOver(tb testing.TB, ctx context.Context, rounds int, pause time.Duration, keys []string,
	workers int, work func(w, i int) bool) int {
	tb.Helper()
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; run.Err() == nil; i++ {
				if !work(w, i) {
					return
				}
			}
		})
	}
	faults, err := c.FaultRounds(ctx, rounds, pause, keys...)
	stop()
	wg.Wait()
	if err != nil {
		tb.Fatalf("after %d faults: %v", faults, err)
	}
	return faults
}

// Answers calls an operation again, as a caller that gets an error should,
// until it is answered, and tallies what happened: how many calls were
// answered, how many failed and were made again, and the first error of
// each operation by kind. Safe for concurrent use.
type Answers struct {
	// Kinds names the sentinel errors to tally by name (errors.Is); any
	// other first error is tallied by its text.
	Kinds map[string]error
	// Tries bounds the calls of one operation (default 50), Wait the pause
	// between two (default 50 ms), Timeout each call (default 10 s).
	Tries         int
	Wait, Timeout time.Duration

	mu                sync.Mutex
	answered, retried int
	first             map[string]int
}

// Call runs call until it returns nil, each time with its own timeout,
// detached from ctx's cancellation (a caller keeps asking after the test
// stopped sending new work). It reports false, with the last error, if the
// operation was never answered.
func (a *Answers) Call(ctx context.Context, call func(context.Context) error) (bool, error) {
	tries, wait, timeout := a.Tries, a.Wait, a.Timeout
	if tries == 0 {
		tries = 50
	}
	if wait == 0 {
		wait = 50 * time.Millisecond
	}
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	var err error
	for try := range tries {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		err = call(cctx)
		cancel()
		a.mu.Lock()
		if err == nil {
			a.answered++
			a.mu.Unlock()
			return true, nil
		}
		a.retried++
		if try == 0 {
			if a.first == nil {
				a.first = map[string]int{}
			}
			a.first[a.kind(err)]++
		}
		a.mu.Unlock()
		time.Sleep(wait)
	}
	return false, err
}

func (a *Answers) kind(err error) string {
	for name, k := range a.Kinds {
		if errors.Is(err, k) {
			return name
		}
	}
	return err.Error()
}

// Answered is how many operations were answered, Retried how many calls
// failed and were made again.
func (a *Answers) Answered() int { a.mu.Lock(); defer a.mu.Unlock(); return a.answered }

// Retried is how many calls failed and were made again.
func (a *Answers) Retried() int { a.mu.Lock(); defer a.mu.Unlock(); return a.retried }

// FirstErrors lists the first error of each operation that needed more
// than one call, by kind, with counts ("kind: n, ...").
func (a *Answers) FirstErrors() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for k, n := range a.first {
		parts = append(parts, k+": "+strconv.Itoa(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
