// Package examples holds redkit's service templates, each a small net/http
// program meant to be copied:
//
//   - flashsale: the README's first command; a simulated flash sale on
//     stock and idgen, or (-serve) an HTTP sale service;
//   - wallet: an HTTP wallet on the wallet module, or a load test that checks
//     every balance afterwards;
//   - idservice: a Leaf-style HTTP ID service on idgen, its node lease shown
//     on /status.
//
// Each runs against the Redis or Cluster named by REDIS_URL, or, with it
// unset, an embedded in-process Redis (miniredis), and exports telemetry
// only when the standard OTEL_* variables ask for it (otelx/setup).
//
// One departure from the design notes: the embedded Redis does not use
// miniredis's ClockTTL. ClockTTL walks every key on every command, so a
// sale slowed down more with every order marker it stored. Instead a ticker advances TTLs by the wall-clock time
// that has passed every 50 ms (redisconn.TTLTick): keys expire at most that
// late, never early, and TIME stays the wall clock.
//
// The internal packages are plumbing only (the Redis connection, telemetry
// and HTTP conventions, test helpers); the business logic of each example
// stays in its own directory.
package examples
