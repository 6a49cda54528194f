package lock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/lock"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary act as the lock holder of
// TestFence_Kleppmann_SIGSTOP instead of running tests.
const childEnv = "LOCK_TEST_CHILD"

var fencedWriteLua = lock.FenceLua + `
if not redkit_fence(KEYS[1], ARGV[1]) then return redis.error_reply('STALE fence') end
redis.call('SET', KEYS[2], ARGV[2])
return 1`

// runChild is the second process of the tests that need one; childEnv
// says which part it plays.
func runChild() int {
	ctx := context.Background()
	addr, prefix := os.Getenv("LOCK_TEST_ADDR"), os.Getenv("LOCK_TEST_PREFIX")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks, err := lock.New(rdb, lock.WithKeyPrefix(prefix))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer locks.Close()
	if os.Getenv(childEnv) == "fairwaiters" {
		return runFairWaiters(ctx, locks)
	}
	if os.Getenv(childEnv) == "counter" {
		if err := incrementUnderLock(ctx, rdb, locks, prefix, 4, 50); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("done")
		return 0
	}
	return runStalledHolder(ctx, rdb, locks, prefix)
}

// runStalledHolder acquires the lock (watchdog on), prints the token, then
// on each line from stdin does a fenced write and an unfenced write and
// prints the results.
func runStalledHolder(ctx context.Context, rdb *redis.Client, locks *lock.Client, prefix string) int {
	l, err := locks.Mutex("storage", lock.WithTTL(300*time.Millisecond)).Acquire(ctx)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("token", l.Fence().Token)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fenceKey, dataKey := lock.FenceKey(prefix, "file", "storage"), prefix+":{file}:data"
		ferr := redis.NewScript(fencedWriteLua).Run(ctx, rdb, []string{fenceKey, dataKey}, l.Fence().Token, "child-fenced").Err()
		uerr := rdb.Set(ctx, prefix+":{file}:unfenced", "child", 0).Err()
		fmt.Printf("fenced=%v unfenced=%v lease=%v\n", ferr, uerr, l.Err())
	}
	return 0
}

// TestFence_Kleppmann_SIGSTOP: the holder is a real process, stopped with
// SIGSTOP (its watchdog too) past its TTL. Another owner acquires and
// writes. When the holder resumes and writes, its fenced write is refused,
// while its unfenced write overwrites the newer owner's data.
func TestFence_Kleppmann_SIGSTOP(t *testing.T) {
	rdb := sharedClient(t)
	ctx := t.Context()
	prefix := testPrefix(t)
	child := startChild(t, "holder", prefix)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	out := bufio.NewScanner(stdout)
	require.True(t, out.Scan(), "child output")
	fields := strings.Fields(out.Text())
	require.Equal(t, "token", fields[0], out.Text())
	childToken, err := strconv.ParseUint(fields[1], 10, 64)
	require.NoError(t, err)

	require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
	locks := mustNew(t, rdb, lock.WithKeyPrefix(prefix))
	defer locks.Close()
	l, err := locks.Mutex("storage").Acquire(ctx) // waits out the stopped holder's TTL
	require.NoError(t, err)
	require.Greater(t, l.Fence().Token, childToken)
	fenceKey, dataKey := lock.FenceKey(prefix, "file", "storage"), prefix+":{file}:data"
	require.NoError(t, redis.NewScript(fencedWriteLua).Run(ctx, rdb, []string{fenceKey, dataKey}, l.Fence().Token, "parent").Err())
	require.NoError(t, rdb.Set(ctx, prefix+":{file}:unfenced", "parent", 0).Err())

	require.NoError(t, child.Process.Signal(syscall.SIGCONT))
	_, err = fmt.Fprintln(stdin, "write")
	require.NoError(t, err)
	require.True(t, out.Scan(), "child output")
	line := out.Text()
	require.Contains(t, line, "fenced=STALE fence", "the stale holder's fenced write is refused")
	require.Contains(t, line, "unfenced=<nil>")
	v, err := rdb.Get(ctx, dataKey).Result()
	require.NoError(t, err)
	require.Equal(t, "parent", v)
	v, err = rdb.Get(ctx, prefix+":{file}:unfenced").Result()
	require.NoError(t, err)
	require.Equal(t, "child", v, "without the fence the stale holder overwrote the newer write")
	require.NoError(t, l.Release(ctx))
}

// startChild prepares this test binary as a second process playing role.
func startChild(t *testing.T, role, prefix string) *exec.Cmd {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+role, "LOCK_TEST_ADDR="+shared.Addr(), "LOCK_TEST_PREFIX="+prefix)
	return child
}

// incrementUnderLock runs workers goroutines that each add 1 to a counter
// rounds times, with GET then SET under the mutex "counter".
func incrementUnderLock(ctx context.Context, rdb *redis.Client, locks *lock.Client, prefix string, workers, rounds int) error {
	counter := prefix + ":counter"
	errs := make(chan error, workers)
	for i := range workers {
		m := locks.Mutex("counter")
		go func() {
			errs <- func() error {
				for range rounds {
					l, err := m.Acquire(ctx)
					if err != nil {
						return err
					}
					n, err := rdb.Get(ctx, counter).Int()
					if err != nil && err != redis.Nil {
						return err
					}
					time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
					if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
						return err
					}
					if err := l.Release(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TestMutex_MutualExclusion_twoProcesses: this process and a child process
// each run 4 goroutines incrementing one counter with GET then SET under
// the lock; no update is lost.
func TestMutex_MutualExclusion_twoProcesses(t *testing.T) {
	rdb := sharedClient(t)
	prefix := testPrefix(t)
	child := startChild(t, "counter", prefix)
	var out strings.Builder
	child.Stdout = &out
	require.NoError(t, child.Start())
	locks := newLocks(t, rdb, lock.WithKeyPrefix(prefix))
	require.NoError(t, incrementUnderLock(t.Context(), rdb, locks, prefix, 4, 50))
	require.NoError(t, child.Wait(), out.String())
	require.Contains(t, out.String(), "done")
	n, err := rdb.Get(t.Context(), prefix+":counter").Int()
	require.NoError(t, err)
	require.Equal(t, 2*4*50, n, "no lost updates")
}
