package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/internal/worker"
)

// Reserve holds every item of o for ttl (1s..7d), all or nothing, like
// Deduct but moving the units to reserved instead of sold. The hold ends with
// Confirm (sold), Cancel (back to available) or its deadline, measured on the
// Redis server's clock and returned in Result.Deadline: after it the units go
// back to available, lazily at the next Deduct or Reserve of the SKU or by the
// background reclaimer, whichever comes first. Reserved units count toward
// the per-buyer limit.
//
// Reserve is idempotent by o.ID like Deduct; it fails with ErrCancelled when
// Cancel reached the order first.
func (inv *Inventory) Reserve(ctx context.Context, o Order, ttl time.Duration, opts ...CallOption) (Result, error) {
	if err := valid.Duration("hold ttl", ttl, valid.HoldTTLMin, valid.HoldTTLMax); err != nil {
		return Result{}, fmt.Errorf("stock: reserve: %w", err)
	}
	res, err := inv.order(ctx, "reserve", deductScript, o, strconv.FormatInt(ttl.Milliseconds(), 10), nil, opts)
	if err == nil {
		inv.reclaimer.watch(inv, o.Items, trace.SpanContextFromContext(ctx))
	}
	return res, err
}

// Confirm sells every unit held by Reserve for o, which must be the order
// as reserved (same ID, buyer and items).
//
// Confirm after the hold's deadline fails with ErrHoldExpired (the units go
// back if they had not already); after Cancel with ErrCancelled; for an
// order that Reserve refused, with that refusal. A repeated Confirm returns
// the first result with Result.Replayed set; a Confirm with quantities other
// than the first one's (see ConfirmPartial), a *ConflictError.
func (inv *Inventory) Confirm(ctx context.Context, o Order, opts ...CallOption) (Result, error) {
	return inv.confirm(ctx, o, o.Items, opts)
}

// ConfirmPartial is Confirm selling only the units listed in take (per SKU
// of the order, 0..held; a SKU left out sells none). The other held units go
// back to available and to the buyer's allowance.
func (inv *Inventory) ConfirmPartial(ctx context.Context, o Order, take []Item, opts ...CallOption) (Result, error) {
	if take == nil {
		take = []Item{}
	}
	return inv.confirm(ctx, o, take, opts)
}

func (inv *Inventory) confirm(ctx context.Context, o Order, take []Item, opts []CallOption) (res Result, err error) {
	defer func() { inv.tel.unitsSold(ctx, "confirm", take, res, err) }()
	return inv.order(ctx, "confirm", holdScript, o, "confirm", func(items []Item) ([]any, error) {
		want := make(map[string]int64, len(take))
		for _, t := range take {
			if _, dup := want[t.SKU]; dup || t.Qty < 0 {
				return nil, fmt.Errorf("%w: confirmed quantity of %s", ErrInvalid, t.SKU)
			}
			want[t.SKU] = t.Qty
		}
		args := make([]any, len(items))
		for i, it := range items {
			q := want[it.SKU]
			switch {
			case q > it.Qty:
				return nil, fmt.Errorf("%w: confirming %d of %d held units of %s", ErrInvalid, q, it.Qty, it.SKU)
			}
			delete(want, it.SKU)
			args[i] = q
		}
		for sku := range want {
			return nil, fmt.Errorf("%w: %s is not in the order", ErrInvalid, sku)
		}
		return args, nil
	}, opts)
}

// Cancel returns the units held for o (the order as reserved) to available
// and to the buyer's allowance. Cancelling a cancelled or expired hold
// returns nil. Cancel before the order's Reserve arrived leaves a tombstone
// for the idempotency window, so the late Reserve fails with ErrCancelled.
// A confirmed order cannot be cancelled (a *ConflictError with Field
// "state"); refund it instead.
func (inv *Inventory) Cancel(ctx context.Context, o Order, opts ...CallOption) (Result, error) {
	return inv.order(ctx, "cancel", holdScript, o, "cancel", nil, opts)
}

// Refund returns the sold units of o, an order placed with Deduct or
// confirmed after Reserve, to available, counts them in Refunded and gives
// the buyer's allowance back. It is applied once: a repeated Refund returns
// the first result with Result.Replayed set. The order's marker must still
// exist: after the idempotency window Refund fails with ErrOrderNotFound.
func (inv *Inventory) Refund(ctx context.Context, o Order, opts ...CallOption) (Result, error) {
	return inv.order(ctx, "refund", holdScript, o, "refund", nil, opts)
}

// ReclaimResult reports one Reclaim call.
type ReclaimResult struct {
	Reclaimed int           // expired holds returned to available
	Remaining int           // expired holds left for the next call
	Lag       time.Duration // how long the oldest reclaimed hold was past its deadline
}

// reclaimBatch is the most holds one reclaim script call returns.
const reclaimBatch = 256

