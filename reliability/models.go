package reliability

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The models are sequential specifications, one per partition of a history.
// Every model accepts an operation whose outcome is unknown both as applied
// and as not applied: it applies the operation where that is possible, and
// the checker may instead place it after everything else (its return time
// is the end of the history), where it changes nothing anyone observed.

// Lock operation kinds.
const (
	LockAcquire = "acquire"
	LockRelease = "release"
	LockExpire  = "expire" // the lease ended without a release (TTL, lost on a restart); synthetic
	LockRead    = "read"   // fenced read of the protected counter
	LockWrite   = "write"  // fenced write of the protected counter
)

// LockIn is the input of a lock operation. Lease numbers one acquisition
// (attempted or made) within a history.
type LockIn struct {
	Kind  string `json:"k"`
	Lease int    `json:"l"`
	Token uint64 `json:"t,omitempty"` // read, write: the lease's fencing token
	Val   int64  `json:"v,omitempty"` // write: the value written
}

// LockOut is the output of a lock operation.
type LockOut struct {
	Unknown bool `json:"u,omitempty"`
	// OK: acquire took the lock; release released it (false: it had expired
	// or another owner held it); read or write was accepted by the fence
	// (false: refused as stale).
	OK    bool   `json:"ok,omitempty"`
	Token uint64 `json:"t,omitempty"` // acquire: the fencing token
	Val   int64  `json:"v,omitempty"` // read: the counter's value
}

type lockState struct {
	holder int    // lease holding the lock, -1 when free
	last   uint64 // highest token seen handed out (a lower bound: unknown acquires may have taken more)
	fence  uint64 // highest token the protected counter has seen
	val    int64  // the protected counter
}

