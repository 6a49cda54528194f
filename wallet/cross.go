package wallet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/retry"
	"github.com/redkit-go/redkit/internal/script"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/internal/worker"
)

// Journal entry kinds of a transfer across slot groups (besides
// KindTransferIn on the destination).
const (
	KindTransferHold = "transfer_hold" // the amount is held on the source
	KindTransferVoid = "transfer_void" // the destination refused: the hold is released
)

// Steps of a transfer across slot groups, in order.
const (
	stepBegin  = 1 // source: record + hold (xbegin)
	stepCredit = 2 // destination: credit or refuse (xcredit)
	stepFinish = 3 // source: post or release the hold (xfinish)
	stepClean  = 4 // destination: inbound record expires after the window
	stepDone   = 5 // source: off the in-flight index, record expires (xdone)
	allSteps   = stepDone
)

// crossTransfer moves money between accounts of different slot groups in
// the steps above, each an idempotent script in one group. stop < allSteps
// ends it early (a crash, in tests).
func (l *Ledger) crossTransfer(ctx context.Context, t Transfer, opts []CallOption, stop int) (Result, error) {
	res := Result{TxID: t.ID}
	ga := keys.Group(t.From)
	fenceKeys, fenceArgs, err := l.fence(ga, opts)
	if err != nil {
		return res, err
	}
	destFull, err := l.destinationFull(ctx, t)
	if err != nil {
		return res, fmt.Errorf("transfer %s: reading the destination (nothing written): %w", t.ID, err)
	}
	fk := l.accountKeys(t.From)
	v, err := l.writeSwept(ctx, []string{t.From}, xbeginScript,
		append([]string{fk[0], fk[1], l.txKey(ga, t.ID), fk[2], fk[3], l.space.Key(ga, "xpend")}, fenceKeys...),
		append([]any{t.ID, t.From, t.To, strconv.FormatInt(t.Amount, 10), t.Memo, retry.Nonce(),
			l.cfg.window.Milliseconds(), destFull}, fenceArgs...)...)
	if v == nil {
		return res, fmt.Errorf("transfer %s: %w", t.ID, err)
	}
	beginAck := err
	r := strs(v)
	res.Replayed = status(r, 1) == "1"
	switch status(r, 0) {
	case "conflict":
		return res, withAck(&ConflictError{ID: t.ID, Field: status(r, 2)}, beginAck)
	case "pending":
		if beginAck != nil {
			return res, fmt.Errorf("transfer %s: %w", t.ID, inFlight(beginAck))
		}
	case "posted", "voided":
	default:
		_, rerr := decodePosting("transfer", t.ID, r, &res, t.From, t.To)
		return res, withAck(rerr, beginAck)
	}
	r, ackErr, err := l.settle(ctx, t, r, stop)
	if err != nil {
		return res, fmt.Errorf("transfer %s: %w", t.ID, unknownAfterBegin(err))
	}
	if status(r, 0) == "pending" { // stopped early (tests)
		return res, nil
	}
	// A failed clean-up leaves the transfer on the in-flight index, where
	// Recover finishes it; the caller's transfer is done either way.
	_ = l.forget(ctx, t, stop)
	res, err = decodeCross(t, r, res)
	if ackErr = errors.Join(beginAck, ackErr); err == nil && ackErr != nil {
		err = fmt.Errorf("transfer %s: %w", t.ID, ackErr)
	} else {
		err = withAck(err, ackErr)
	}
	return res, err
}

// destinationFull reads the destination of a transfer across groups and
// returns "1" when crediting the amount would take its balance or its
// transfers-in total out of bounds, "0" otherwise. Inside one group that is
// ErrInvalid, decided before anything is written; xbegin refuses such a new
// transfer the same way, after answering a recorded one. The destination
// may still fill up between this read and the credit step: that rare
// transfer is refused at the destination and voided (a stored refusal).
func (l *Ledger) destinationFull(ctx context.Context, t Transfer) (string, error) {
	st, err := l.readInts(ctx, l.accountKey(keys.Group(t.To), t.To), "posted", "tin")
	if err != nil || st == nil {
		return "0", err
	}
	if st.n[0] > valid.MaxAmount-t.Amount || st.n[1] > totalMax-t.Amount {
		return "1", nil
	}
	return "0", nil
}

// totalMax is TOTAL_MAX of lib.lua: the bound of a running total.
const totalMax = 9_000_000_000_000_000_000

