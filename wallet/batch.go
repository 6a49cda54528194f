package wallet

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
)

// BatchResult is the outcome of one transfer of a TransferBatch: Err is what
// Transfer would have returned.
type BatchResult struct {
	Result Result
	Err    error
}

// TransferBatch applies many transfers in one pipeline (on a Cluster, one
// per node involved) instead of one round trip each, and returns their
// outcomes in order. Each transfer is still its own atomic, idempotent
// script with its own transaction ID, exactly as with Transfer: transfers
// of a batch are not applied together, and their order is only the order in
// which they were sent. A transfer whose reply is lost is retried alone with
// the same ID. Invalid transfers, and transfers across slot groups
// (ErrCrossGroup: use Transfer), are refused without being sent. With
// WithReplicaAck, each transfer is sent on its own with its WAIT.
func (l *Ledger) TransferBatch(ctx context.Context, ts []Transfer, opts ...CallOption) []BatchResult {
	out := make([]BatchResult, len(ts))
	if l.cfg.ack.Replicas > 0 {
		for i, t := range ts {
			// transferCall refuses what a batch never sends (ErrCrossGroup
			// included) before any I/O, as the pipelined path does.
			if _, err := l.transferCall(t, opts); err != nil {
				out[i].Result.TxID, out[i].Err = t.ID, err
				continue
			}
			out[i].Result, out[i].Err = l.Transfer(ctx, t, opts...)
		}
		return out
	}
	ctx, op := l.tel.start(ctx, "transfer_batch")
	var firstErr error
	defer func() { op.end(firstErr, false) }()

	calls := make([]script.Call, 0, len(ts))
	sent := make([]int, 0, len(ts))
	for i, t := range ts {
		out[i].Result.TxID = t.ID
		call, err := l.transferCall(t, opts)
		if err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, call)
		sent = append(sent, i)
	}
	var cmds []*redis.Cmd
	if len(calls) > 0 {
		cmds = script.Pipeline(ctx, l.rdb, calls)
	}
	for j, cmd := range cmds {
		i, t, call := sent[j], ts[sent[j]], calls[j]
		v, err := cmd.Val(), cmd.Err()
		if err != nil && (retry.Ambiguous(err) || retry.Retryable(err)) {
			first := err
			v, err = l.write(ctx, call.Script, call.Keys, call.Args...)
			if v == nil {
				err = l.cfg.policy.After(first, err)
			}
		} else if err != nil {
			v, err = nil, l.scriptError(ctx, err)
		}
		if v != nil && status(strs(v), 0) == "again" {
			v, err = l.writeSwept(ctx, []string{t.From, t.To}, call.Script, call.Keys, call.Args...)
		}
		res := &out[i].Result
		canon, nonce := transferMarker(call)
		v, stale := flagged(v)
		if stale {
			l.recoverStale(ctx, t.From)
		}
		out[i].Result, out[i].Err = l.posting("transfer", t.ID, v, err, res, t.From, t.To, canon, nonce)
		l.tel.count(ctx, "transfer", out[i].Err, out[i].Result.Replayed)
	}
	for _, r := range out {
		if r.Err != nil && !refusal(r.Err) {
			firstErr = r.Err
			break
		}
	}
	return out
}
