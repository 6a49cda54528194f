package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

var stockJournalDesc = &journal{
	module: "stock", entries: "stock_entries", proj: "stock_levels",
	keyCols: []string{"sku", "bucket"},
	levels:  []string{"available", "reserved", "sold", "refunded", "supply"},
	extra:   []string{"buyer"},
	keyLabel: func(key []any) (string, int) {
		return key[0].(string), key[1].(int)
	},
}

var walletJournalDesc = &journal{
	module: "wallet", entries: "wallet_entries", proj: "wallet_balances",
	keyCols: []string{"account"},
	levels:  []string{"posted", "held"},
	extra:   []string{"peer", "memo", "memo_raw", "currency", "src_group"},
	keyLabel: func(key []any) (string, int) {
		return key[0].(string), 0
	},
	scope: "src_group",
}

var stockKinds = map[string]bool{
	stock.KindCreate: true, stock.KindRestock: true, stock.KindWriteOff: true, stock.KindClose: true,
	stock.KindDeduct: true, stock.KindReserve: true, stock.KindConfirm: true, stock.KindCancel: true,
	stock.KindExpire: true, stock.KindRefund: true, stock.KindTransferOut: true, stock.KindTransferIn: true,
	stock.KindCheckpoint: true,
}

var walletKinds = map[string]bool{
	wallet.KindOpen: true, wallet.KindCredit: true, wallet.KindDebit: true, wallet.KindTransferIn: true,
	wallet.KindTransferOut: true, wallet.KindClose: true, wallet.KindCheckpoint: true,
	"hold": true, "capture": true, "void": true, "hold_expire": true, "transfer_hold": true, "transfer_void": true,
}

// SinkStock books the journals of c.SKUs through inv.Consume (the consumer
// group c.Group, default batch 100). Each batch is booked in one
// transaction and acknowledged only after it committed; a batch whose
// commit failed or whose outcome is unknown stays unacknowledged, comes
// again and finds its entries booked. SinkStock retries every error but
// ErrInvalid and stock.ErrInvalid (waiting up to WithMaxBackoff, reporting
// each to WithErrorHandler) and returns ctx.Err() when ctx ends.
//
// Run one consumer per journal for the gap check to see each journal in
// order: several consumers of one group split a journal between them.
func (b *Book) SinkStock(ctx context.Context, inv *stock.Inventory, c stock.Consumer) error {
	if inv == nil {
		return fmt.Errorf("%w: nil inventory", ErrInvalid)
	}
	handle := func(ctx context.Context, es []stock.Entry) error {
		return b.bookStock(ctx, es)
	}
	return b.retry(ctx, func() error {
		err := inv.Consume(ctx, c, handle)
		if errors.Is(err, stock.ErrInvalid) {
			return backoff.Permanent(err)
		}
		return err
	})
}

// bookStock books one batch of one stock journal: Consume hands over the
// entries of one stream at a time, and says whose (Entry.Journal).
func (b *Book) bookStock(ctx context.Context, es []stock.Entry) error {
	if len(es) == 0 {
		return nil
	}
	sku, bucket := es[0].Journal, es[0].Bucket
	if sku == "" {
		return backoff.Permanent(fmt.Errorf("%w: a stock entry without its journal", ErrInvalid))
	}
	recs := stockRecs(sku, es)
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.apply(ctx, tx, stockJournalDesc, []any{sku, bucket}, recs, false)
		return err
	})
}

// stockRecs reads the entries of sku's journal for the book.
func stockRecs(sku string, es []stock.Entry) []rec {
	recs := make([]rec, len(es))
	for i, e := range es {
		r := rec{id: e.ID, kind: e.Kind, op: e.Op, extra: []any{e.Buyer},
			delta: []int64{e.Delta.Available, e.Delta.Reserved, e.Delta.Sold, e.Delta.Refunded, e.SupplyDelta},
			after: []int64{e.After.Available, e.After.Reserved, e.After.Sold, e.After.Refunded, e.Supply}}
		var ok bool
		r.ms, r.seq, ok = parseID(e.ID)
		switch {
		case !ok:
			r.ms, r.seq, r.bad = -1, -1, fmt.Sprintf("stream ID %q", e.ID)
		case !stockKinds[e.Kind]:
			// Consume hands over no entry deleted from its journal (it
			// acknowledges those itself): one without a kind was written
			// there by other means than stock's scripts.
			r.bad = fmt.Sprintf("unknown kind %q", e.Kind)
		case e.SKU != sku:
			r.bad = fmt.Sprintf("entry of SKU %q in the journal of %q", e.SKU, sku)
		case !storable(e.Op, e.Buyer):
			// stock validates every name it writes: only a damaged entry
			// gets here.
			r.bad = "a field is not UTF-8 text without NUL"
		}
		recs[i] = r
	}
	return recs
}