// unknownAfterBegin is the error of a transfer across groups that failed
// after its first step was sent: a step may have been applied whatever
// the error says (a refused dial after a lost reply, a context that ended
// while a script ran), so the transfer is in flight and its outcome
// unknown until a call with the same ID or Recover finishes it.
func unknownAfterBegin(err error) error {
	if errors.Is(err, ErrUnknownOutcome) {
		return err
	}
	return fmt.Errorf("in flight (call again with the same ID, or Recover): %w: %w", ErrUnknownOutcome, err)
}

// inFlight is the error of a transfer across groups stopped after a step
// its replicas did not acknowledge (WithReplicaAck). Going on would build
// the next step on one a failover may still undo: a source posted for a
// credit that is then lost, or a credit for a hold that is then lost. So
// the transfer stays in flight, its outcome unknown to the caller, until a
// call with the same ID or Recover finds the step acknowledged.
func inFlight(ackErr error) error {
	return fmt.Errorf("in flight, stopped after a step the replicas did not acknowledge (call again with the same ID, or Recover): %w: %w",
		ErrUnknownOutcome, ackErr)
}

// withAck adds a replica acknowledgement shortfall to a refusal: a refusal
// is a decision stored like a success, and one the replicas did not
// acknowledge may be forgotten by a failover.
func withAck(refusal, ackErr error) error {
	if refusal == nil || ackErr == nil {
		return refusal
	}
	return fmt.Errorf("%w; %w", refusal, ackErr)
}

// settle runs steps 2 and 3 of a transfer whose record exists (r is the
// state reply of xbegin or xfinish) and returns its final state; stop
// ends it early (tests). ackErr reports replicas that did not acknowledge
// a step (WithReplicaAck); the steps were applied all the same.
func (l *Ledger) settle(ctx context.Context, t Transfer, r []string, stop int) (final []string, ackErr, err error) {
	if status(r, 0) != "pending" || stop <= stepBegin {
		return r, nil, nil
	}
	tk := l.accountKeys(t.To)
	v, ackErr := l.writeSwept(ctx, []string{t.To}, xcreditScript,
		[]string{tk[0], tk[1], l.inboundKey(t), tk[2], tk[3]},
		t.ID, t.From, t.To, strconv.FormatInt(t.Amount, 10), status(r, 3), t.Memo, l.cfg.window.Milliseconds(),
		status(r, 15), status(r, 16))
	if v == nil {
		return nil, nil, ackErr
	}
	c := strs(v)
	if len(c) != 6 {
		return nil, nil, fmt.Errorf("unexpected reply %q", c)
	}
	if ackErr != nil {
		return nil, nil, inFlight(ackErr)
	}
	if stop <= stepCredit {
		return r, ackErr, nil
	}
	fk := l.accountKeys(t.From)
	v, err = l.writeSwept(ctx, []string{t.From}, xfinishScript,
		[]string{fk[0], fk[1], l.txKey(keys.Group(t.From), t.ID), fk[2], fk[3]},
		t.ID, c[0], c[1], c[2], c[3], c[4], c[5], status(r, 16), l.cfg.window.Milliseconds())
	if v == nil {
		return nil, nil, err
	}
	if r = strs(v); status(r, 0) == "missing" {
		return nil, nil, fmt.Errorf("record of %s vanished (or is a later transfer's under the same ID): finished and forgotten by another call or Recover", t.ID)
	}
	return r, errors.Join(ackErr, err), nil
}

// inboundKey is a transfer's record at its destination. Transaction IDs
// are unique per source group, so it is named by both: the first '/' ends
// the group, which never holds one.
func (l *Ledger) inboundKey(t Transfer) string {
	return l.space.Key(keys.Group(t.To), "xin", keys.Group(t.From)+"/"+t.ID)
}

// forget runs steps 4 and 5 of a finished transfer: its records expire
// after the window and it leaves the in-flight index. stop ends it early.
func (l *Ledger) forget(ctx context.Context, t Transfer, stop int) error {
	if stop < stepClean {
		return nil
	}
	err := retry.Do(ctx, l.cfg.policy, func(ctx context.Context, _ int) error {
		// Two windows: xcredit refuses a transfer that began a window ago
		// and finds no record (see xcredit.lua), which is only safe while a
		// credited transfer's record outlives that, with room for clocks.
		return l.rdb.PExpire(ctx, l.inboundKey(t), 2*l.cfg.window).Err()
	})
	if err != nil || stop < stepDone {
		return err
	}
	ga := keys.Group(t.From)
	_, err = l.run(ctx, xdoneScript, []string{l.txKey(ga, t.ID), l.space.Key(ga, "xpend")}, t.ID,
		l.cfg.window.Milliseconds())
	return err
}

