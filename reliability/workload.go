package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// Tally is what one workload counted in one run.
type Tally struct {
	Ops     int // operations issued (resubmissions of one operation count once)
	Acked   int // writes acknowledged to the client
	Unknown int // operations whose outcome the client never learned
	// Retried counts operations that needed more than one call to get an
	// answer (the first call failed: timeout, reset, server down).
	Retried int
	// Lost counts acknowledged writes missing after recovery.
	Lost int
	// Unacked counts writes that were applied but not acknowledged by the
	// replica they waited for (ErrReplicaAck, WAIT short): reported, and not
	// counted as acknowledged.
	Unacked int
	// Mutex counts mutual-exclusion violations: fenced writes accepted from
	// two leases that overlapped (a lost update of the protected counter,
	// a token handed out twice, tokens accepted out of order).
	Mutex int
	// Oversell counts units sold beyond a SKU's supply.
	Oversell int
	// Double counts operation IDs whose effect appears more than once.
	Double int
	// Problems lists invariant failures that are bugs whatever the fault:
	// a journal that does not match the state, a resubmission answered
	// differently, a refused operation that was applied.
	Problems []string
	// Details describes the lost writes, violations, oversold units and
	// double charges counted above (the first few of each).
	Details []string
}

func (t *Tally) problem(format string, args ...any) {
	if len(t.Problems) < 50 {
		t.Problems = append(t.Problems, fmt.Sprintf(format, args...))
	}
}

func (t *Tally) detail(format string, args ...any) {
	if len(t.Details) < 50 {
		t.Details = append(t.Details, fmt.Sprintf(format, args...))
	}
}

// workload is one module's part of a run.
type workload interface {
	name() string
	setup(ctx context.Context) error
	// client runs operations as client i while more(done) says so.
	client(ctx context.Context, i int, rng *rand.Rand, more func(done int) bool)
	// verify checks the invariants after recovery; it may issue calls to
	// resolve outcomes.
	verify(ctx context.Context) Tally
	history() *History
	model() porcupine.Model
	progress() *Progress
	close()
}

// SettleBudget bounds how long a client keeps resubmitting one operation
// to learn its outcome before it records the outcome as unknown.
var SettleBudget = 8 * time.Second

