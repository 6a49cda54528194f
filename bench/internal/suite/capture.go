package suite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// rbTemplateID is the operation ID of the one call whose script command a
// redis-benchmark case replays: 12 digits, the width of redis-benchmark's
// __rand_int__, so every length-prefixed field that holds the ID keeps its
// length when the ID is replaced.
const rbTemplateID = "777777777777"

// captureScript makes one real call on a client of addr that records its
// EVALSHA commands, and returns the arguments of the last one that carries
// rbTemplateID. The benchmarks thus send exactly what the module sends,
// whatever its scripts' keys and arguments are today, only with a fresh ID
// per call.
func captureScript(ctx context.Context, addr string, call func(rdb *redis.Client) error) ([]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rec := &scriptRecorder{}
	rdb.AddHook(rec)
	if err := call(rdb); err != nil {
		return nil, err
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := len(rec.calls) - 1; i >= 0; i-- {
		if args := rec.calls[i]; strings.Contains(strings.Join(args, " "), rbTemplateID) {
			return args, nil
		}
	}
	return nil, errors.New("the call sent no EVALSHA carrying its operation ID")
}

// rbCaptured runs through redis-benchmark the script command that call
// sends on a client of env's server (captureScript), with rbTemplateID
// replaced by __rand_int__. redis-benchmark draws each __rand_int__ of a
// command on its own, so where the ID appears twice (a key and an argument)
// the two get different numbers: the script does the same work, as every
// number is new.
func rbCaptured(ctx context.Context, env *Env, d time.Duration, call func(rdb *redis.Client) error) (Sample, error) {
	args, err := captureScript(ctx, env.Server.Addr(), call)
	if err != nil {
		return Sample{}, err
	}
	for j, a := range args {
		args[j] = strings.ReplaceAll(a, rbTemplateID, "__rand_int__")
	}
	return redisBenchmark(ctx, env, d, args...)
}

// goredisCaptured sends, from workers goroutines of one go-redis client, the
// script command that call sends (captureScript) with a fresh 12-digit ID
// per call in every place the ID appears: the same command a module sends,
// from the same client library, without the module. It is the yardstick of
// what the module adds on the client side.
func goredisCaptured(ctx context.Context, env *Env, d time.Duration, workers int, call func(rdb *redis.Client) error) (Sample, error) {
	args, err := captureScript(ctx, env.Server.Addr(), call)
	if err != nil {
		return Sample{}, err
	}
	var at []int // the arguments that carry the ID
	for j, a := range args {
		if strings.Contains(a, rbTemplateID) {
			at = append(at, j)
		}
	}
	rdb, rt := client(env)
	defer rdb.Close()
	var seq atomic.Int64
	seq.Store(goredisIDBase)
	s := drive(ctx, d, workers, rt, true, func(ctx context.Context, _ int) error {
		id := strconv.FormatInt(seq.Add(1), 10)
		cmd := make([]any, len(args))
		for j, a := range args {
			cmd[j] = a
		}
		for _, j := range at {
			cmd[j] = strings.ReplaceAll(args[j], rbTemplateID, id)
		}
		return rdb.Do(context.WithoutCancel(ctx), cmd...).Err()
	})
	return s, nil
}

// goredisIDBase starts the yardsticks' IDs at 12 digits, the width of
// rbTemplateID, so that length-prefixed fields keep their length.
const goredisIDBase = 100_000_000_000

// scriptRecorder is a go-redis hook that keeps the arguments of every
// EVALSHA sent, alone or in a pipeline.
type scriptRecorder struct {
	mu    sync.Mutex
	calls [][]string
}

func (r *scriptRecorder) record(cmd redis.Cmder) {
	if cmd.Name() != "evalsha" {
		return
	}
	args := make([]string, len(cmd.Args()))
	for i, a := range cmd.Args() {
		args[i] = fmt.Sprint(a)
	}
	args[0] = "EVALSHA"
	r.mu.Lock()
	r.calls = append(r.calls, args)
	r.mu.Unlock()
}

func (r *scriptRecorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *scriptRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *scriptRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			r.record(c)
		}
		return next(ctx, cmds)
	}
}
