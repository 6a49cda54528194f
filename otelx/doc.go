// Package otelx holds the OpenTelemetry helpers every redkit module uses:
// how a module finds its tracer and meter, how it starts and ends a span
// for one operation, and how go-redis command tracing is switched on.
//
// It imports the OpenTelemetry API only (go.opentelemetry.io/otel and its
// trace, metric, attribute and codes packages), never the SDK, so a
// library that uses it adds no exporter or SDK to a program. Configuring
// the SDK is the program's job.
//
// # Providers
//
// Each module has a WithTracerProvider and a WithMeterProvider option that
// fill a Providers value. A nil field means the global provider, looked up
// when the tracer or meter is created, so a program that calls
// otel.SetTracerProvider before building redkit values needs no options:
//
//	var providers otelx.Providers // set by the module's With*Provider options; zero: the global ones
//	tracer := providers.TracerFor(stock.ScopeName, stock.Version) // import path, module version
//	ctx, span := otelx.Start(ctx, tracer, "stock.deduct", "") // "": no WithLabel given
//	...
//	otelx.End(span, "sold_out", nil) // a refusal is an outcome, not an error
//
// # What is recorded, and what never is
//
// End records the outcome as the redkit.outcome attribute. Only an error
// (err != nil) sets the span status to Error, together with an error.type
// attribute (see ErrorType); business refusals such as sold out or
// insufficient funds are passed with a nil error and show up only as
// outcomes. The error's message is never recorded, because wrapped
// messages carry names and IDs.
//
// Attributes never contain names, keys, IDs, owner IDs, tokens or amounts;
// a caller who wants to tell operations apart gives a label (redkit.label).
// error.type is the text of an error only when that error is a sentinel
// registered with RegisterSentinels (each module registers its own); any
// other error is named by its Go type, so an error built with fmt.Errorf
// and an ID in its text never puts the ID in an attribute. ErrorType never
// panics, whatever the error holds (a comparable error type whose field
// holds a slice at run time is named by its type).
//
// # Outcomes
//
// redkit.outcome takes its values from one vocabulary (Outcomes and the
// constants it lists), shared by every module: the same result has the
// same word in stock, wallet, lock and idgen (unknown_outcome,
// replica_ack_missing, conflict, invalid, ...).
//
// # Background work
//
// Work a module does in the background (a lease watchdog's renewals, an
// ID segment's range prefetch, a reclaimer's round, a recovery run) outlives
// the call that caused it. StartBackground and StartBackgroundTimed start
// its span as the root of a trace of its own, linked to the span of that
// call, so a trace never hangs off a request that ended long ago and a
// backend can still follow the link from the work to its cause.
//
// InstrumentRedis turns on github.com/redis/go-redis/extra/redisotel
// tracing and pool metrics for a client with argument recording off: no
// db.statement attribute, and a failed command is recorded by its Redis
// error code only, since an error reply can quote the arguments. Dials are
// not traced (go-redis dials with a context of its own, so each new
// connection would be a root trace joined to nothing), and redisotel's two
// duration histograms are recorded in seconds with DurationBuckets.
// Two error replies that are expected answers, not failures, leave the
// command's span without error status: NOSCRIPT (the script was not in
// the server's cache, did not run, and is sent again with its source;
// the span gets redkit.script_cache_miss=true), and the "unknown
// subcommand" a server before Redis 7.2 answers to the CLIENT SETINFO
// go-redis sends on each new connection and ignores. A NOSCRIPT that
// redkit cannot recover from still fails the module's own span.
//
// # Instruments
//
// Every redkit duration histogram is in seconds with DurationBuckets as
// bucket advice (50 µs to 10 s, neighbours at most 1.5 apart below 5 ms;
// a View still overrides it), named redkit.<module>.<thing>.duration in
// the manner of db.client.operation.duration, with the attributes
// redkit.operation, redkit.outcome and, when given, redkit.label.
// Tracers and meters carry the module's version (its Version constant)
// and SchemaURL.
package otelx
