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
//     clients (16 for INCR, as the 16 goroutines of the ID rows): SET, INCR,
//     EVALSHA of `return 1`, and EVALSHA of redkit's own stock deduct script
//     and wallet posting script with __rand_int__ in the operation ID, so
//     that every call is a fresh operation. redis-benchmark draws each
//     __rand_int__ of a command on its own, so the ID in a key and the ID in
//     an argument differ; every one is new, so the script does the same
//     work. These rows are the server's ceiling, from a C client; their
//     "cli CPU" column is redis-benchmark's CPU.
//   - flash/deduct-goredis, wallet/debit-goredis: the same EVALSHA command
//     as stock.Deduct and wallet.Debit send (captured from a real call), from
//     64 goroutines of one go-redis client, a fresh ID per call: the
//     yardsticks of stock.Deduct and wallet.Debit, so that their ratio is
//     what the module adds on the client side.
//   - lock/*: the hand-written SET NX PX + compare-and-delete lock,
//     go-redsync/redsync, bsm/redislock and redkit's lock.Mutex (plain and
//     fair): acquire+release pairs/s with 1 and 16 goroutines on their own
//     keys, and 16 goroutines handing one key around with an immediate
//     release: handoffs/s (acquisitions that followed another goroutine's
//     hold; a goroutine taking its own lock straight back scores nothing),
//     the p50/p99 wait of those acquisitions, the p50 gap from a release to
//     the next acquire by another goroutine, acquisitions/s and how often the
//     releaser took the lock straight back. Every polling lock (the
//     baseline, redislock, redsync) retries every 5ms; redkit waits for a
//     notification. Every lock has the same TTL (10s).
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
// Each case runs -runs times (default 3) for -duration (default 1s). Cases
// compared with each other take turns: run 1 of each, then run 2 of each in
// a rotated order, and so on, so a ratio compares runs taken minutes apart
// at most by seconds. The table gives the median, the spread (min–max) and
// the ratio to the case's yardstick: the median of the per-run ratios, with
// their spread; a ratio marked "~" has per-run values on both sides of 1,
// which says the two do not differ beyond the noise. "srv CPU" is the CPU
// time of the Redis servers' main threads per operation (INFO cpu): it counts
// a script's inner commands once, as part of the script, and the socket work
// of every command. The machine is usually shared and small, so compare
// ratios from one run rather than absolute rates across runs, and note the
// load average the program prints. The blog-pattern rows depend on their
// retry sleep (2ms ±50%). RESULTS.md has a full run with its machine.
package bench
