package valid

import (
	"sync/atomic"
	"time"
)

// idemWindowFloor is the shortest idempotency window the modules accept:
// IdemWindowMin, unless a test lowered it (0 stands for IdemWindowMin).
var idemWindowFloor atomic.Int64

// IdemWindowFloor is the shortest idempotency window an option may set:
// IdemWindowMin in every program, shorter only while a test of this
// repository has lowered it with LowerIdemWindowFloor.
func IdemWindowFloor() time.Duration {
	if d := idemWindowFloor.Load(); d > 0 {
		return time.Duration(d)
	}
	return IdemWindowMin
}

// LowerIdemWindowFloor lets idempotency windows down to d be set until
// restore is called, so that a test can let several windows pass in
// seconds (a retention soak). It is the only way past IdemWindowMin, and
// Go's internal rule keeps it out of reach of every program outside this
// repository: users cannot shorten a window by accident. Not for tests that
// run in parallel with others that expect the production floor.
func LowerIdemWindowFloor(d time.Duration) (restore func()) {
	old := idemWindowFloor.Swap(int64(d))
	return func() { idemWindowFloor.Store(old) }
}
