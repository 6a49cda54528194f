package script_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/redistest"
)

var (
	ackOne    = script.Ack{Replicas: 1, Timeout: 5 * time.Second, Required: true}
	ackBrief  = script.Ack{Replicas: 1, Timeout: 200 * time.Millisecond, Required: true}
	longReads = func(o *redis.Options) { o.ReadTimeout = 30 * time.Second }
)

func TestRunAck_replica_acked(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	rdb := p.Primary.Client(longReads)
	ctx := t.Context()
	hook := &counter{}
	rdb.AddHook(hook)
	require.NoError(t, rdb.ScriptLoad(ctx, incr.Source()).Err())
	hook.reset()

	cmd, acked, err := script.RunAck(ctx, rdb, ackOne, incr, []string{"ack"})
	require.NoError(t, err)
	require.Equal(t, 1, acked)
	require.EqualValues(t, 1, cmd.Val())
	// Acknowledged means the replica has it.
	require.Equal(t, "1", p.Replica.Client().Get(ctx, "ack").Val())
	sent, pipes := hook.reset()
	require.Equal(t, map[string]int{"evalsha": 1, "wait": 1}, sent)
	require.Equal(t, 1, pipes, "EVALSHA and WAIT share one round trip")

	// NOSCRIPT inside the pipeline: load, run and wait again, together.
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	hook.reset()
	cmd, acked, err = script.RunAck(ctx, rdb, ackOne, incr, []string{"ack"})
	require.NoError(t, err)
	require.Equal(t, 1, acked)
	require.EqualValues(t, 2, cmd.Val())
	sent, pipes = hook.reset()
	require.Equal(t, map[string]int{"evalsha": 2, "wait": 2, "script load": 1}, sent)
	require.Equal(t, 2, pipes)
	require.Equal(t, "2", p.Replica.Client().Get(ctx, "ack").Val())
}

func TestRunAck_noReplica(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client(longReads)
	ctx := t.Context()

	cmd, acked, err := script.RunAck(ctx, rdb, ackBrief, incr, []string{"solo"})
	require.ErrorIs(t, err, script.ErrReplicaAck)
	require.Equal(t, 0, acked)
	require.EqualValues(t, 1, cmd.Val(), "the write happened")
	require.Equal(t, "1", rdb.Get(ctx, "solo").Val())

	optional := ackBrief
	optional.Required = false
	cmd, acked, err = script.RunAck(ctx, rdb, optional, incr, []string{"solo"})
	require.NoError(t, err)
	require.Equal(t, 0, acked)
	require.EqualValues(t, 2, cmd.Val())
}

func TestRunAck_zeroAck_isPlainRun(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	hook := &counter{}
	rdb.AddHook(hook)
	require.NoError(t, rdb.ScriptLoad(t.Context(), incr.Source()).Err())
	hook.reset()
	cmd, acked, err := script.RunAck(t.Context(), rdb, script.Ack{}, incr, []string{"plain"})
	require.NoError(t, err)
	require.Equal(t, 0, acked)
	require.EqualValues(t, 1, cmd.Val())
	sent, _ := hook.reset()
	require.Equal(t, map[string]int{"evalsha": 1}, sent)
}

func TestRunAck_scriptError(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client(longReads)
	bad := script.New("return redis.error_reply('wallet: insufficient funds')")
	cmd, acked, err := script.RunAck(t.Context(), rdb, ackBrief, bad, []string{"k"})
	require.ErrorContains(t, err, "wallet: insufficient funds")
	require.NotErrorIs(t, err, script.ErrReplicaAck)
	require.Equal(t, err, cmd.Err())
	require.Equal(t, 0, acked)
}

func TestRunAck_badTimeout_sendsNothing(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ctx := t.Context()
	rt := rdb.Options().ReadTimeout
	for _, timeout := range []time.Duration{0, -time.Second, rt, time.Hour} {
		_, _, err := script.RunAck(ctx, rdb, script.Ack{Replicas: 1, Timeout: timeout}, incr, []string{"never"})
		require.ErrorIs(t, err, valid.ErrInvalid, timeout)
	}
	require.EqualValues(t, 0, rdb.Exists(ctx, "never").Val())
}

