package suite

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// Holders checks mutual exclusion in process: every holder calls Enter right
// after acquiring and Exit right before releasing. Two holders inside at once
// is a violation.
type Holders struct {
	inside     atomic.Int32
	violations atomic.Int64
}

// Enter records a holder entering the critical section.
func (h *Holders) Enter() {
	if h.inside.Add(1) > 1 {
		h.violations.Add(1)
	}
}

// Exit records a holder leaving it.
func (h *Holders) Exit() { h.inside.Add(-1) }

// Violations describes what went wrong, if anything.
func (h *Holders) Violations() []string {
	if n := h.violations.Load(); n > 0 {
		return []string{fmt.Sprintf("mutual exclusion broken: %d times a second holder entered while another held the lock", n)}
	}
	return nil
}

// Duplicates sorts ids and reports how many are repeats of an earlier one.
func Duplicates(ids []int64) []string {
	slices.Sort(ids)
	dup := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			dup++
		}
	}
	if dup > 0 {
		return []string{fmt.Sprintf("%d repeated IDs among %d", dup, len(ids))}
	}
	return nil
}

// Conserved checks a stock or a balance after a run: what the callers were
// told succeeded (taken units or amounts) plus what is left must equal what
// there was, and nothing may be left below zero. It reports oversold units
// (or money taken twice, or lost) as violations; unit names the quantity.
func Conserved(unit string, initial, taken, remaining int64) []string {
	var out []string
	switch diff := initial - taken - remaining; {
	case diff > 0:
		out = append(out, fmt.Sprintf("%d %s lost: they left without a success reported (initial %d, reported %d, left %d)",
			diff, unit, initial, taken, remaining))
	case diff < 0:
		out = append(out, fmt.Sprintf("oversold: %d %s more reported taken than left (initial %d, reported %d, left %d)",
			-diff, unit, initial, taken, remaining))
	}
	if remaining < 0 {
		out = append(out, fmt.Sprintf("%s below zero: %d", unit, remaining))
	}
	return out
}