// Reclaim returns the units of up to 256 holds of sku (per bucket) whose
// deadline has passed to available. It is what the background reclaimer runs; calling
// it is never needed for correctness, since Deduct and Reserve reclaim
// expired holds of the SKUs they touch first. With WithReplicaAck, a bucket
// where it returned units waits for the replicas (WAIT after the script),
// and a shortfall returns the result with an error wrapping ErrReplicaAck.
func (inv *Inventory) Reclaim(ctx context.Context, sku string) (_ ReclaimResult, err error) {
	ctx, done := inv.tel.begin(ctx, "reclaim")
	defer func() { done(err) }()
	g, err := inv.checkSKU(sku)
	if err != nil {
		return ReclaimResult{}, err
	}
	tags, err := inv.tags(ctx, g, sku)
	if err != nil {
		return ReclaimResult{}, fmt.Errorf("stock: reclaim %s: %w", sku, err)
	}
	var res ReclaimResult
	var ackErr error
	for _, t := range tags {
		v, err := reclaimScript.Run(ctx, inv.rdb,
			[]string{inv.skuKey(t, sku), inv.buyersKey(t, sku), inv.journalKey(t, sku), inv.holdsKey(t, sku)},
			sku, reclaimBatch).Int64Slice()
		if err != nil {
			return res, errors.Join(fmt.Errorf("stock: reclaim %s: %w", sku, err), ackErr)
		}
		res.Reclaimed += int(v[0])
		res.Remaining += int(v[1])
		res.Lag = max(res.Lag, time.Duration(v[2])*time.Millisecond)
		if v[0] > 0 {
			if err := inv.acked(ctx, inv.skuKey(t, sku)); err != nil && ackErr == nil {
				ackErr = fmt.Errorf("stock: reclaim %s: %w", sku, err)
			}
		}
	}
	return res, ackErr
}

// acked waits, with WithReplicaAck, until the replicas have every write the
// primary owning key had (script.Acked): for a write made by a script run
// without RunAck because whether it changes anything is known only from
// its reply. A failed WAIT is a shortfall, wrapping ErrReplicaAck.
func (inv *Inventory) acked(ctx context.Context, key string) error {
	_, err := script.Acked(ctx, inv.rdb, inv.cfg.ack, key)
	if err != nil && !errors.Is(err, ErrReplicaAck) {
		err = fmt.Errorf("%w: %w", ErrReplicaAck, err)
	}
	return err
}

// reclaimer runs Reclaim in the background for every SKU this Inventory
// reserved, from the first Reserve until Close.
type reclaimer struct {
	mu    sync.Mutex
	skus  map[string]struct{}
	cause trace.SpanContext // the span of the first Reserve's caller, linked from each round
	w     worker.Worker
}

// Watch adds SKUs to the background reclaimer, for SKUs that other
// processes reserved (SKUs reserved through this Inventory are added by
// Reserve). It starts the reclaimer unless WithReclaimInterval(0) disabled
// it; Close stops it. Invalid names are ignored.
func (inv *Inventory) Watch(skus ...string) {
	items := make([]Item, 0, len(skus))
	for _, sku := range skus {
		if _, err := inv.checkSKU(sku); err == nil {
			items = append(items, Item{SKU: sku})
		}
	}
	inv.reclaimer.watch(inv, items, trace.SpanContext{})
}

func (r *reclaimer) watch(inv *Inventory, items []Item, cause trace.SpanContext) {
	if inv.cfg.reclaimEvery <= 0 {
		return
	}
	r.mu.Lock()
	if r.skus == nil {
		r.skus = map[string]struct{}{}
	}
	for _, it := range items {
		r.skus[it.SKU] = struct{}{}
	}
	if !r.cause.IsValid() {
		r.cause = cause
	}
	r.mu.Unlock()
	r.w.Start(func(ctx context.Context) { r.run(ctx, inv) })
}

// run reclaims every interval until ctx, which close cancels, ends; the
// Reclaim calls in flight then are cancelled too.
func (r *reclaimer) run(ctx context.Context, inv *Inventory) {
	t := time.NewTicker(inv.cfg.reclaimEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		skus := make([]string, 0, len(r.skus))
		for sku := range r.skus {
			skus = append(skus, sku)
		}
		cause := r.cause
		r.mu.Unlock()
		rctx, endRound := inv.tel.reclaimRound(ctx, cause)
		for _, sku := range skus {
			for ctx.Err() == nil {
				res, err := inv.Reclaim(rctx, sku)
				if err != nil && !errors.Is(err, ErrReplicaAck) {
					break
				}
				inv.tel.reclaimedBatch(rctx, res)
				if err != nil || res.Remaining == 0 {
					break // replicas behind: the next round goes on
				}
			}
		}
		endRound()
	}
}

// close stops the background reclaimer and waits for it.
func (r *reclaimer) close() { r.w.Stop() }
