package reliability

import (
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one recorded operation: who called what, when, and what came back.
type Op struct {
	Client int
	// Key names the partition the operation belongs to (a lock name, a
	// slot group of SKUs or accounts); partitions are checked separately.
	Key    string
	Input  any
	Output any
	// Call and Return are nanoseconds since the history's start.
	Call, Return int64
	// Unknown marks an operation whose outcome the client never learned.
	// Its return time becomes the end of the history, so the checker may
	// place it anywhere after its call, last included (which is how "never
	// applied" is expressed); its Output must say so to the model.
	Unknown bool
	// Late, when positive, bounds an unknown outcome: whatever the
	// operation did, it did by Return+Late (a command runs at most that long
	// after it was last sent), so the checker places it no later than that
	// instead of at the end of the history.
	Late int64
	// Read marks an operation that changes nothing. Reads that overlap a
	// window in which a demoted node may still answer (see History.Blur) are
	// left out of the check.
	Read bool
	// Fragile, when not nil, is the output (saying "unknown") that replaces
	// Output if the operation overlaps a blurred window: its answer may
	// have been given by a node that was being demoted, and may not last.
	Fragile any
	// When, if set, keeps the operation only if [When[0], When[1]]
	// overlaps a blurred window (a consequence of a fragile answer, such as
	// the lease a lost release leaves held until it expires).
	When *[2]int64
}

// History collects the operations of one workload from many goroutines.
// Times come from the monotonic clock of this process.
type History struct {
	start time.Time

	mu      sync.Mutex
	ops     []Op
	blurred [][2]int64
}

// NewHistory starts an empty history whose clock starts at start (histories
// of one run share it, so their times compare).
func NewHistory(start time.Time) *History { return &History{start: start} }

// Now returns the history's clock: nanoseconds since it started.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// FromWall converts a wall-clock time taken by another process on this
// machine to the history's clock.
func (h *History) FromWall(unixNano int64) int64 { return unixNano - h.start.UnixNano() }

// Add records operations.
func (h *History) Add(ops ...Op) {
	h.mu.Lock()
	h.ops = append(h.ops, ops...)
	h.mu.Unlock()
}

// Blur marks [from, to] as a window in which reads may have been answered
// by a node that was being demoted: reads overlapping it are not checked.
func (h *History) Blur(from, to int64) {
	h.mu.Lock()
	h.blurred = append(h.blurred, [2]int64{from, to})
	h.mu.Unlock()
}

// Len returns the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Ops returns a copy of the recorded operations.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Partitions returns the history as porcupine operations, one slice per
// key, with unknown operations ending after every other operation and
// blurred reads left out.
func (h *History) Partitions() map[string][]porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var end int64
	for _, op := range h.ops {
		end = max(end, op.Return, op.Call)
	}
	end++
	out := map[string][]porcupine.Operation{}
	for _, op := range h.ops {
		if op.Read && h.blurredLocked(op) {
			continue
		}
		if op.When != nil && !h.blurredLocked(Op{Call: op.When[0], Return: op.When[1]}) {
			continue
		}
		ret, output := op.Return, op.Output
		if op.Fragile != nil && h.blurredLocked(op) {
			op.Unknown, output = true, op.Fragile
		}
		switch {
		case op.Unknown && op.Late > 0:
			ret += op.Late
		case op.Unknown:
			ret = end
		}
		out[op.Key] = append(out[op.Key], porcupine.Operation{
			ClientId: op.Client, Input: op.Input, Output: output, Call: op.Call, Return: ret,
		})
	}
	return out
}

func (h *History) blurredLocked(op Op) bool {
	for _, w := range h.blurred {
		if op.Call <= w[1] && op.Return >= w[0] {
			return true
		}
	}
	return false
}
