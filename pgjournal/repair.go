package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// Repair is what RepairWallet or RepairStock did about one booked entry
// Redis lost.
type Repair struct {
	StreamID string // the booked entry
	Kind     string
	Op       string
	// Outcome is "applied" (the operation ran again and Redis has its
	// effect and marker back), "already" (Redis still had the operation's
	// marker: it answered from it and changed nothing) or "skipped" (Err
	// says why: ErrUnrepairable when the entry cannot be given back
	// exactly, or the refusal of the operation sent again).
	Outcome string
	Err     error
}

// ErrUnrepairable: a booked entry Redis lost cannot be given back exactly
// (its kind has no replay, it is a step of a transfer across slot groups,
// its idempotency window has passed, the caller does not know its order),
// or a drift has no lost booked entry behind it. Nothing was sent; the
// drift stays for an operator to decide.
var ErrUnrepairable = errors.New("pgjournal: cannot be repaired exactly")

// replayable reports why an entry booked at ms cannot be sent again within
// window ("" when it can): a replay is safe only while the operation's
// marker lives (one window from the entry, on Redis's clock), for where it
// survived it answers and where it did not the replay restores it. A replay
// after the window would be a new operation, applied again wherever the
// first one's effect survived. A tenth of the window is kept as a margin
// for this process's clock against Redis's and for the call itself.
func replayable(ms int64, window time.Duration) string {
	age := time.Since(time.UnixMilli(ms))
	if age >= window-window/10 {
		return fmt.Sprintf("its idempotency window (%v) has passed: %v old", window, age.Round(time.Millisecond))
	}
	return ""
}

