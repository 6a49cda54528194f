package stock

import (
	"context"
	"time"
)

// TransferOutForTest moves qty units out of bucket from toward bucket to and
// stops there, as a caller that crashed in the middle of a refill would.
func (inv *Inventory) TransferOutForTest(ctx context.Context, sku string, from, to int, qty int64) (int64, error) {
	g, err := inv.checkSKU(sku)
	if err != nil {
		return 0, err
	}
	x, _, err := inv.transferOut(ctx, bucketTag(g, from), sku, "t-crashed", qty, to, 1<<53-1)
	return x, err
}

// HomeForTest is the bucket of id among b buckets.
func HomeForTest(id string, b int) int { return home(id, b) }

// TransferInOnlyForTest credits transfer "t-crashed" (number 1 from bucket
// from) to bucket to and stops before deleting its out-record, as a caller
// that crashed there would.
func (inv *Inventory) TransferInOnlyForTest(ctx context.Context, sku string, from, to int, qty int64) error {
	g, err := inv.checkSKU(sku)
	if err != nil {
		return err
	}
	t := bucketTag(g, to)
	_, _, err = inv.write(ctx, xferScript, []string{inv.skuKey(t, sku), inv.journalKey(t, sku)},
		[]any{"in", sku, "t-crashed", qty, from, 1})
	return err
}

// SetJournalHoldbackForTest sets the journal holdback below the minimum
// WithJournalHoldback allows.
func (inv *Inventory) SetJournalHoldbackForTest(d time.Duration) { inv.cfg.holdback = d }

// BucketTagForTest is the hash tag of bucket k of a SKU in group g.
func BucketTagForTest(g string, k int) string { return bucketTag(g, k) }

// SetAuditPageForTest makes audits read n journal entries per round trip
// until restore is called, so that a test sees many pages without
// thousands of entries. Tests that call it must not run in parallel.
func SetAuditPageForTest(n int64) (restore func()) {
	old := auditPage
	auditPage = n
	return func() { auditPage = old }
}

// JournalKeyForTest is the key of sku's journal (of bucket 0).
func (inv *Inventory) JournalKeyForTest(sku string) string {
	g, _ := inv.checkSKU(sku)
	return inv.journalKey(g, sku)
}

// NextEntriesForTest is one step of Consume on sku's journal (of bucket 0):
// the IDs of the entries handed to consumer name of group, and how many
// pending entries were dropped because the journal no longer holds them.
func (inv *Inventory) NextEntriesForTest(ctx context.Context, sku, group, name string, batch int64, minIdle time.Duration) (
	[]string, int64, error) {
	msgs, dropped, err := inv.nextEntries(ctx, inv.JournalKeyForTest(sku), group, name, batch, minIdle)
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids, dropped, err
}

// ConsumedForTest is Consume's acknowledgement of ids (oldest first) by
// consumer name of group on sku's journal (of bucket 0).
func (inv *Inventory) ConsumedForTest(ctx context.Context, sku, group, name string, ids []string) (int64, error) {
	return inv.consumed(ctx, inv.JournalKeyForTest(sku), group, name, ids)
}