// settle calls op until it returns an answer (answer(err) is true), ctx
// ends or the budget runs out; it returns whether the last error is an
// answer, how many calls it made, and that error. Every call must carry the
// same operation ID.
func settle(ctx context.Context, op func() error, answer func(error) bool) (known bool, calls int, err error) {
	deadline := time.Now().Add(SettleBudget)
	for n := 1; ; n++ {
		err := op()
		if answer(err) {
			return true, n, err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false, n, err
		}
		t := time.NewTimer(time.Duration(10+rand.IntN(30)) * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// verdicts sorts a module's errors for a workload.
type verdicts struct {
	// pending errors are no answer yet, and the client calls again: a
	// write not yet acknowledged by its replica, an outcome unknown.
	pending []error
	// decisions are answers; refusals are the ones among them that the
	// workload expects (any other is a problem).
	decisions, refusals []error
}

// answered reports whether err is an answer rather than a failure to get
// one.
func (v verdicts) answered(err error) bool {
	return err == nil || !isOneOf(err, v.pending) && isOneOf(err, v.decisions)
}

// refusal reports whether err is one of the refusals the workload expects.
func (v verdicts) refusal(err error) bool { return isOneOf(err, v.refusals) }

// text renders a decision err as the decision's own text, to compare
// answers; any other error as it is.
func (v verdicts) text(err error) string {
	for _, e := range v.decisions {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

func isOneOf(err error, errs []error) bool {
	return slices.ContainsFunc(errs, func(e error) bool { return errors.Is(err, e) })
}

// record is one write of a journaled workload.
type record interface {
	// about returns the write's kind and operation ID, and where its answer
	// is kept ("" while unknown).
	about() (kind, id string, answer *string)
}

// journaled is the machinery the stock and wallet workloads share. Each
// write carries an operation ID and is sent until it has an answer, then
// tallied and kept as a record; a write or read of a checked slot group
// goes into the history. After the run, the writes left unknown are sent
// again to learn what they did, and the answers are compared with the
// journals. C is the module's client (one per process, and a verifier on
// the admin connection), R a write and Res the module's answer to one.
type journaled[C io.Closer, R record, Res any] struct {
	module   string
	check    porcupine.Model
	prefix   string
	admin    redis.UniversalClient
	conns    []C // the clients', one per process
	verifier C   // on admin, without replica acknowledgement
	hist     *History
	prog     Progress

	// send calls r's operation once.
	send func(ctx context.Context, conn C, r R) (Res, error)
	verdicts
	replicaAck error // the module's ErrReplicaAck
	// okText renders an applied write's result, to compare it with the
	// answer to a resubmission; replayed reports whether a result says it
	// answers one.
	okText   func(res Res) string
	replayed func(res Res) bool
	// output is the history's output of a write: applied when known and
	// err is nil.
	output func(r R, res Res, known bool, err error) any

	mu      sync.Mutex
	records []R
	tally   Tally
}

func (j *journaled[C, R, Res]) name() string           { return j.module }
func (j *journaled[C, R, Res]) history() *History      { return j.hist }
func (j *journaled[C, R, Res]) model() porcupine.Model { return j.check }
func (j *journaled[C, R, Res]) progress() *Progress    { return &j.prog }

func (j *journaled[C, R, Res]) close() {
	for _, conn := range j.conns {
		_ = conn.Close()
	}
	_ = j.verifier.Close()
}

// open makes the clients of two processes on d, with the replica
// acknowledgement d asks for, and the verifier on d's admin connection;
// newConn makes one.
func (j *journaled[C, R, Res]) open(tb testing.TB, d Deployment, newConn func(rdb redis.UniversalClient, ack bool) (C, error)) {
	j.admin = d.Admin(tb)
	for range 2 {
		conn, err := newConn(d.Client(tb), d.ReplicaAck())
		if err != nil {
			tb.Fatalf("%s.New: %v", j.module, err)
		}
		j.conns = append(j.conns, conn)
	}
	var err error
	if j.verifier, err = newConn(j.admin, false); err != nil {
		tb.Fatalf("%s.New: %v", j.module, err)
	}
}

// answerOf renders an answer: "ok" and the result, or the refusal.
func (j *journaled[C, R, Res]) answerOf(res Res, err error) string {
	if err != nil {
		return j.text(err)
	}
	return j.okText(res)
}

// resolve sends r on conn until it has an answer (see settle); first, when
// not nil, answers the first call.
func (j *journaled[C, R, Res]) resolve(ctx context.Context, conn C, r R, first func() (Res, error)) (res Res, known bool, calls int, err error) {
	known, calls, err = settle(ctx, func() error {
		var err error
		if first != nil {
			res, err = first()
			first = nil
			return err
		}
		res, err = j.send(ctx, conn, r)
		return err
	}, j.answered)
	return res, known, calls, err
}

// write sends r until it has an answer and records it; g is the group of a
// checked write ("" for one checked by its invariants only) and in its
// input in the history.
func (j *journaled[C, R, Res]) write(ctx context.Context, c int, conn C, r R, g string, in any) {
	j.finish(ctx, c, conn, r, g, in, j.hist.Now(), time.Now(), nil)
}

// finish is write for a write called at call (callT on the wall clock);
// first, when not nil, answers its first call (made in a batch).
func (j *journaled[C, R, Res]) finish(ctx context.Context, c int, conn C, r R, g string, in any, call int64, callT time.Time, first func() (Res, error)) {
	res, known, calls, err := j.resolve(ctx, conn, r, first)
	ret := j.hist.Now()
	kind, id, answer := r.about()
	j.mu.Lock()
	j.tally.Ops++
	if calls > 1 {
		j.tally.Retried++
	}
	switch {
	case !known:
		j.tally.Unknown++
		if errors.Is(err, j.replicaAck) {
			j.tally.Unacked++
		}
	case err == nil:
		j.tally.Acked++
	case !j.refusal(err):
		j.tally.problem("%s %s %s: %v", j.module, kind, id, err)
	}
	if known {
		*answer = j.answerOf(res, err)
	}
	j.records = append(j.records, r)
	j.mu.Unlock()
	if known {
		j.prog.OK(callT)
	}
	if g != "" {
		j.hist.Add(Op{Client: c, Key: g, Input: in, Output: j.output(r, res, known, err), Call: call, Return: ret, Unknown: !known})
	}
}

// batch sends the writes rs of group g (ins are their inputs) in one call
// of send, which returns the answer to each by index, and finishes those
// without an answer one by one. It returns the writes that have an answer.
func (j *journaled[C, R, Res]) batch(ctx context.Context, c int, conn C, g string, rs []R, ins []any, send func() func(k int) (Res, error)) []R {
	call, callT := j.hist.Now(), time.Now()
	answer := send()
	var out []R
	for k, r := range rs {
		j.finish(ctx, c, conn, r, g, ins[k], call, callT, func() (Res, error) { return answer(k) })
		if _, _, a := r.about(); *a != "" {
			out = append(out, r)
		}
	}
	return out
}

// replay resubmits a decided write: it must get the first answer, and say
// it is a replay.
func (j *journaled[C, R, Res]) replay(ctx context.Context, conn C, r R) {
	res, known, _, err := j.resolve(ctx, conn, r, nil)
	if !known {
		return
	}
	kind, id, first := r.about()
	got := j.answerOf(res, err)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tally.Ops++
	if got != *first {
		j.tally.problem("%s %s %s resubmitted: answered %q, first answer %q", j.module, kind, id, got, *first)
	}
	if err == nil && !j.replayed(res) {
		j.tally.problem("%s %s %s resubmitted: Result.Replayed is false", j.module, kind, id)
	}
}

// read records a read of group g with input in: get makes it and returns
// its output. A read without an answer tells nothing.
func (j *journaled[C, R, Res]) read(c int, g string, in any, get func() (any, error)) {
	call, callT := j.hist.Now(), time.Now()
	out, err := get()
	ret := j.hist.Now()
	j.mu.Lock()
	j.tally.Ops++
	j.mu.Unlock()
	if err != nil {
		return
	}
	j.prog.OK(callT)
	j.hist.Add(Op{Client: c, Key: g, Input: in, Output: out, Call: call, Return: ret, Read: true})
}

// resolveUnknown sends every write whose outcome no client learned again,
// on the verifier: the answer says what it did, and is kept prefixed with
// "resolved ".
func (j *journaled[C, R, Res]) resolveUnknown(ctx context.Context) {
	j.mu.Lock()
	records := slices.Clone(j.records)
	j.mu.Unlock()
	for _, r := range records {
		if _, _, a := r.about(); *a != "" {
			continue
		}
		res, known, _, err := j.resolve(ctx, j.verifier, r, nil)
		if known {
			_, _, a := r.about()
			j.mu.Lock()
			*a = "resolved " + j.answerOf(res, err)
			j.mu.Unlock()
		}
	}
}

// applied is one effect of a write in a journal: its operation ID and
// kind, and the SKU or account it is on.
type applied struct{ id, kind, at string }

// expected is what the answers to the writes say the journals hold.
type expected struct {
	want     map[applied]bool // acknowledged
	resolved map[applied]bool // found applied by a resubmission after the run
	refused  map[applied]bool // refused for certain
}

// expect files the effects of every write (effects lists them) by its
// answer. j.mu must be held.
func (j *journaled[C, R, Res]) expect(effects func(r R) []applied) expected {
	e := expected{want: map[applied]bool{}, resolved: map[applied]bool{}, refused: map[applied]bool{}}
	for _, r := range j.records {
		_, _, answer := r.about()
		for _, k := range effects(r) {
			switch {
			case strings.HasPrefix(*answer, "ok"):
				e.want[k] = true
			case strings.HasPrefix(*answer, "resolved ok"):
				e.resolved[k] = true
			case slices.ContainsFunc(j.refusals, func(e error) bool { return *answer == e.Error() }):
				e.refused[k] = true
			}
		}
	}
	return e
}

// compare checks the journal of at, given as the effects of its entries in
// order, against the answers: an effect found twice counts as a double,
// an acknowledged one missing as lost; a refused one found, or one missing
// that a resubmission said was applied, is a problem.
func (e expected) compare(t *Tally, module, at string, journal []applied) {
	seen := map[applied]int{}
	for _, k := range journal {
		seen[k]++
		if seen[k] == 2 {
			t.Double++
			t.detail("%s %s: %s %s is in the journal more than once", module, at, k.kind, k.id)
		}
		if e.refused[k] {
			t.problem("%s %s: %s %s was refused but is in the journal", module, at, k.kind, k.id)
		}
	}
	for k := range e.want {
		if k.at == at && seen[k] == 0 {
			t.Lost++
			t.detail("%s %s: acknowledged %s %s is not in the journal", module, at, k.kind, k.id)
		}
	}
	for k := range e.resolved {
		if k.at == at && seen[k] == 0 {
			t.problem("%s %s: %s %s is not in the journal although a resubmission said it was applied", module, at, k.kind, k.id)
		}
	}
}
