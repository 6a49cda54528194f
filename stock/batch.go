package stock

import (
	"context"

	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
)

// BatchResult is the outcome of one order of DeductBatch: what Deduct would
// have returned for it.
type BatchResult struct {
	Result
	Err error
}

// DeductBatch deducts many independent orders in one pipeline, for gateways
// and bulk work: each order is all or nothing and idempotent exactly as with
// Deduct, but the orders do not depend on each other and may span any slot
// groups (on a Cluster the pipeline is split per node). Results come back in
// the order of orders. Orders whose reply was lost are retried one by one
// with the same arguments, as Deduct does.
//
// With WithReplicaAck set, the orders are sent one by one through Deduct's
// path instead, so each write waits for its replicas.
func (inv *Inventory) DeductBatch(ctx context.Context, orders []Order, opts ...CallOption) []BatchResult {
	ctx, done := inv.tel.begin(ctx, "deduct_batch")
	out := inv.deductBatch(ctx, orders, opts)
	for i, r := range out {
		outcome, _ := outcomeOf(r.Result, r.Err)
		inv.tel.count(ctx, "deduct", outcome)
		inv.tel.unitsSold(ctx, "deduct", orders[i].Items, r.Result, r.Err)
	}
	done(nil)
	return out
}

func (inv *Inventory) deductBatch(ctx context.Context, orders []Order, opts []CallOption) []BatchResult {
	out := make([]BatchResult, len(orders))
	if inv.cfg.ack.Replicas > 0 {
		for i, o := range orders {
			out[i].Result, out[i].Err = inv.runOrder(ctx, "deduct", deductScript, o, "0", nil, opts)
		}
		return out
	}
	prepared := make([]orderCall, len(orders))
	var calls []script.Call
	var which []int
	for i, o := range orders {
		if inv.ownPath(ctx, o, opts) {
			out[i].Result, out[i].Err = inv.runOrder(ctx, "deduct", deductScript, o, "0", nil, opts)
			continue
		}
		prepared[i] = inv.prepare("deduct", deductScript, o, "0", nil, opts)
		if prepared[i].err != nil {
			out[i].Err = prepared[i].err
			continue
		}
		c := prepared[i]
		calls = append(calls, script.Call{Script: c.script, Keys: c.keys, Args: c.args})
		which = append(which, i)
	}
	if len(calls) == 0 {
		return out
	}
	cmds := script.Pipeline(ctx, inv.rdb, calls)
	for k, cmd := range cmds {
		i, c := which[k], prepared[which[k]]
		reply, err := cmd.Slice()
		var ackErr error
		if retry.Ambiguous(err) || retry.Retryable(err) || err == nil && str(reply, 0) == "again" {
			// The pipeline was the first attempt; continue with the rest.
			first := err
			reply, ackErr, err = inv.write(ctx, c.script, c.keys, c.args)
			err = inv.cfg.retry.After(first, err)
		}
		if code := str(reply, 0); err == nil && (code == "buckets" || code == "short") {
			// A SKU split into buckets needs routing or a refill: nothing was
			// decided, so the order takes Deduct's path.
			out[i].Result, out[i].Err = inv.runOrder(ctx, "deduct", deductScript, orders[i], "0", nil, opts)
			continue
		}
		out[i].Result, out[i].Err = c.finish(reply, ackErr, err)
	}
	return out
}
