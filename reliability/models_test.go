package reliability

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// seq builds a history of operations that do not overlap, in order.
func seq(ops ...porcupine.Operation) []porcupine.Operation {
	for i := range ops {
		ops[i].Call, ops[i].Return = int64(2*i), int64(2*i+1)
	}
	return ops
}

func op(in, out any) porcupine.Operation { return porcupine.Operation{Input: in, Output: out} }

// unknown makes ops[i] an operation whose outcome is unknown: it returns
// after every other operation.
func unknown(ops []porcupine.Operation, i int) []porcupine.Operation {
	ops[i].Return = int64(2*len(ops) + 1)
	return ops
}

func TestLockModel(t *testing.T) {
	acq := func(lease int, ok bool, token uint64) porcupine.Operation {
		return op(LockIn{Kind: LockAcquire, Lease: lease}, LockOut{OK: ok, Token: token})
	}
	rel := func(lease int, ok bool) porcupine.Operation {
		return op(LockIn{Kind: LockRelease, Lease: lease}, LockOut{OK: ok})
	}
	expire := func(lease int) porcupine.Operation {
		return op(LockIn{Kind: LockExpire, Lease: lease}, LockOut{Unknown: true})
	}
	write := func(lease int, token uint64, v int64, ok bool) porcupine.Operation {
		return op(LockIn{Kind: LockWrite, Lease: lease, Token: token, Val: v}, LockOut{OK: ok})
	}
	read := func(lease int, token uint64, v int64, ok bool) porcupine.Operation {
		return op(LockIn{Kind: LockRead, Lease: lease, Token: token}, LockOut{OK: ok, Val: v})
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"acquire, release, acquire", seq(acq(1, true, 1), rel(1, true), acq(2, true, 2)), true},
		{"two holders", seq(acq(1, true, 1), acq(2, true, 2)), false},
		{"token not increasing", seq(acq(1, true, 5), rel(1, true), acq(2, true, 5)), false},
		{"refused while free", seq(acq(1, false, 0)), false},
		{"released by a non-holder", seq(acq(1, true, 1), rel(2, true)), false},
		{"expired lease lets another in", seq(acq(1, true, 1), expire(1), acq(2, true, 2), rel(1, false)), true},
		{"expiry only where recorded", seq(acq(1, true, 1), acq(2, true, 2), rel(1, false)), false},
		{"stale write refused", seq(acq(1, true, 1), expire(1), acq(2, true, 2), read(2, 2, 0, true), write(1, 1, 1, false)), true},
		{"stale write accepted", seq(acq(1, true, 1), expire(1), acq(2, true, 2), read(2, 2, 0, true), write(1, 1, 1, true)), false},
		{"late write before the next holder's", seq(acq(1, true, 1), expire(1), acq(2, true, 2), write(1, 1, 1, true), read(2, 2, 1, true)), true},
		{"read sees the last write", seq(acq(1, true, 1), write(1, 1, 7, true), read(1, 1, 6, true)), false},
		// An unknown acquire may have taken the lock (then another must
		// wait for its expiry) or not.
		{"unknown acquire, not applied", unknown(seq(op(LockIn{Kind: LockAcquire, Lease: 1}, LockOut{Unknown: true}), acq(2, true, 1)), 0), true},
		{"unknown acquire, applied", unknown(unknown(seq(
			op(LockIn{Kind: LockAcquire, Lease: 1}, LockOut{Unknown: true}), expire(1), acq(2, false, 0), acq(3, true, 2)), 0), 1), true},
		{"unknown write, applied", unknown(seq(acq(1, true, 1), op(LockIn{Kind: LockWrite, Lease: 1, Token: 1, Val: 1}, LockOut{Unknown: true}), read(1, 1, 1, true)), 1), true},
		{"unknown write, not applied", unknown(seq(acq(1, true, 1), op(LockIn{Kind: LockWrite, Lease: 1, Token: 1, Val: 1}, LockOut{Unknown: true}), read(1, 1, 0, true)), 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(LockModel, tc.ops))
		})
	}
}

