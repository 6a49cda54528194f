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
// only when the standard OTEL_* variables ask for it (otelx/setup). Console
// telemetry goes to stderr, since stdout is a program's report. With
// OTEL_METRICS_EXPORTER=prometheus a served example answers GET /metrics
// on its own server to a key with the metrics:read scope, unless
// OTEL_EXPORTER_PROMETHEUS_HOST or _PORT give the exporter a listener of
// its own (without a key: a network only the scraper reaches); a
// simulated sale needs the latter (and -linger to stay up for the last
// scrape). The HTTP spans and metrics carry the method, the route pattern,
// the status and the scheme, nothing a client chose (no Host, path, query
// or header), so clients cannot grow the number of series. grafana/redkit.json is a dashboard over these metrics,
// checked against a real Prometheus by flashsale's TestPrometheus_flashSale.
//
// Served (-serve, or idservice's -addr), each is fit to expose: every route
// needs an API key with a scope (kit/auth: hashed bearer keys behind
// one Authenticator interface a team replaces with its own scheme); the
// flash sale's buyer is the key's principal, never a body field; the HTTP
// server has read, write and idle timeouts, a header limit, a bound on
// requests in flight (503 overloaded past it, at once) and a per-principal
// GCRA rate limit kept in Redis (429); /healthz and /readyz need no key.
// With no keys given, a service makes an admin key and prints it once, and
// only on a loopback address: on any other it refuses to start. Every
// request is answered before the write timeout whatever Redis does: the
// request's context ends at 4/5 of it and every Redis client ends its calls
// with it (ContextTimeoutEnabled, kit/redisconn). An unknown outcome
// (ErrUnknownOutcome of stock or wallet) is a 503 with Retry-After telling
// the client to repeat the request with the same Idempotency-Key, and a
// read Redis did not answer a 503 unavailable. No response body names a
// host, port, file path or Redis error; the log does. Idempotency keys and
// order IDs belong to the principal that sends them (two principals' keys
// never meet), and a wallet account to its owner: payments move money only
// out of the caller's own accounts (or those it was granted). The README's
// "Before you expose a template" lists each of these with its scopes,
// flags and defaults. Each template's redis.acl is the least-privilege
// Redis ACL user it runs as (SECURITY.md explains it).
//
// The embedded Redis does not use miniredis's ClockTTL, which walks every
// key on every command, so a sale slowed down more with every order marker
// it stored. Instead a ticker advances TTLs by the wall-clock time that has
// passed every 50 ms (redisconn.TTLTick): keys expire at most that late,
// never early, and TIME stays the wall clock.
//
// With DATABASE_URL set, the flashsale simulation and the wallet load test
// keep a book of record in that PostgreSQL database (pgjournal; package
// kit/book runs it): a sink books the journals beside the run, and
// the report ends with the book's totals beside Redis's and the
// reconciler's verdict, a drift failing the run. Served examples do not
// use it. Unset, nothing touches PostgreSQL.
//
// The packages of kit (its own module, github.com/redkit-go/redkit/examples/kit,
// released with the library) are plumbing only (the Redis connection,
// telemetry, credentials, the HTTP server and conventions, test helpers);
// the business logic of each example stays in its own directory. They are
// public, not internal, so that an example copied out of this repository
// builds: Go forbids importing another module's internal packages, and
// copying the plumbing into each example would repeat about 1,500 lines
// three times. make release-proof copies each example into a module of its
// own and builds it against the released modules.
package examples
