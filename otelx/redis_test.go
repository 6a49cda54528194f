package otelx_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redkit-go/redkit/otelx"
	"github.com/redkit-go/redkit/redistest"
)

// spanText is everything a span carries that an exporter would send.
func spanText(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	b.WriteString(s.Name() + "\n" + s.Status().Description + "\n")
	for _, kv := range s.Attributes() {
		b.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
	}
	for _, ev := range s.Events() {
		b.WriteString(ev.Name + "\n")
		for _, kv := range ev.Attributes {
			b.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
		}
	}
	return b.String()
}

// tracedClient returns a client of a new redis-server, traced by
// InstrumentRedis into the recorder it returns.
func tracedClient(t *testing.T) (*redis.Client, *tracetest.SpanRecorder) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	rec, tp := newRecorder()
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Tracer: tp}))
	return rdb, rec
}

func TestInstrumentRedis_neverRecordsArguments(t *testing.T) {
	const secret = "s3cr3t-value-9f1c"
	const key = "otelx-test:secret-key-77ab"
	rdb, rec := tracedClient(t)
	ctx := t.Context()

	require.NoError(t, rdb.Set(ctx, key, secret, 0).Err())
	require.Equal(t, secret, rdb.Get(ctx, key).Val())
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key+"-h", "field", secret)
		p.Incr(ctx, key+"-n")
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, rdb.Eval(ctx, "return ARGV[1]", []string{key}, secret).Err())
	// Error replies can quote the arguments.
	err = rdb.Do(ctx, "NOSUCHCOMMAND", secret).Err()
	require.ErrorContains(t, err, secret, "the server should echo the argument for this test to mean anything")
	err = rdb.Eval(ctx, "return redis.error_reply('bad ' .. ARGV[1])", []string{key}, secret).Err()
	require.ErrorContains(t, err, secret)

	spans := rec.Ended()
	require.GreaterOrEqual(t, len(spans), 6)
	var sawError bool
	for _, sp := range spans {
		text := spanText(sp)
		require.NotContains(t, text, secret, "span %q leaks an argument", sp.Name())
		require.NotContains(t, text, "secret-key-77ab", "span %q leaks a key", sp.Name())
		require.NotContains(t, text, "db.statement")
		if sp.Status().Code == codes.Error {
			sawError = true
			require.Equal(t, "redis ERR", attrs(sp.Attributes())[otelx.AttrErrorType])
		}
	}
	require.True(t, sawError, "failed commands are still marked as errors")
}

func TestInstrumentRedis_tracesCommandsAndPipelines(t *testing.T) {
	rdb, rec := tracedClient(t)
	ctx := t.Context()

	require.NoError(t, rdb.Incr(ctx, "otelx-test:n").Err())
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "otelx-test:n")
		p.Incr(ctx, "otelx-test:n")
		return nil
	})
	require.NoError(t, err)

	names := map[string]bool{}
	for _, sp := range rec.Ended() {
		names[sp.Name()] = true
		if sp.Name() == "incr" {
			require.Equal(t, "redis", attrs(sp.Attributes())["db.system"])
		}
	}
	require.True(t, names["incr"], "got spans %v", names)
	require.True(t, names["redis.pipeline incr"], "got spans %v", names)
}

func TestInstrumentRedis_metrics(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Meter: mp}))

	require.NoError(t, rdb.Ping(t.Context()).Err())

	got := collect(t, reader)
	require.Contains(t, got, "github.com/redis/go-redis/extra/redisotel/db.client.connections.use_time")
}

func TestInstrumentRedis_defaultsToGlobal(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	rec, tp := newRecorder()
	reader := sdkmetric.NewManualReader()
	useGlobal(t, tp, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))

	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{}))
	require.NoError(t, rdb.Ping(t.Context()).Err())

	require.NotEmpty(t, rec.Ended())
	require.Contains(t, collect(t, reader), "github.com/redis/go-redis/extra/redisotel/db.client.connections.use_time")
}

func TestInstrumentRedis_nilClient(t *testing.T) {
	require.Error(t, otelx.InstrumentRedis(nil, otelx.Providers{}))
}

// A script's first call on a server answers NOSCRIPT (the script cache is
// empty) and the client sends EVAL instead: that miss, recovered from, is
// no error on any span; it is marked redkit.script_cache_miss. Neither is
// go-redis's connection handshake, whose CLIENT SETINFO a Redis before 7.2
// refuses and go-redis ignores. A real error reply still is an error.
func TestInstrumentRedis_recoveredNoscriptIsNoError(t *testing.T) {
	rdb, rec := tracedClient(t)
	ctx := t.Context()

	sc := redis.NewScript("return 1")
	require.NoError(t, sc.Run(ctx, rdb, nil).Err()) // EVALSHA: NOSCRIPT, then EVAL
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.EvalSha(ctx, redis.NewScript("return 2").Hash(), nil)
		return nil
	})
	require.ErrorContains(t, err, "NOSCRIPT")

	var misses int
	for _, sp := range rec.Ended() {
		require.NotEqual(t, codes.Error, sp.Status().Code, "span %s is an error:\n%s", sp.Name(), spanText(sp))
		for _, kv := range sp.Attributes() {
			if kv.Key == "redkit.script_cache_miss" && kv.Value.AsBool() {
				misses++
			}
		}
	}
	require.Equal(t, 2, misses, "the EVALSHA and the pipeline that got NOSCRIPT")

	require.Error(t, rdb.Eval(ctx, "return redis.error_reply('ERR boom')", nil).Err())
	last := rec.Ended()[len(rec.Ended())-1]
	require.Equal(t, codes.Error, last.Status().Code, "a real error reply stays an error")
}

// Every duration histogram InstrumentRedis switches on (redisotel's
// connection create and use times) is in seconds with DurationBuckets as
// bucket advice: in milliseconds with the SDK's default boundaries every
// call of a local Redis lands in (0, 5] and a p99 reads near 5 ms.
func TestInstrumentRedis_histogramsInSecondsWithBucketAdvice(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	rdb := s.Client()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	require.NoError(t, otelx.InstrumentRedis(rdb, otelx.Providers{Meter: mp}))
	ctx := t.Context()
	for range 20 {
		require.NoError(t, rdb.Ping(ctx).Err())
	}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); p.Ping(ctx); return nil })
	require.NoError(t, err)

	histograms := 0
	for name, m := range collect(t, reader) {
		h, ok := m.Data.(metricdata.Histogram[float64])
		if !ok {
			continue
		}
		histograms++
		require.Equal(t, "s", m.Unit, name)
		for _, p := range h.DataPoints {
			require.Equal(t, otelx.DurationBuckets, p.Bounds, name)
			most, ok := p.Max.Value()
			require.True(t, ok, name)
			require.Less(t, most, 10.0, "%s: a value of %v s: recorded in milliseconds?", name, most)
		}
	}
	require.Equal(t, 2, histograms, "create_time and use_time")
}

// A new connection makes no redis.dial span: go-redis dials with a context
// of its own, so each would be the root of a trace joined to nothing.
func TestInstrumentRedis_dialIsNotARootTrace(t *testing.T) {
	rdb, rec := tracedClient(t)
	ctx := t.Context()
	require.NoError(t, rdb.Ping(ctx).Err()) // the first command dials
	require.Positive(t, rdb.PoolStats().TotalConns)

	for _, sp := range rec.Ended() {
		require.NotEqual(t, "redis.dial", sp.Name(), "a dial was traced:\n%s", spanText(sp))
		if !sp.Parent().IsValid() {
			require.NotContains(t, sp.Name(), "dial")
		}
	}
	require.NotEmpty(t, rec.Ended())
}