// WalletSource names the accounts whose journals SinkWallet books.
type WalletSource struct {
	Accounts []string
	// Batch is the most entries read and booked at once per account
	// (default 100, at most wallet.MaxPage).
	Batch int
	// Poll is the wait between rounds that found nothing new (default
	// 100ms).
	Poll time.Duration
}

// SinkWallet books the journals of src.Accounts. The wallet has no consumer
// group: the book keeps each account's position itself (the last entry it
// read) and moves it in the same transaction that books the entries, so a
// crash before the commit reads them again and one after it does not.
// Each read starts at the entry at the position, which must be there as
// booked: a journal that holds other content there (recorded as a
// reused_id anomaly) or no longer holds it (with no checkpoint after it
// to explain that: Redis lost entries, or its journal was written again
// from a clock that went back) is read again from its start, so no entry
// below the position is skipped. Accounts not opened yet are looked
// at again each round. It retries every error but ErrInvalid (see
// SinkStock) and returns ctx.Err() when ctx ends.
//
// wallet.Ledger.Checkpoint trims an account's journal without asking any
// reader: entries trimmed before SinkWallet read them are lost to the book.
// The sink books the checkpoint that follows with a gap anomaly when the
// balances moved meanwhile, and Reconcile reports the drift.
func (b *Book) SinkWallet(ctx context.Context, l *wallet.Ledger, src WalletSource) error {
	if l == nil {
		return fmt.Errorf("%w: nil ledger", ErrInvalid)
	}
	if len(src.Accounts) == 0 {
		return fmt.Errorf("%w: no accounts", ErrInvalid)
	}
	if src.Batch <= 0 {
		src.Batch = 100
	}
	if src.Batch > wallet.MaxPage {
		return fmt.Errorf("%w: batch %d over %d", ErrInvalid, src.Batch, wallet.MaxPage)
	}
	if src.Poll <= 0 {
		src.Poll = 100 * time.Millisecond
	}
	// A page holds the entry at the position, then what follows it.
	limit := min(src.Batch+1, wallet.MaxPage)
	return b.retry(ctx, func() error {
		// Positions are read from the book once per run and then kept
		// here; after an error (a commit whose outcome is unknown) the
		// next run reads them again.
		cursors := map[string]*walletCursor{}
		for {
			busy := false
			for _, a := range src.Accounts {
				more, err := b.bookWallet(ctx, l, a, limit, cursors)
				if errors.Is(err, wallet.ErrInvalid) {
					return backoff.Permanent(err)
				}
				if err != nil {
					return err
				}
				busy = busy || more
			}
			if busy {
				continue
			}
			if err := sleep(ctx, src.Poll); err != nil {
				return err
			}
		}
	})
}

// walletCursor is where a wallet sink is in one account's journal: the
// book's position (the last entry it read, "" for none) and, once read in
// this run, what the entry there says.
type walletCursor struct {
	pos     string
	content string // "" until read
}

