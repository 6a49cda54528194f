// Package bench is redkit's yardstick: a program, redkit-bench, that
// measures redkit beside the server's own ceilings and the libraries it is
// judged against, in one run, on redis-server processes it starts itself.
//
//	make bench                                   # or: go run ./bench/cmd/redkit-bench
//	go run ./bench/cmd/redkit-bench -only 'lock/' -runs 5 -duration 2s
//	go run ./bench/cmd/redkit-bench -quick -json  # one short run per case, machine output
//
// # What it measures
//
//   - server/*: redis-benchmark (from the redis-tools package) with 64
//     clients: SET, INCR, EVALSHA of `return 1`, and EVALSHA of redkit's own
//     stock deduct script and wallet posting script with __rand_int__ in the
//     operation ID, so that every call is a fresh operation. These are the
//     ceilings the redkit rows are divided by.
//   - lock/*: the hand-written SET NX PX + compare-and-delete lock,
//     go-redsync/redsync, bsm/redislock and redkit's lock.Mutex (plain and
//     fair): acquire+release pairs/s with 1 and 16 goroutines on their own
//     keys, and 16 goroutines handing one key around with an immediate
//     release (acquisitions/s, p50/p99 wait, the p50 gap from a release to
//     the next acquire by another goroutine, how often the releaser took the
//     lock straight back, commands per handoff).
//   - flash/*: 64 buyers on one hot SKU: the blog pattern (SETNX lock, GET,
//     DECRBY, DEL), a bare Lua check-and-decrement, stock.Deduct and
//     stock.DeductBatch.
//   - wallet/*: 64 concurrent debits of one account (the blog pattern and
//     wallet.Debit), transfers one by one, in batches, and across slot groups.
//   - ids/*: bwmarrin/snowflake, sony/sonyflake, one INCR per ID, and
//     idgen's Snowflake, Segment and Sequence; the -timed rows time every
//     call for the wait percentiles.
//   - cluster/*: the same stock and wallet work on a loopback 3-master
//     Redis Cluster, against one node.
//
// Every row counts its Redis round trips and commands through a go-redis
// hook (connection handshakes excluded), and checks correctness while it
// measures: an in-process holder count for the locks (two holders at once),
// sold plus remaining units against the initial stock, balances against the
// debits and transfers the callers were told succeeded, and repeated IDs.
// A violation is printed loudly and makes the exit status 1.
//
// # Reading the numbers
//
// Each case runs -runs times (default 3) for -duration (default 1s); the
// table gives the median, the spread (min–max) and the ratio of the median
// to the case's yardstick from the same run. The machine is usually shared
// and small, so compare ratios from one run rather than absolute rates
// across runs. The blog-pattern rows depend on their retry sleep (2ms ±50%);
// redsync keeps its default retry delay (50–250ms) and redislock and the
// baseline lock poll every 5ms. RESULTS.md has a full run with its machine.
package bench
