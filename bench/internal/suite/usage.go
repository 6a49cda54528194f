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
// redis-benchmark children that ended meanwhile) and command time inside
// the Redis servers, from INFO commandstats.
type usage struct {
	addrs []string // servers whose command time counts
	cpu   time.Duration
}

// begin resets the servers' command statistics and notes the CPU used so far.
func (u *usage) begin(ctx context.Context) {
	for _, a := range u.addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		_ = rdb.ConfigResetStat(ctx).Err()
		_ = rdb.Close()
	}
	u.cpu = cpuTime()
}

// end returns the CPU used since begin and the servers' command time.
func (u *usage) end(ctx context.Context) (cpu, server time.Duration) {
	cpu = cpuTime() - u.cpu
	for _, a := range u.addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		info, err := rdb.Info(ctx, "commandstats").Result()
		_ = rdb.Close()
		if err == nil {
			server += commandTime(info)
		}
	}
	return cpu, server
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

// commandTime sums usec over the cmdstat_* lines of INFO commandstats, e.g.
// "cmdstat_evalsha:calls=10,usec=123,usec_per_call=12.30,...".
func commandTime(info string) time.Duration {
	var usec int64
	for line := range strings.Lines(info) {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_config") ||
			strings.HasPrefix(line, "cmdstat_info") {
			continue
		}
		_, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				usec += n
			}
		}
	}
	return time.Duration(usec) * time.Microsecond
}
