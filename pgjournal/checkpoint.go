package pgjournal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redkit-go/redkit/wallet"
)

// ErrTrimmedUnbooked: a wallet checkpoint trimmed journal entries the book
// had not booked; they are lost to the book. The sink books the
// checkpoint with a gap anomaly when the balances moved, and the
// reconciler reports the account.
var ErrTrimmedUnbooked = errors.New("pgjournal: checkpoint trimmed entries the book had not booked")

// WalletPosition returns the stream ID of the last entry of account's
// journal that the book has read ("" when none): every entry up to it is
// booked (or recorded as an anomaly). wallet.Ledger.Entries from this
// cursor returns what the book has not read yet. It is the newest entry
// read, except after the journal was found written again below it (see
// SinkWallet), when it is the last entry of the journal read again.
func (b *Book) WalletPosition(ctx context.Context, account string) (string, error) {
	var ms, seq int64
	err := b.pool.QueryRow(ctx, "SELECT last_ms, last_seq FROM "+b.t("wallet_balances")+" WHERE account = $1", account).Scan(&ms, &seq)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && ms == 0 && seq == 0) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pgjournal: position %s: %w", account, err)
	}
	return fmt.Sprintf("%d-%d", ms, seq), nil
}

// ErrDrift: Redis and the book differ on the account; CheckpointWallet
// trims nothing over a difference (ReconcileWallet says what differs).
var ErrDrift = errors.New("pgjournal: Redis and the book differ")

// CheckpointWallet is wallet.Ledger.Checkpoint for an account whose journal
// the book keeps: it first books the account's journal to its end itself
// (as SinkWallet does, safe beside a running sink), then compares the
// account with the book (as ReconcileWallet does) and refuses with
// ErrDrift, trimming nothing, when they differ: the entries behind a
// difference (a write Redis lost, to be given back by RepairWallet) are
// found by their place in the journal, which a checkpoint would trim. Only
// then it checkpoints, so the trim removes only entries the book holds.
// wallet's Checkpoint trims every entry older than the checkpoint it
// writes, and takes no bound: an entry posted in the moment between this
// booking and Checkpoint's own verification is trimmed too.
// CheckpointWallet counts what the trim removed against what it knew to
// be booked and returns the checkpoint with ErrTrimmedUnbooked when more
// went (the count, in the error, is an upper bound when another sink
// booked the account at the same moment). It returns ErrBusy when the
// account kept changing during five attempts to book or compare it
// (nothing trimmed), and the errors of wallet's Checkpoint and PostgreSQL.
func (b *Book) CheckpointWallet(ctx context.Context, l *wallet.Ledger, account string) (id string, trimmed int64, err error) {
	if l == nil {
		return "", 0, fmt.Errorf("%w: nil ledger", ErrInvalid)
	}
	pos, held, err := b.bookToEnd(ctx, l, account)
	if err != nil {
		return "", 0, err
	}
	ds, err := b.ReconcileWallet(ctx, l, account)
	if err != nil {
		return "", 0, fmt.Errorf("pgjournal: checkpoint %s: %w", account, err)
	}
	if len(ds) > 0 {
		return "", 0, fmt.Errorf("pgjournal: checkpoint %s: %w: %v in Redis, %v in the book", account, ErrDrift, ds[0].Redis, ds[0].Book)
	}
	id, trimmed, err = l.Checkpoint(ctx, account)
	if err != nil {
		return "", 0, err
	}
	if trimmed <= held {
		return id, trimmed, nil
	}
	// Entries newer than pos and older than the checkpoint were trimmed;
	// a sink running beside this call may have booked them first.
	cms, cseq, ok := parseID(id)
	pms, pseq, _ := parseID(pos)
	var booked int64
	if ok {
		err = b.pool.QueryRow(ctx, "SELECT count(*) FROM "+b.t("wallet_entries")+
			" WHERE account = $1 AND (ms, seq) > ($2, $3) AND (ms, seq) < ($4, $5)", account, pms, pseq, cms, cseq).Scan(&booked)
		if err != nil {
			return id, trimmed, fmt.Errorf("pgjournal: checkpoint %s: %w", account, err)
		}
	}
	if lost := trimmed - held - booked; lost > 0 {
		return id, trimmed, fmt.Errorf("checkpoint %s at %s: %w: %d", account, id, ErrTrimmedUnbooked, lost)
	}
	return id, trimmed, nil
}

// bookToEnd books account's journal until the book's position is its
// newest entry, and returns that position and how many entries Redis's
// journal holds up to it.
func (b *Book) bookToEnd(ctx context.Context, l *wallet.Ledger, account string) (string, int64, error) {
	for range 5 {
		cursors := map[string]*walletCursor{}
		for {
			more, err := b.bookWallet(ctx, l, account, wallet.MaxPage, cursors)
			if err != nil {
				return "", 0, fmt.Errorf("pgjournal: checkpoint %s: %w", account, err)
			}
			if !more {
				break
			}
		}
		pos := ""
		if c := cursors[account]; c != nil {
			pos = c.pos
		}
		held, caughtUp, err := countTo(ctx, l, account, pos)
		if err != nil {
			return "", 0, fmt.Errorf("pgjournal: checkpoint %s: %w", account, err)
		}
		if caughtUp {
			return pos, held, nil
		}
	}
	return "", 0, fmt.Errorf("pgjournal: checkpoint %s: %w", account, ErrBusy)
}

// countTo counts the entries of account's journal up to pos and reports
// whether none follows it.
func countTo(ctx context.Context, l *wallet.Ledger, account, pos string) (held int64, caughtUp bool, err error) {
	pms, pseq, _ := parseID(pos)
	cursor := ""
	for {
		es, _, err := l.Entries(ctx, account, cursor, wallet.MaxPage)
		if err != nil {
			return 0, false, err
		}
		for _, e := range es {
			ms, seq, _ := parseID(e.ID)
			if pos == "" || idLess(pms, pseq, ms, seq) {
				return held, false, nil
			}
			held++
		}
		if len(es) < wallet.MaxPage {
			return held, true, nil
		}
		cursor = es[len(es)-1].ID
	}
}