// LockModel is a mutex with fencing tokens in front of a counter that
// checks them (lock.FenceLua):
//
//   - an acquire succeeds only while the lock is free, with a token above
//     every token handed out before; it fails only while someone holds it;
//   - a release reports "released" only by the holder;
//   - a lease may end without a release only where the history says it
//     may have (an expire operation, recorded for every lease that was not
//     released by its holder);
//   - the counter accepts a read or write whose token is at least the
//     highest it has seen, and then records that token; a read returns the
//     last value written.
var LockModel = porcupine.Model{
	Init: func() any { return lockState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(LockIn), output.(LockOut)
		switch in.Kind {
		case LockAcquire:
			switch {
			case out.Unknown:
				// Taking the lock, then losing it at once (the caller
				// cleans up, or the expire operation follows) is the same
				// as not taking it, so "not applied" needs no placement at
				// the end: the token counter is left as it is (a lower
				// bound), and the lease's expire operation frees the lock.
				if s.holder == -1 {
					s.holder = in.Lease
				}
				return true, s
			case out.OK:
				if s.holder != -1 || out.Token <= s.last {
					return false, s
				}
				s.holder, s.last = in.Lease, out.Token
				return true, s
			default:
				return s.holder != -1 && s.holder != in.Lease, s
			}
		case LockRelease:
			switch {
			case out.Unknown:
				if s.holder == in.Lease {
					s.holder = -1
				}
				return true, s
			case out.OK:
				if s.holder != in.Lease {
					return false, s
				}
				s.holder = -1
				return true, s
			default:
				return s.holder != in.Lease, s
			}
		case LockExpire:
			if s.holder == in.Lease {
				s.holder = -1
			}
			return true, s
		case LockRead, LockWrite:
			fresh := in.Token >= s.fence
			switch {
			case out.Unknown:
				if fresh {
					s.fence = in.Token
					if in.Kind == LockWrite {
						s.val = in.Val
					}
				}
				return true, s
			case !out.OK:
				return !fresh, s
			case !fresh:
				return false, s
			}
			s.fence = in.Token
			if in.Kind == LockWrite {
				s.val = in.Val
				return true, s
			}
			return out.Val == s.val, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(LockIn), output.(LockOut)
		res := fmt.Sprint(out.OK)
		if out.Unknown {
			res = "unknown"
		}
		switch in.Kind {
		case LockAcquire:
			if out.OK {
				res += fmt.Sprintf(" token=%d", out.Token)
			}
			return fmt.Sprintf("acquire(lease %d) -> %s", in.Lease, res)
		case LockRelease:
			return fmt.Sprintf("release(lease %d) -> %s", in.Lease, res)
		case LockExpire:
			return fmt.Sprintf("expire(lease %d)", in.Lease)
		case LockRead:
			if out.OK {
				res += fmt.Sprintf(" value=%d", out.Val)
			}
			return fmt.Sprintf("read(lease %d, token %d) -> %s", in.Lease, in.Token, res)
		}
		return fmt.Sprintf("write(lease %d, token %d, value %d) -> %s", in.Lease, in.Token, in.Val, res)
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		return fmt.Sprintf("holder=%d last token=%d fence=%d value=%d", s.holder, s.last, s.fence, s.val)
	},
}

// GroupSize is the number of SKUs (or accounts) in one slot group of the
// stock (or wallet) workload; the models keep one level per member.
const GroupSize = 3

// stepGroup steps a write on a slot group that applies exactly when it
// fits, taking the group from s to next: one whose outcome is unknown
// applies where it fits, a refused one must not fit, and an applied one
// must fit, with an output that matches next (matches checks it).
func stepGroup(s, next [GroupSize]int64, fits, unknown, applied bool, matches func() bool) (bool, any) {
	switch {
	case unknown:
		if fits {
			return true, next
		}
		return true, s
	case !applied:
		return !fits, s
	case !fits:
		return false, s
	}
	return matches(), next
}

// Stock operation kinds.
const (
	StockDeduct   = "deduct"
	StockRestock  = "restock"
	StockWriteOff = "writeoff"
	StockRefund   = "refund"
	StockLevel    = "level"
)

// StockIn is the input of a stock operation on one slot group: quantities
// per SKU of the group (zero for SKUs not involved).
type StockIn struct {
	Kind string
	Qty  [GroupSize]int64
	SKU  int // level: which SKU is read
}

// StockOut is the output of a stock operation.
type StockOut struct {
	Unknown bool
	OK      bool             // applied (false: refused as sold out)
	After   [GroupSize]int64 // applied: available units of the SKUs involved right after; level: After[SKU]
}

// StockModel is a group of stock counters with a floor of zero: a
// deduction or write-off succeeds exactly when every SKU it touches has
// enough available units, takes them all at once, and reports the levels
// right after; restocks and refunds add units; a level read returns the
// current available units.
var StockModel = porcupine.Model{
	Init: func() any { return [GroupSize]int64{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.([GroupSize]int64), input.(StockIn), output.(StockOut)
		if in.Kind == StockLevel {
			return out.After[in.SKU] == s[in.SKU], s
		}
		sign := int64(1)
		if in.Kind == StockDeduct || in.Kind == StockWriteOff {
			sign = -1
		}
		next, fits := s, true
		for i, q := range in.Qty {
			next[i] += sign * q
			fits = fits && next[i] >= 0
		}
		return stepGroup(s, next, fits, out.Unknown, out.OK, func() bool {
			for i, q := range in.Qty {
				if q != 0 && out.After[i] != next[i] {
					return false
				}
			}
			return true
		})
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(StockIn), output.(StockOut)
		if in.Kind == StockLevel {
			return fmt.Sprintf("level(sku %d) -> %d", in.SKU, out.After[in.SKU])
		}
		if out.Unknown {
			return fmt.Sprintf("%s(%v) -> unknown", in.Kind, in.Qty)
		}
		if !out.OK {
			return fmt.Sprintf("%s(%v) -> refused", in.Kind, in.Qty)
		}
		return fmt.Sprintf("%s(%v) -> ok, after %v", in.Kind, in.Qty, out.After)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("available %v", state) },
}

// Wallet operation kinds.
const (
	BankCredit   = "credit"
	BankDebit    = "debit"
	BankTransfer = "transfer"
	BankRead     = "read"
)

// BankIn is the input of a wallet operation on one slot group of accounts.
type BankIn struct {
	Kind     string
	From, To int // account indexes in the group (To: transfers only)
	Amount   int64
}

// BankOut is the output of a wallet operation.
type BankOut struct {
	Unknown bool
	OK      bool  // applied (false: refused for insufficient funds)
	Bal     int64 // posted balance of From right after (applied) or now (read)
	ToBal   int64 // transfers: posted balance of To right after
}

// BankModel is a group of accounts that may not go below zero, with
// idempotent postings: a credit always applies, a debit or transfer applies
// exactly when the source has the amount, and every applied posting
// reports the balances right after it. Resubmissions of a transaction are
// one operation from the first call to the answer (the call that resolved
// it); their answers are compared by the workload.
var BankModel = porcupine.Model{
	Init: func() any { return [GroupSize]int64{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.([GroupSize]int64), input.(BankIn), output.(BankOut)
		next, fits := s, true
		switch in.Kind {
		case BankRead:
			return out.Bal == s[in.From], s
		case BankCredit:
			next[in.From] += in.Amount
		case BankDebit:
			next[in.From] -= in.Amount
			fits = next[in.From] >= 0
		case BankTransfer:
			next[in.From] -= in.Amount
			next[in.To] += in.Amount
			fits = next[in.From] >= 0
		}
		return stepGroup(s, next, fits, out.Unknown, out.OK, func() bool {
			ok := out.Bal == next[in.From]
			if in.Kind == BankTransfer {
				ok = ok && out.ToBal == next[in.To]
			}
			return ok
		})
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(BankIn), output.(BankOut)
		call := fmt.Sprintf("%s(%d, %d)", in.Kind, in.From, in.Amount)
		if in.Kind == BankTransfer {
			call = fmt.Sprintf("transfer(%d -> %d, %d)", in.From, in.To, in.Amount)
		}
		switch {
		case in.Kind == BankRead:
			return fmt.Sprintf("read(%d) -> %d", in.From, out.Bal)
		case out.Unknown:
			return call + " -> unknown"
		case !out.OK:
			return call + " -> refused"
		case in.Kind == BankTransfer:
			return fmt.Sprintf("%s -> ok, %d / %d", call, out.Bal, out.ToBal)
		}
		return fmt.Sprintf("%s -> ok, %d", call, out.Bal)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("posted %v", state) },
}
