package script

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/internal/retry"
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

	var wait *redis.IntCmd
	err = onPrimary(ctx, c, primary, keys[0], func(node *redis.Client, asking bool) error {
		cmd, wait = evalAndWait(ctx, node, ack, s, keys, args, false, asking)
		if isNoScript(cmd.Err()) {
			cmd, wait = evalAndWait(ctx, node, ack, s, keys, args, true, asking)
		}
		return cmd.Err()
	})
	if err != nil {
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
	var wait *redis.IntCmd
	err = onPrimary(ctx, c, primary, key, func(node *redis.Client, asking bool) error {
		pipe := node.Pipeline()
		marker := AckKey(key)
		if asking {
			pipe.Do(ctx, "asking")
			marker = askingMarker(marker)
		}
		set := pipe.Set(ctx, marker, "1", time.Minute)
		wait = waitCmd(ctx, ack)
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx)
		return set.Err()
	})
	if err != nil {
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

// evalAndWait sends [SCRIPT LOAD,] EVALSHA, SET marker, WAIT in one
// pipeline on one connection, so WAIT covers exactly this write. asking
// puts ASKING before each command on the key's slot: the node is importing
// the slot and, after an ASK redirection, serves it to the next command only.
func evalAndWait(ctx context.Context, primary *redis.Client, ack Ack, s *Script, keys []string, args []any, load, asking bool) (*redis.Cmd, *redis.IntCmd) {
	pipe := primary.Pipeline()
	if load {
		pipe.ScriptLoad(ctx, s.src)
	}
	if asking {
		pipe.Do(ctx, "asking")
	}
	cmd := pipe.EvalSha(ctx, s.Hash(), keys, args...)
	marker := AckKey(keys[0])
	if asking {
		pipe.Do(ctx, "asking")
		marker = askingMarker(marker)
	}
	pipe.Set(ctx, marker, "1", time.Minute)
	wait := waitCmd(ctx, ack)
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // errors are on each command
	return cmd, wait
}

// redirectBudget bounds how long onPrimary follows redirections and waits
// out TRYAGAIN, CLUSTERDOWN and a dead primary for one call (ctx's
// deadline, when sooner, bounds it too): long enough for a slot migration's
// last batch and a failover's vote, short of a caller's patience.
const redirectBudget = 3 * time.Second

// onPrimary runs send on the connection to key's primary and, on a Cluster
// client, follows what the pipeline on a node client does not: MOVED (the
// slot has a new owner after a failover or a finished migration) and ASK
// (the key has already migrated) are re-sent to the node the reply names,
// with ASKING for ASK, and the ClusterClient's slot map is reloaded
// (retry.Reload) so that its next MasterForKey names the new owner;
// TRYAGAIN (the slot's keys are split by a migration) and CLUSTERDOWN (a
// failover in progress) are re-sent after a short wait; a dial the primary
// refused (a master killed, which a stale map still names) is re-sent to
// the master the reloaded map names. Each of these means the command did
// not run where it was sent, so the re-send cannot apply a write twice; the
// script's own operation ID covers an earlier send that the node client's
// own retries may have made. An error that says the primary is gone but
// the command may have run there (EOF, a reset, an i/o timeout) reloads
// the map and is returned: the caller knows whether it may send again. It
// stops at the first other outcome, after redirectBudget, or when ctx
// ends, and returns send's last error.
func onPrimary(ctx context.Context, c redis.UniversalClient, primary *redis.Client, key string, send func(node *redis.Client, asking bool) error) error {
	cc, cluster := c.(*redis.ClusterClient)
	node, asking := primary, false
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := send(node, asking)
		if !cluster || err == nil {
			return err
		}
		moved, isMoved := redis.IsMovedError(err)
		ask, isAsk := redis.IsAskError(err)
		transient := redis.IsTryAgainError(err) || redis.IsClusterDownError(err)
		gone := !isMoved && !isAsk && !transient && retry.StaleMap(err)
		if gone && retry.Ambiguous(err) {
			retry.Reload(ctx, c)
			return err
		}
		if !isMoved && !isAsk && !transient && !gone {
			return err
		}
		if time.Since(start) >= redirectBudget || ctx.Err() != nil {
			if isMoved || gone {
				retry.Reload(ctx, c)
			}
			return err
		}
		// A redirection is followed at once the first time; a node
		// that answers the same again (nodes that do not agree yet
		// during a failover) is given a moment, as is a dead primary
		// (the cluster may not have promoted its replica yet).
		if transient || gone || attempt > 0 {
			wait := min(time.Duration(attempt+1)*10*time.Millisecond, 100*time.Millisecond)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		if isMoved || gone {
			retry.Reload(ctx, c)
		}
		asking = isAsk
		switch {
		case isMoved:
			node = retry.Node(ctx, cc, moved)
		case isAsk:
			node = retry.Node(ctx, cc, ask)
		case gone:
			node = nil
		}
		if node == nil {
			// A node the client's map does not hold yet, or a dead
			// one: the master the reloaded map names is the one to ask.
			asking = false
			if node, err = Primary(ctx, c, key); err != nil {
				return err
			}
		}
	}
}

// askingMarker is the marker written on a node that is importing the slot:
// a name of its own, so that it never exists on the node the slot is
// migrating from (where AckKey may still be): MIGRATE of AckKey would
// otherwise find it on the target and fail (BUSYKEY), stopping the
// migration.
func askingMarker(marker string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return marker + ":" + hex.EncodeToString(b[:])
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
