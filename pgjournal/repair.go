package pgjournal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redkit-go/redkit/wallet"
)

// Repair is what RepairWallet did about one booked entry Redis lost.
type Repair struct {
	StreamID string // the booked entry
	Kind     string
	Op       string
	// Outcome is "applied" (the operation ran again and Redis has its
	// effect and marker back), "already" (Redis still had the operation's
	// marker: it answered from it and changed nothing) or "skipped" (Err
	// says why: a kind that cannot be replayed, or the operation refused).
	Outcome string
	Err     error
}

// RepairWallet gives back to Redis the credits, debits and transfers of
// account that the book holds and Redis lost (the BookOnly entries of a
// drift; nothing when there is none), oldest first, by calling the same
// wallet operation again with the booked transaction ID, amount, peer and
// memo. The wallet's idempotency makes this safe: an operation whose marker
// survived is answered from it and applied nowhere twice, and one applied
// again leaves its marker, so a client retrying it within the idempotency
// window gets the stored answer. The entries the repair appends to Redis's
// journal are found booked by the sink (duplicate_op anomalies) and change
// nothing in the book.
//
// What it cannot repair, reported as skipped: openings, closings,
// checkpoints and holds (their TTL is not in the journal) with their
// captures and voids, the steps of transfers across slot groups, and an
// operation Redis now refuses (ErrInsufficientFunds after other postings,
// a *ConflictError when Redis kept an operation of that ID with other
// fields). Entries Redis lost that were never booked (lost before the sink
// read them) are not in the book and cannot be given back; nor can writes
// Redis lost whose entries it still holds, which the book cannot tell
// apart. Stock has no repair: a lost order can be sold again only by the
// buyer's retry.
func (b *Book) RepairWallet(ctx context.Context, l *wallet.Ledger, account string) ([]Repair, error) {
	ds, err := b.ReconcileWallet(ctx, l, account)
	if err != nil || len(ds) == 0 || len(ds[0].BookOnly) == 0 {
		return nil, err
	}
	rows, err := b.pool.Query(ctx, "SELECT stream_id, kind, op, peer, memo, d_posted, d_held FROM "+b.t("wallet_entries")+
		" WHERE account = $1 AND stream_id = ANY($2) ORDER BY ms, seq", account, ds[0].BookOnly)
	if err != nil {
		return nil, fmt.Errorf("pgjournal: repair %s: %w", account, err)
	}
	type entry struct {
		id, kind, op, peer, memo string
		delta, held              int64
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		err := r.Scan(&e.id, &e.kind, &e.op, &e.peer, &e.memo, &e.delta, &e.held)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgjournal: repair %s: %w", account, err)
	}
	out := make([]Repair, 0, len(es))
	for _, e := range es {
		r := Repair{StreamID: e.id, Kind: e.kind, Op: e.op}
		var res wallet.Result
		var err error
		switch {
		case e.op == "" || e.held != 0:
			err = fmt.Errorf("%w: %s entries cannot be replayed", ErrInvalid, e.kind)
		case e.kind == wallet.KindCredit:
			res, err = l.Credit(ctx, wallet.Tx{ID: e.op, Account: account, Amount: e.delta, Memo: e.memo})
		case e.kind == wallet.KindDebit:
			res, err = l.Debit(ctx, wallet.Tx{ID: e.op, Account: account, Amount: -e.delta, Memo: e.memo})
		case e.kind == wallet.KindTransferOut:
			res, err = l.Transfer(ctx, wallet.Transfer{ID: e.op, From: account, To: e.peer, Amount: -e.delta, Memo: e.memo})
		case e.kind == wallet.KindTransferIn:
			res, err = l.Transfer(ctx, wallet.Transfer{ID: e.op, From: e.peer, To: account, Amount: e.delta, Memo: e.memo})
		default:
			err = fmt.Errorf("%w: %s entries cannot be replayed", ErrInvalid, e.kind)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return out, err
		case errors.Is(err, wallet.ErrUnknownOutcome):
			// Calling RepairWallet again resolves it by the same ID.
			return out, fmt.Errorf("pgjournal: repair %s: %w", account, err)
		case err != nil:
			r.Outcome, r.Err = "skipped", err
		case res.Replayed:
			r.Outcome = "already"
		default:
			r.Outcome = "applied"
		}
		out = append(out, r)
	}
	return out, nil
}