// On a Cluster, WAIT must run on the master that took the write. With that
// master's replica frozen, WAIT there counts 0; a WAIT sent to any other
// master (each has a healthy replica) would have counted 1.
func TestRunAck_cluster_waitsOnKeysPrimary(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	rdb := c.Client(func(o *redis.ClusterOptions) { o.ReadTimeout = 30 * time.Second })
	ctx := t.Context()

	for _, key := range []string{"{a}:n", "{b}:n", "{c}:n", "{d}:n"} {
		cmd, acked, err := script.RunAck(ctx, rdb, ackOne, incr, []string{key})
		require.NoError(t, err, key)
		require.Equal(t, 1, acked, key)
		require.EqualValues(t, 1, cmd.Val(), key)
	}

	const key = "{frozen}:n"
	replica, err := c.Replica(ctx, key)
	require.NoError(t, err)
	require.NoError(t, replica.Pause())
	defer func() { require.NoError(t, replica.Resume()) }()

	cmd, acked, err := script.RunAck(ctx, rdb, ackBrief, incr, []string{key})
	require.ErrorIs(t, err, script.ErrReplicaAck)
	require.Equal(t, 0, acked)
	require.EqualValues(t, 1, cmd.Val())
}

// A script that writes nothing (a replay of an operation another connection
// made) is acknowledged only once the replicas have what the primary had
// when it ran: WAIT alone would count this connection's own writes, none.
func TestRunAck_readOnlyScript_coversEarlierWrites(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	get := script.New("return redis.call('GET', KEYS[1])")
	writer := p.Primary.Client(longReads)
	reader := p.Primary.Client(longReads) // another process
	require.NoError(t, reader.ScriptLoad(ctx, get.Source()).Err())
	require.NoError(t, p.Sync(ctx))
	// The primary knows the replica has every write the reader made.
	require.Equal(t, int64(1), reader.Do(ctx, "WAIT", 1, 5000).Val())
	require.NoError(t, p.Replica.Pause())
	t.Cleanup(func() { _ = p.Replica.Resume() })

	_, _, err := script.RunAck(ctx, writer, ackBrief, incr, []string{"{op}:x"})
	require.ErrorIs(t, err, script.ErrReplicaAck)
	t.Logf("plain WAIT on reader: %v; info: %s", reader.Do(ctx, "WAIT", 1, 200).Val(), writer.Info(ctx, "replication").Val())
	cmd, _, err := script.RunAck(ctx, reader, ackBrief, get, []string{"{op}:x"})
	require.Equal(t, "1", cmd.Val(), "the read sees the write")
	require.ErrorIs(t, err, script.ErrReplicaAck, "which the replica does not have yet")

	require.NoError(t, p.Replica.Resume())
	_, acked, err := script.RunAck(ctx, reader, ackOne, get, []string{"{op}:x"})
	require.NoError(t, err)
	require.Equal(t, 1, acked)
	require.Equal(t, "1", p.Replica.Client().Get(ctx, "{op}:x").Val())
}

func TestAckKey_sameSlotAndPrefix(t *testing.T) {
	for _, k := range []string{"redkit:stock:v1:{shop-7}:op:o-1", "redkit:wallet:v1:{a}:acct:a", "plain", "a{b}c"} {
		ack := script.AckKey(k)
		require.Equal(t, redistest.KeySlot(k), redistest.KeySlot(ack), k)
	}
	require.Equal(t, "redkit:stock:v1:{shop-7}:ack", script.AckKey("redkit:stock:v1:{shop-7}:op:o-1"))
}

// Acked waits for the replicas to have what the primary has, whoever wrote
// it, and reports a shortfall.
func TestAcked(t *testing.T) {
	p := redistest.NewPair(t, redistest.Options{})
	ctx := t.Context()
	writer := p.Primary.Client(longReads)
	other := p.Primary.Client(longReads)
	require.NoError(t, p.Sync(ctx))
	n, err := script.Acked(ctx, other, ackOne, "{op}:y")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, p.Replica.Pause())
	t.Cleanup(func() { _ = p.Replica.Resume() })
	require.NoError(t, writer.Set(ctx, "{op}:y", "1", 0).Err())
	_, err = script.Acked(ctx, other, ackBrief, "{op}:y")
	require.ErrorIs(t, err, script.ErrReplicaAck)
	require.NoError(t, p.Replica.Resume())
	n, err = script.Acked(ctx, other, ackOne, "{op}:y")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "1", p.Replica.Client().Get(ctx, "{op}:y").Val())

	n, err = script.Acked(ctx, other, script.Ack{}, "{op}:y")
	require.NoError(t, err)
	require.Zero(t, n, "no acknowledgement asked: nothing sent")
}