// bookWallet books the next page of one account's journal and reports
// whether the page was full (more may follow).
func (b *Book) bookWallet(ctx context.Context, l *wallet.Ledger, account string, limit int, cursors map[string]*walletCursor) (bool, error) {
	c, ok := cursors[account]
	if !ok {
		pos, err := b.WalletPosition(ctx, account)
		if err != nil {
			return false, err
		}
		c = &walletCursor{pos: pos}
		cursors[account] = c
	}
	from := ""
	pms, pseq, _ := parseID(c.pos)
	if c.pos != "" {
		from = before(pms, pseq)
	}
	es, _, err := l.Entries(ctx, account, from, limit)
	if errors.Is(err, wallet.ErrAccountNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rewind := false
	switch {
	case c.pos == "":
	case len(es) > 0 && es[0].ID == c.pos:
		same, err := b.sameAtPosition(ctx, account, c, es[0])
		if err != nil {
			return false, err
		}
		if !same {
			// The journal holds other content under the position: it was
			// written again (Redis gave the IDs out again), and entries
			// below the position may be new too.
			rewind = true
			break
		}
		if len(es) == 1 && c.content != "" {
			return false, nil // nothing new, and the entry at the position is the one read before
		}
	case len(es) > 0 && es[0].Kind == wallet.KindCheckpoint:
		// A checkpoint trimmed the entries before it, the position's too.
	default:
		// The entry at the position is gone and no checkpoint explains it:
		// read the journal again from its start.
		rewind = true
	}
	if rewind {
		if es, _, err = l.Entries(ctx, account, "", limit); err != nil {
			if errors.Is(err, wallet.ErrAccountNotFound) {
				return false, nil
			}
			return false, err
		}
	}
	if len(es) == 0 {
		return false, nil
	}
	recs := walletRecs(es)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.apply(ctx, tx, walletJournalDesc, []any{account}, recs, rewind)
		return err
	})
	if err != nil {
		return false, err
	}
	last := es[len(es)-1]
	c.pos, c.content = last.ID, walletContent(last)
	return len(es) == limit, nil
}

// sameAtPosition reports whether e, the journal's entry at c's position,
// is the entry read there before: as this run read it, or, before this run
// read it, as the book holds it (an entry the book does not hold, recorded
// as an anomaly, is taken as the same).
func (b *Book) sameAtPosition(ctx context.Context, account string, c *walletCursor, e wallet.Entry) (bool, error) {
	if c.content != "" {
		return c.content == walletContent(e), nil
	}
	r := walletRecs([]wallet.Entry{e})[0]
	st, err := b.readState(ctx, b.pool, walletJournalDesc, []any{account}, []rec{r}, false)
	if err != nil {
		return false, err
	}
	have, ok := st.present[[2]int64{r.ms, r.seq}]
	return !ok || r.bad == "" && sameContent(r.content(), have), nil
}

// walletContent is what a wallet entry says, for comparing two reads of it.
func walletContent(e wallet.Entry) string {
	return fmt.Sprintf("%q", []any{e.TxID, e.Kind, e.Delta, e.HeldDelta, e.Posted, e.Held, e.Peer, e.Memo, e.Currency})
}

// groupOf is the slot group of a wallet account or stock SKU: the part of
// its ID before the '/', or the whole ID when it has none (see wallet's
// documentation of slot groups).
func groupOf(id string) string {
	g, _, _ := strings.Cut(id, "/")
	return g
}

func walletRecs(es []wallet.Entry) []rec {
	recs := make([]rec, len(es))
	for i, e := range es {
		memo, raw := e.Memo, []byte(nil)
		if strings.IndexByte(memo, 0) >= 0 {
			memo, raw = strings.ReplaceAll(memo, "\x00", "\uFFFD"), []byte(e.Memo)
		}
		scope := ""
		if e.Kind == wallet.KindTransferIn {
			// A transfer into an account is named by its source's group
			// and ID: the same ID from two groups is two transfers.
			scope = groupOf(e.Peer)
		}
		r := rec{id: e.ID, kind: e.Kind, op: e.TxID, scope: scope, extra: []any{e.Peer, memo, raw, e.Currency, scope},
			delta: []int64{e.Delta, e.HeldDelta}, after: []int64{e.Posted, e.Held}}
		var ok bool
		r.ms, r.seq, ok = parseID(e.ID)
		switch {
		case !ok:
			r.ms, r.seq, r.bad = -1, -1, fmt.Sprintf("stream ID %q", e.ID)
		case !walletKinds[e.Kind]:
			r.bad = fmt.Sprintf("unknown kind %q", e.Kind)
		case !storable(e.TxID, e.Peer, e.Currency) || !utf8.ValidString(e.Memo):
			r.bad = "a field is not UTF-8 text"
		}
		recs[i] = r
	}
	return recs
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// storable reports whether PostgreSQL text can hold each string as it is.
func storable(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}