// decodeCross reads a final state reply {state, replayed, ”, currency,
// reason, time, entry, posted, held, overdraft, to_entry, to_currency,
// to_overdraft, to_posted, to_held}.
func decodeCross(t Transfer, r []string, res Result) (Result, error) {
	if len(r) < 15 {
		return res, fmt.Errorf("transfer %s: unexpected reply %q", t.ID, r)
	}
	ms, _ := strconv.ParseInt(r[5], 10, 64)
	res.Time = time.UnixMilli(ms)
	res.EntryID = r[6]
	res.Balance = decodeBalance([]string{r[3], r[9], r[7], r[8], "0"})
	if r[0] == "posted" {
		res.ToEntryID = r[10]
		res.To = decodeBalance([]string{r[11], r[12], r[13], r[14], "0"})
		return res, nil
	}
	var refusal error
	switch r[4] {
	case "to_not_found":
		refusal = fmt.Errorf("account %s: %w", t.To, ErrAccountNotFound)
	case "to_closed":
		refusal = fmt.Errorf("account %s: %w", t.To, ErrAccountClosed)
	case "currency":
		refusal = ErrCurrencyMismatch
	case "late":
		refusal = ErrTransferExpired
	case "to_overflow":
		refusal = fmt.Errorf("account %s: %w", t.To, ErrDestinationFull)
	default:
		return res, fmt.Errorf("transfer %s: voided for an unknown reason %q", t.ID, r[4])
	}
	return res, fmt.Errorf("transfer %s: %w", t.ID, refusal)
}

// Recover finishes every transfer across slot groups that a crashed or
// cancelled call left in flight (its amount held on the source), and
// forgets finished ones still on the in-flight index. It returns how many
// transfers it handled. Transfers still being run by live calls may be
// handled too; every step is idempotent, so that is harmless. It also
// releases the expired holds of accounts no call has touched since. With
// WithReplicaAck each step that moves money, and each release of holds,
// waits for the replicas; a shortfall is an error wrapping ErrReplicaAck
// (a transfer then stays in flight, finished by the next Recover).
//
// It finds them by scanning the keyspace (SCAN, on every primary of a
// Cluster) for the in-flight index keys, so call it now and then (for
// example at start-up, or through WithRecovery), not on every request.
func (l *Ledger) Recover(ctx context.Context) (n int, err error) {
	ctx, op := l.tel.start(ctx, "recover")
	defer func() { op.end(err, false) }()
	if err := l.check(); err != nil {
		return 0, err
	}
	idx, err := scanKeys(ctx, l.rdb, l.space.Key("*", "xpend"))
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	var errs []error
	for _, key := range idx {
		open, close := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
		if open < 0 || close < open {
			continue
		}
		group := key[open+1 : close]
		ids, err := l.rdb.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if err := l.recoverOne(ctx, group, key, id); err != nil {
				errs = append(errs, fmt.Errorf("transfer %s: %w", id, err))
				continue
			}
			n++
		}
	}
	errs = append(errs, l.sweepQuiet(ctx)...)
	if len(errs) > 0 {
		return n, fmt.Errorf("recover: %w", errors.Join(errs...))
	}
	return n, nil
}