func TestStockModel(t *testing.T) {
	in := func(kind string, q0, q1 int64) StockIn { return StockIn{Kind: kind, Qty: [GroupSize]int64{q0, q1}} }
	ok := func(a0, a1 int64) StockOut { return StockOut{OK: true, After: [GroupSize]int64{a0, a1}} }
	level := func(sku int, v int64) porcupine.Operation {
		var out StockOut
		out.After[sku] = v
		return op(StockIn{Kind: StockLevel, SKU: sku}, out)
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"sell what is there", seq(op(in(StockRestock, 3, 1), ok(3, 1)), op(in(StockDeduct, 2, 1), ok(1, 0)), level(0, 1)), true},
		{"oversell", seq(op(in(StockRestock, 3, 1), ok(3, 1)), op(in(StockDeduct, 2, 2), ok(1, -1))), false},
		{"all or nothing", seq(op(in(StockRestock, 3, 1), ok(3, 1)), op(in(StockDeduct, 2, 2), StockOut{}), level(0, 1)), false},
		{"refused with stock", seq(op(in(StockRestock, 3, 1), ok(3, 1)), op(in(StockDeduct, 1, 0), StockOut{})), false},
		{"refund gives back", seq(op(in(StockRestock, 1, 0), ok(1, 0)), op(in(StockDeduct, 1, 0), ok(0, 0)), op(in(StockRefund, 1, 0), ok(1, 0))), true},
		{"unknown deduct applied", unknown(seq(op(in(StockRestock, 2, 0), ok(2, 0)), op(in(StockDeduct, 1, 0), StockOut{Unknown: true}), level(0, 1)), 1), true},
		{"unknown deduct not applied", unknown(seq(op(in(StockRestock, 2, 0), ok(2, 0)), op(in(StockDeduct, 1, 0), StockOut{Unknown: true}), level(0, 2)), 1), true},
		{"unknown deduct applied twice", unknown(seq(op(in(StockRestock, 2, 0), ok(2, 0)), op(in(StockDeduct, 1, 0), StockOut{Unknown: true}), level(0, 0)), 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(StockModel, tc.ops))
		})
	}
}

func TestBankModel(t *testing.T) {
	credit := func(a int, amt, bal int64) porcupine.Operation {
		return op(BankIn{Kind: BankCredit, From: a, Amount: amt}, BankOut{OK: true, Bal: bal})
	}
	debit := func(a int, amt int64, ok bool, bal int64) porcupine.Operation {
		return op(BankIn{Kind: BankDebit, From: a, Amount: amt}, BankOut{OK: ok, Bal: bal})
	}
	read := func(a int, bal int64) porcupine.Operation {
		return op(BankIn{Kind: BankRead, From: a}, BankOut{Bal: bal})
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"credit and debit", seq(credit(0, 5, 5), debit(0, 3, true, 2), read(0, 2)), true},
		{"below zero", seq(credit(0, 5, 5), debit(0, 6, true, -1)), false},
		{"refused with funds", seq(credit(0, 5, 5), debit(0, 5, false, 0)), false},
		{"double charge", seq(credit(0, 5, 5), debit(0, 2, true, 3), read(0, 1)), false},
		{"transfer", seq(credit(0, 5, 5), op(BankIn{Kind: BankTransfer, From: 0, To: 1, Amount: 4}, BankOut{OK: true, Bal: 1, ToBal: 4}), read(1, 4)), true},
		{"unknown debit either way", unknown(seq(credit(0, 5, 5), debit(0, 2, false, 0), read(0, 5)), 1), false},
		{"unknown debit applied", unknown(seq(credit(0, 5, 5), op(BankIn{Kind: BankDebit, From: 0, Amount: 2}, BankOut{Unknown: true}), read(0, 3)), 1), true},
		{"unknown debit not applied", unknown(seq(credit(0, 5, 5), op(BankIn{Kind: BankDebit, From: 0, Amount: 2}, BankOut{Unknown: true}), read(0, 5)), 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(BankModel, tc.ops))
		})
	}
}

// A history that is not linearizable fails the check, with its
// visualisation written where the message says.
func TestCheckLinearizable_writesVisualization(t *testing.T) {
	h := NewHistory(time.Now())
	h.Add(
		Op{Key: "lock-a", Input: LockIn{Kind: LockAcquire, Lease: 1}, Output: LockOut{OK: true, Token: 1}, Call: 1, Return: 2},
		Op{Key: "lock-a", Input: LockIn{Kind: LockAcquire, Lease: 2}, Output: LockOut{OK: true, Token: 2}, Call: 3, Return: 4},
	)
	rec := &recorder{TB: t}
	CheckLinearizable(rec, "lock", LockModel, h, 42)
	require.Len(t, rec.errors, 1)
	path := VisualizationPath(t, "lock-lock-a", 42)
	require.Contains(t, rec.errors[0], path)
	require.Contains(t, rec.errors[0], SeedEnv+"=42")
	_, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
}

// recorder keeps the errors a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}