// RepairWallet gives back to Redis the credits, debits and transfers within
// a slot group of account that the book holds and Redis lost (the BookOnly
// entries of a drift; nothing when there is none), oldest first, by calling
// the same wallet operation again with every field its client sent, as
// the booked entry keeps them: transaction ID, amount, peer, memo (its
// exact bytes) and the currency a credit or debit named. The wallet's
// idempotency makes this safe within the operation's idempotency window
// (wallet.Ledger.IdempotencyWindow): an operation whose marker survived is
// answered from it and applied nowhere twice, and one applied again leaves
// its marker, so a client retrying it within the window gets the stored
// answer. The entries the repair appends to Redis's journal are found
// booked by the sink (duplicate_op anomalies) and change nothing in the
// book.
//
// What it cannot give back exactly is reported as skipped with
// ErrUnrepairable and never sent: openings, closings, checkpoints and holds
// (their TTL is not in the journal) with their captures and voids; the
// steps of transfers across slot groups (each step is one side of a
// transfer whose state lives in the source's group: sent again as a
// Transfer, it would be answered from a record the source kept while the
// destination lacks the credit, or begin a second transfer once that
// record is gone); and any entry older than its idempotency window less a
// tenth (a replay would be a new operation). An operation Redis now
// refuses (ErrInsufficientFunds after other postings, a *ConflictError
// when Redis kept an operation of that ID with other fields) is skipped
// with that refusal. A drift with no lost booked entry behind it (entries
// Redis lost before the sink read them, or older than Redis's journal) is
// ErrUnrepairable, with no repair. Writes Redis lost whose entries it
// still holds cannot be told apart. RepairStock is the stock counterpart,
// for deducts.
func (b *Book) RepairWallet(ctx context.Context, l *wallet.Ledger, account string) ([]Repair, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil ledger", ErrInvalid)
	}
	ds, err := b.ReconcileWallet(ctx, l, account)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	if len(ds[0].BookOnly) == 0 {
		return nil, fmt.Errorf("pgjournal: repair %s: %w: %v in Redis, %v in the book, and no booked entry Redis's journal lacks",
			account, ErrUnrepairable, ds[0].Redis, ds[0].Book)
	}
	type entry struct {
		id, kind, op, peer, memo, currency string
		raw                                []byte
		delta, held, ms                    int64
	}
	es, err := bookedLost(ctx, b, walletJournalDesc, []any{account}, ds[0].BookOnly, "peer, memo, memo_raw, currency, d_posted, d_held, ms",
		func(r pgx.CollectableRow) (entry, error) {
			var e entry
			err := r.Scan(&e.id, &e.kind, &e.op, &e.peer, &e.memo, &e.raw, &e.currency, &e.delta, &e.held, &e.ms)
			return e, err
		})
	if err != nil {
		return nil, fmt.Errorf("pgjournal: repair %s: %w", account, err)
	}
	window := l.IdempotencyWindow()
	out := make([]Repair, 0, len(es))
	for _, e := range es {
		r := Repair{StreamID: e.id, Kind: e.kind, Op: e.op}
		memo := e.memo
		if e.raw != nil {
			memo = string(e.raw)
		}
		transfer := e.kind == wallet.KindTransferOut || e.kind == wallet.KindTransferIn
		var res wallet.Result
		var err error
		switch {
		case e.op == "" || e.held != 0 || !transfer && e.kind != wallet.KindCredit && e.kind != wallet.KindDebit:
			err = fmt.Errorf("%w: %s entries cannot be replayed", ErrUnrepairable, e.kind)
		case transfer && groupOf(e.peer) != groupOf(account):
			err = fmt.Errorf("%w: a step of a transfer across slot groups (with %s)", ErrUnrepairable, e.peer)
		case replayable(e.ms, window) != "":
			err = fmt.Errorf("%w: %s", ErrUnrepairable, replayable(e.ms, window))
		case e.kind == wallet.KindCredit:
			res, err = l.Credit(ctx, wallet.Tx{ID: e.op, Account: account, Amount: e.delta, Currency: e.currency, Memo: memo})
		case e.kind == wallet.KindDebit:
			res, err = l.Debit(ctx, wallet.Tx{ID: e.op, Account: account, Amount: -e.delta, Currency: e.currency, Memo: memo})
		case e.kind == wallet.KindTransferOut:
			res, err = l.Transfer(ctx, wallet.Transfer{ID: e.op, From: account, To: e.peer, Amount: -e.delta, Memo: memo})
		default: // transfer_in within the group
			res, err = l.Transfer(ctx, wallet.Transfer{ID: e.op, From: e.peer, To: account, Amount: e.delta, Memo: memo})
		}
		if err := settle(ctx, account, &r, res.Replayed, err, wallet.ErrUnknownOutcome); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RepairStock gives back to Redis the deducts of sku that the book holds
// and Redis lost (the BookOnly entries of a drift; nothing when there is
// none), oldest first, by calling Deduct again with the whole order as its
// client sent it. A stock journal entry carries one SKU's part of an order
// (its ID, buyer and quantity), not the order: its other items may be on
// SKUs this book does not keep, and a Deduct with the same ID and fewer
// items would store a decision of another shape, refusing the client's
// own retry with a *stock.ConflictError. So the order comes from the
// caller's records: order(ctx, id) returns it, or false when it is not
// known (skipped). An order whose buyer or quantity for sku differs from
// the booked entry is skipped without being sent.
//
// Stock's idempotency makes the replay safe: an order whose marker
// survived is answered from it ("already") and applied nowhere twice; one
// applied again ("applied") leaves its marker, so the client's retry within
// the idempotency window gets the stored answer. An order refused now
// (ErrSoldOut: the units went to other buyers after Redis lost the sale;
// ErrBuyerLimit; a *ConflictError) is skipped with that error: the buyer
// was told the units were theirs, and only the operator can decide between
// restocking and cancelling the order. Reservations, confirmations,
// cancellations, expiries and refunds (a hold's deadline is not in the
// journal, and each depends on a hold Redis no longer has), restocks,
// write-offs, creations, closings and transfers between buckets are
// skipped: each is reported, never guessed. For a SKU split into buckets
// only the deducts of bucket 0 are found (the reconciler reads that
// journal alone: stock reads the others only through Consume); the lost
// orders of other buckets show in the drift's levels, not in BookOnly, and
// are not given back. It returns ErrInvalid for a
// nil inventory or order function, and ErrUnknownOutcome (calling
// RepairStock again resolves it by the same order ID).
func (b *Book) RepairStock(ctx context.Context, inv *stock.Inventory, sku string,
	order func(ctx context.Context, id string) (stock.Order, bool, error)) ([]Repair, error) {
	if inv == nil || order == nil {
		return nil, fmt.Errorf("%w: nil inventory or order function", ErrInvalid)
	}
	ds, err := b.ReconcileStock(ctx, inv, sku)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	if len(ds[0].BookOnly) == 0 {
		return nil, fmt.Errorf("pgjournal: repair %s: %w: %v in Redis, %v in the book, and no booked entry Redis's journal lacks",
			sku, ErrUnrepairable, ds[0].Redis, ds[0].Book)
	}
	type entry struct {
		id, kind, op, buyer string
		sold, ms            int64
	}
	es, err := bookedLost(ctx, b, stockJournalDesc, []any{sku, 0}, ds[0].BookOnly, "buyer, d_sold, ms",
		func(r pgx.CollectableRow) (entry, error) {
			var e entry
			err := r.Scan(&e.id, &e.kind, &e.op, &e.buyer, &e.sold, &e.ms)
			return e, err
		})
	if err != nil {
		return nil, fmt.Errorf("pgjournal: repair %s: %w", sku, err)
	}
	window := inv.IdempotencyWindow()
	out := make([]Repair, 0, len(es))
	for _, e := range es {
		r := Repair{StreamID: e.id, Kind: e.kind, Op: e.op}
		var res stock.Result
		var err error
		switch {
		case e.kind != stock.KindDeduct || e.op == "":
			err = fmt.Errorf("%w: %s entries cannot be replayed", ErrUnrepairable, e.kind)
		case replayable(e.ms, window) != "":
			err = fmt.Errorf("%w: %s", ErrUnrepairable, replayable(e.ms, window))
		default:
			var o stock.Order
			var ok bool
			o, ok, err = order(ctx, e.op)
			switch {
			case err != nil:
				return out, fmt.Errorf("pgjournal: repair %s: order %s: %w", sku, e.op, err)
			case !ok:
				err = fmt.Errorf("%w: order %s is not known", ErrUnrepairable, e.op)
			case o.ID != e.op || o.Buyer != e.buyer || qtyOf(o, sku) != e.sold:
				err = fmt.Errorf("%w: order %s does not match the booked entry (buyer %q, %d units)", ErrUnrepairable, e.op, e.buyer, e.sold)
			default:
				res, err = inv.Deduct(ctx, o)
			}
		}
		if err := settle(ctx, sku, &r, res.Replayed, err, stock.ErrUnknownOutcome); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// bookedLost reads the booked entries ids of one journal (a drift's
// BookOnly), oldest first: scan reads a row of stream_id, kind, op and
// cols.
func bookedLost[E any](ctx context.Context, b *Book, j *journal, key []any, ids []string, cols string,
	scan func(pgx.CollectableRow) (E, error)) ([]E, error) {
	rows, err := b.pool.Query(ctx, fmt.Sprintf("SELECT stream_id, kind, op, %s FROM %s WHERE %s AND stream_id = ANY($%d) ORDER BY ms, seq",
		cols, b.t(j.entries), j.keyWhere(), len(key)+1), append(append([]any{}, key...), ids)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// settle sets r's outcome from what replaying its entry returned: skipped
// (with err), already (replayed: Redis answered from the operation's
// marker) or applied. It returns the error that ends the repair instead:
// ctx ended, or the outcome is unknown (errors.Is(err, unknown); calling
// the repair again resolves it by the same ID).
func settle(ctx context.Context, key string, r *Repair, replayed bool, err, unknown error) error {
	switch {
	case err != nil && ctx.Err() != nil:
		return err
	case errors.Is(err, unknown):
		return fmt.Errorf("pgjournal: repair %s: %w", key, err)
	case err != nil:
		r.Outcome, r.Err = "skipped", err
	case replayed:
		r.Outcome = "already"
	default:
		r.Outcome = "applied"
	}
	return nil
}

// qtyOf is how many units of sku order takes.
func qtyOf(o stock.Order, sku string) int64 {
	var n int64
	for _, it := range o.Items {
		if it.SKU == sku {
			n += it.Qty
		}
	}
	return n
}
