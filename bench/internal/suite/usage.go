package suite

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// usage is where a run's time went: CPU of this process (and of the
// redis-benchmark children that ended meanwhile) and CPU of the Redis
// servers' main threads, from INFO cpu. Server CPU counts each piece of work
// once: INFO commandstats would count a script's inner commands both inside
// its EVALSHA and on their own lines, and leave out reading and writing the
// sockets, so it would favour plain commands over scripts.
type usage struct {
	addrs  []string // servers whose CPU counts
	cpu    time.Duration
	server map[string]time.Duration
}

// begin notes the CPU used so far, here and by the servers.
func (u *usage) begin(ctx context.Context) {
	u.server = map[string]time.Duration{}
	for _, a := range u.addrs {
		if t, ok := serverCPU(ctx, a); ok {
			u.server[a] = t
		}
	}
	u.cpu = cpuTime()
}

// end returns the CPU used since begin, here and by the servers.
func (u *usage) end(ctx context.Context) (cpu, server time.Duration) {
	cpu = cpuTime() - u.cpu
	for _, a := range u.addrs {
		before, ok := u.server[a]
		if !ok {
			continue
		}
		if t, ok := serverCPU(ctx, a); ok {
			server += t - before
		}
	}
	return cpu, server
}

// serverCPU reads the CPU time of a server's main thread.
func serverCPU(ctx context.Context, addr string) (time.Duration, bool) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, false
	}
	return mainThreadCPU(info)
}

// mainThreadCPU sums used_cpu_sys_main_thread and used_cpu_user_main_thread
// of INFO cpu (seconds with microsecond digits).
func mainThreadCPU(info string) (time.Duration, bool) {
	var total float64
	found := 0
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_sys_main_thread" && name != "used_cpu_user_main_thread") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		total += f
		found++
	}
	return time.Duration(total * float64(time.Second)), found == 2
}

// cpuTime is the user and system CPU time of this process and of its
// children that have ended.
func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}