// sweepQuiet sweeps every account whose hold records keep no expiry (it
// had a hold open when it was last written) and whose first hold index
// entry is due: expired holds are released and decided ones past the
// window forgotten, so the records of an account nobody calls again go,
// whatever became of the Ledger that placed its holds. An account whose
// holds are all decided gets the expiry back from the sweep. The index
// keys are looked at in pipelines of quietBatch, so an account with
// nothing due costs no script.
func (l *Ledger) sweepQuiet(ctx context.Context) []error {
	idx, err := scanKeys(ctx, l.rdb, l.space.Key("*", "hidx", "*"))
	if err != nil {
		return []error{err}
	}
	if len(idx) == 0 {
		return nil
	}
	now, err := l.rdb.Time(ctx).Result() // index scores are on the server's clock
	if err != nil {
		return []error{err}
	}
	var errs []error
	for start := 0; start < len(idx); start += quietBatch {
		batch := idx[start:min(start+quietBatch, len(idx))]
		ttls := make([]*redis.DurationCmd, len(batch))
		firsts := make([]*redis.ZSliceCmd, len(batch))
		_, _ = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, key := range batch {
				ttls[k] = p.PTTL(ctx, key)
				firsts[k] = p.ZRangeWithScores(ctx, key, 0, 0)
			}
			return nil
		})
		for k, key := range batch {
			_, account, ok := strings.Cut(key[strings.IndexByte(key, '}')+1:], ":hidx:")
			if !ok || ttls[k].Err() != nil || ttls[k].Val() != -1 {
				continue // malformed, gone, or forgotten in time by Redis itself
			}
			if z, err := firsts[k].Result(); err != nil || len(z) == 0 || int64(z[0].Score) > now.UnixMilli() {
				continue // nothing due yet (or looked at on the next run)
			}
			if _, err := l.sweepAcked(ctx, account, sweepLimit); err != nil && !errors.Is(err, ErrAccountNotFound) {
				errs = append(errs, fmt.Errorf("sweep %s: %w", account, err))
			}
		}
	}
	return errs
}

// quietBatch is how many hold indexes sweepQuiet looks at per pipeline.
const quietBatch = 500

func (l *Ledger) recoverOne(ctx context.Context, group, indexKey, id string) error {
	rec, err := l.rdb.HGetAll(ctx, l.txKey(group, id)).Result()
	if err != nil {
		return err
	}
	if rec["k"] != "xtransfer" {
		return l.rdb.ZRem(ctx, indexKey, id).Err() // forgotten record: nothing left to do
	}
	amount, _ := strconv.ParseInt(rec["n"], 10, 64)
	t := Transfer{ID: id, From: rec["a"], To: rec["b"], Amount: amount, Memo: rec["m"]}
	state := make([]string, 17)
	state[0], state[1], state[3], state[15], state[16] = rec["s"], "0", rec["cur"], rec["t0"], rec["nonce"]
	if state[0] == "pending" {
		// The record was read, not written, here: make sure the replicas
		// have it (and the hold) before crediting the destination for it.
		if _, err := script.Acked(ctx, l.rdb, l.cfg.ack, l.txKey(group, id)); err != nil {
			return inFlight(err)
		}
	}
	if _, _, err := l.settle(ctx, t, state, allSteps); err != nil {
		return err
	}
	return l.forget(ctx, t, allSteps)
}

// scanKeys lists the keys matching pattern on every primary.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	scan := func(ctx context.Context, c *redis.Client) ([]string, error) {
		var found []string
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			found = append(found, it.Val())
		}
		return found, it.Err()
	}
	switch c := rdb.(type) {
	case *redis.Client:
		return scan(ctx, c)
	case *redis.ClusterClient:
		var (
			mu  sync.Mutex
			all []string
		)
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			found, err := scan(ctx, m)
			mu.Lock()
			all = append(all, found...)
			mu.Unlock()
			return err
		})
		return all, err
	}
	return nil, fmt.Errorf("%w: Recover needs a *redis.Client or *redis.ClusterClient, not %T", ErrInvalid, rdb)
}

// recoverer runs Recover every interval until Close (WithRecovery).
type recoverer struct {
	w worker.Worker
}

func (l *Ledger) startRecoverer(every time.Duration) {
	switch l.rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return // Recover cannot scan this client's keyspace
	}
	r := &recoverer{}
	l.recoverer = r
	turn := l.space.Key("recovery", "turn")
	r.w.Start(func(ctx context.Context) {
		// The first run comes within an interval of the start, spread so
		// that processes started together do not all scan together.
		wait := every/2 + time.Duration(rand.Int64N(int64(every/2)+1))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = every
			// One Ledger per interval and prefix takes the turn; failures
			// are retried on the next tick.
			if ok, err := l.rdb.SetNX(ctx, turn, "1", every/2).Result(); err == nil && ok {
				_, _ = l.Recover(ctx)
			}
		}
	})
}

// close stops the recoverer, cancelling a Recover in flight, and waits for it.
func (r *recoverer) close() {
	if r == nil {
		return
	}
	r.w.Stop()
}
