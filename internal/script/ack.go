package script

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/valid"
)

// Ack asks RunAck to wait for replicas to acknowledge a write. The zero value
// means no waiting.
type Ack struct {
	Replicas int           // replicas that must acknowledge; 0 = do not wait
	Timeout  time.Duration // how long WAIT may block; must be > 0 when Replicas > 0
	Required bool          // fewer acknowledgements than Replicas is an error
}

// ErrReplicaAck means fewer replicas than asked acknowledged a write within
// the timeout. The write itself HAS happened on the primary; it may be lost if
// the primary fails before a replica catches up.
var ErrReplicaAck = errors.New("redkit: replica acknowledgement not reached")

// RunAck runs s like Script.Run and, when ack.Replicas > 0, pipelines
// WAIT ack.Replicas ack.Timeout after the EVALSHA on the connection to the
// primary that owns keys[0] (on a Cluster client, the master for that slot:
// a WAIT anywhere else would count nothing). NOSCRIPT is handled inside that
// pipeline: SCRIPT LOAD, EVALSHA and WAIT are resent together once.
//
// WAIT counts replicas that have this connection's last write, and a script
// that replays an operation writes nothing: WAIT would then cover some older
// write of the connection, not the operation's, which another connection (or
// process) made and which a replica may not have yet. So a SET of AckKey
// (keys[0]'s slot, a minute's TTL) goes between the script and WAIT: every
// write the primary had when the script ran is then before this
// connection's last write, and an acknowledgement covers the operation
// whoever first made it. (Redis 7.0.15 already moves a connection's offset
// on a read-only command, so there the marker changes nothing; it makes the
// guarantee rest on WAIT's documented contract rather than on that.)
//
// cmd holds the script reply; acked is the number of replicas WAIT reported.
// err is cmd.Err() when the script failed (redis.Nil included); otherwise it
// wraps ErrReplicaAck when ack.Required and acked < ack.Replicas, and is nil.
// A failed WAIT counts as 0 acknowledgements.
//
// The WAIT reply is read within the client's ReadTimeout (go-redis applies
// one timeout to a whole pipeline), so ack.Timeout must be shorter than it;
// otherwise RunAck returns an error wrapping valid.ErrInvalid and sends nothing.
func RunAck(ctx context.Context, c redis.UniversalClient, ack Ack, s *Script, keys []string, args ...any) (cmd *redis.Cmd, acked int, err error) {
	if ack.Replicas <= 0 {
		cmd = s.Run(ctx, c, keys, args...)
		return cmd, 0, cmd.Err()
	}
	if len(keys) == 0 {
		err := fmt.Errorf("%w: replica ack needs a key to find its primary", valid.ErrInvalid)
		return failed(ctx, err), 0, err
	}
	primary, err := Primary(ctx, c, keys[0])
	if err != nil {
		return failed(ctx, err), 0, err
	}
	if err := checkAckTimeout(ack.Timeout, primary.Options().ReadTimeout); err != nil {
		return failed(ctx, err), 0, err
	}

	cmd, wait := evalAndWait(ctx, primary, ack, s, keys, args, false)
	if isNoScript(cmd.Err()) {
		cmd, wait = evalAndWait(ctx, primary, ack, s, keys, args, true)
	}
	if err := cmd.Err(); err != nil {
		return cmd, 0, err
	}
	acked = int(wait.Val()) // 0 when WAIT failed
	if ack.Required && acked < ack.Replicas {
		return cmd, acked, fmt.Errorf("%w: %d of %d replicas within %v", ErrReplicaAck, acked, ack.Replicas, ack.Timeout)
	}
	return cmd, acked, nil
}

// Acked waits, as RunAck does after a script, until ack.Replicas replicas
// have every write the primary owning key had when it was called, whoever
// made them: for a step that only reads what an earlier call wrote (a
// recovery), before building on it. It returns the replicas counted, and an
// error wrapping ErrReplicaAck when ack.Required and they are too few. With
// ack.Replicas <= 0 it sends nothing.
func Acked(ctx context.Context, c redis.UniversalClient, ack Ack, key string) (int, error) {
	if ack.Replicas <= 0 {
		return 0, nil
	}
	primary, err := Primary(ctx, c, key)
	if err != nil {
		return 0, err
	}
	if err := checkAckTimeout(ack.Timeout, primary.Options().ReadTimeout); err != nil {
		return 0, err
	}
	pipe := primary.Pipeline()
	set := pipe.Set(ctx, AckKey(key), "1", time.Minute)
	wait := waitCmd(ctx, ack)
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx)
	if err := set.Err(); err != nil {
		return 0, err
	}
	acked := int(wait.Val())
	if ack.Required && acked < ack.Replicas {
		return acked, fmt.Errorf("%w: %d of %d replicas within %v", ErrReplicaAck, acked, ack.Replicas, ack.Timeout)
	}
	return acked, nil
}

// waitCmd is WAIT ack.Replicas ack.Timeout. WAIT's timeout is in whole
// milliseconds and 0 means forever: round up.
func waitCmd(ctx context.Context, ack Ack) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "wait", ack.Replicas, (ack.Timeout + time.Millisecond - 1).Milliseconds())
}

// evalAndWait sends [SCRIPT LOAD,] EVALSHA, WAIT in one pipeline on one
// connection, so WAIT covers exactly this write.
func evalAndWait(ctx context.Context, primary *redis.Client, ack Ack, s *Script, keys []string, args []any, load bool) (*redis.Cmd, *redis.IntCmd) {
	pipe := primary.Pipeline()
	if load {
		pipe.ScriptLoad(ctx, s.src)
	}
	cmd := pipe.EvalSha(ctx, s.Hash(), keys, args...)
	pipe.Set(ctx, AckKey(keys[0]), "1", time.Minute)
	wait := waitCmd(ctx, ack)
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // errors are on each command
	return cmd, wait
}

// AckKey is the key RunAck writes before WAIT: in key's slot and, for a
// key of the schema <prefix>:<module>:v<N>:{<tag>}:..., under its
// "<prefix>:<module>:v<N>:{<tag>}" (so a module's ACL key pattern covers it).
func AckKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[:i+1+j+1] + ":ack"
		}
	}
	return "{" + key + "}:ack"
}

// Primary returns a client whose connections reach the primary that owns
// key: c itself for a *redis.Client (including a Sentinel failover client),
// the master for key's slot for a *redis.ClusterClient. Other client types
// are an error wrapping valid.ErrInvalid.
func Primary(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		primary, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("primary for key: %w", err)
		}
		return primary, nil
	default:
		return nil, fmt.Errorf("%w: need a *redis.Client or *redis.ClusterClient to reach a key's primary, not %T", valid.ErrInvalid, c)
	}
}

func checkAckTimeout(timeout, readTimeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("%w: replica ack timeout is %v, must be positive (WAIT 0 blocks forever)", valid.ErrInvalid, timeout)
	}
	if readTimeout > 0 && timeout >= readTimeout {
		return fmt.Errorf("%w: replica ack timeout %v must be shorter than the client's ReadTimeout %v", valid.ErrInvalid, timeout, readTimeout)
	}
	return nil
}

// failed returns a script command that carries err and was never sent.
func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
