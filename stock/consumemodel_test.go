package stock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// consumeIdle is MinIdle in the consumer model: a pending entry of another
// consumer idle this long is taken over.
const consumeIdle = 60 * time.Millisecond

// consumerState is one consumer of the model: idle (may ask for entries),
// busy (holds a batch in hand, not yet acknowledged) or down (crashed; its
// pending entries stay in the group under its name).
type consumerState struct {
	name  string
	batch int64
	down  bool
	hand  []string // the batch in hand; nil when idle
}

type pendingEntry struct {
	id, owner string
	at        time.Time // when the call that handed it out began
}

// consumeModel is what the group must look like: the journal's entries,
// how many of them the group has read, and the pending entries (who holds
// what), which every step compares with Redis.
type consumeModel struct {
	entries []string       // every journal entry, oldest first
	index   map[string]int // entry ID -> its place in entries
	read    int            // entries[:read] were handed out at least once
	pending []pendingEntry
	acked   map[string]bool
}

func (m *consumeModel) owner(id string) (int, string) {
	for i, p := range m.pending {
		if p.id == id {
			return i, p.owner
		}
	}
	return -1, ""
}

type consumeRun struct {
	t       *rapid.T
	ctx     context.Context
	inv     *stock.Inventory
	rdb     *redis.Client
	sku     string
	journal string
	m       *consumeModel
	cs      []*consumerState
	ops     int
}

// fetch is one round of Consume for c: what Redis hands out must be what
// the rules allow, and the model follows it.
func (r *consumeRun) fetch(c *consumerState) {
	start := time.Now()
	ids, dropped, err := r.inv.NextEntriesForTest(r.ctx, r.sku, "g", c.name, c.batch, consumeIdle)
	end := time.Now()
	if err != nil {
		r.t.Fatalf("%s: next: %v", c.name, err)
	}
	if dropped != 0 {
		r.t.Fatalf("%s: %d pending entries dropped, none was trimmed", c.name, dropped)
	}
	m := r.m
	// The rule: no entry handed out while an older one is held by another.
	for _, id := range ids {
		for _, p := range m.pending {
			if m.index[p.id] < m.index[id] && p.owner != c.name && !slices.Contains(ids, p.id) {
				r.t.Fatalf("%s was handed %s while %s held the older %s", c.name, id, p.owner, p.id)
			}
		}
	}
	if len(m.pending) == 0 {
		want := m.entries[m.read:min(m.read+int(c.batch), len(m.entries))]
		if !slices.Equal(ids, want) {
			r.t.Fatalf("%s: nothing pending, handed %v, want the next unread %v", c.name, ids, want)
		}
		for _, id := range ids {
			m.pending = append(m.pending, pendingEntry{id: id, owner: c.name, at: start})
		}
		m.read += len(ids)
	} else {
		if int64(len(ids)) > c.batch || len(ids) > len(m.pending) {
			r.t.Fatalf("%s: handed %d entries, batch %d, %d pending", c.name, len(ids), c.batch, len(m.pending))
		}
		for i, id := range ids {
			p := &m.pending[i]
			if p.id != id {
				r.t.Fatalf("%s: handed %v, not the oldest pending entries %v", c.name, ids, m.pending)
			}
			// Taken over: the holder left it for consumeIdle at least
			// (Redis's clock is this machine's, in whole milliseconds).
			if p.owner != c.name && end.Sub(p.at)+2*time.Millisecond < consumeIdle {
				r.t.Fatalf("%s took %s over from %s after %v, before it was idle for %v", c.name, id, p.owner, end.Sub(p.at), consumeIdle)
			}
			p.owner, p.at = c.name, start
		}
		// A consumer's own pending entries are never held back from it.
		if n := len(ids); n < len(m.pending) && int64(n) < c.batch && m.pending[n].owner == c.name {
			r.t.Fatalf("%s: handed %v, but it holds the next pending entry %s too", c.name, ids, m.pending[n].id)
		}
	}
	if len(ids) > 0 {
		c.hand = ids
	}
	r.ops++
}

// ack is Consume's acknowledgement after a handler returned: only the
// entries c still holds are acknowledged.
func (r *consumeRun) ack(c *consumerState) {
	n, err := r.inv.ConsumedForTest(r.ctx, r.sku, "g", c.name, c.hand)
	if err != nil {
		r.t.Fatalf("%s: ack: %v", c.name, err)
	}
	var still int64
	for _, id := range c.hand {
		if i, owner := r.m.owner(id); owner == c.name {
			r.m.pending = slices.Delete(r.m.pending, i, i+1)
			r.m.acked[id] = true
			still++
		}
	}
	if n != still {
		r.t.Fatalf("%s acknowledged %d of %v, %d of them still its own", c.name, n, c.hand, still)
	}
	c.hand = nil
	r.ops++
}

// waitIdle waits until every pending entry is idle for consumeIdle, so the
// next round of any consumer may take them over.
func (r *consumeRun) waitIdle() {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := r.rdb.XPendingExt(r.ctx, &redis.XPendingExtArgs{Stream: r.journal, Group: "g",
			Start: "-", End: "+", Count: 10000}).Result()
		if err != nil {
			r.t.Fatalf("xpending: %v", err)
		}
		idle := true
		for _, p := range ps {
			idle = idle && p.Idle >= consumeIdle
		}
		if idle {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("pending entries not idle within 10s")
}

// learn reads the entries appended to the journal since the model's last.
func (r *consumeRun) learn() {
	start := "-"
	if n := len(r.m.entries); n > 0 {
		start = "(" + r.m.entries[n-1]
	}
	msgs, err := r.rdb.XRange(r.ctx, r.journal, start, "+").Result()
	if err != nil {
		r.t.Fatalf("xrange: %v", err)
	}
	for _, msg := range msgs {
		r.m.index[msg.ID] = len(r.m.entries)
		r.m.entries = append(r.m.entries, msg.ID)
	}
}

// check compares the model with the group in Redis: the same pending
// entries held by the same consumers, the same last entry read, and every
// entry the group still needs present in the journal.
func (r *consumeRun) check() {
	ctx := r.ctx
	ps, err := r.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: r.journal, Group: "g",
		Start: "-", End: "+", Count: 10000}).Result()
	if err != nil {
		r.t.Fatalf("xpending: %v", err)
	}
	var got, want []string
	for _, p := range ps {
		got = append(got, p.ID+" "+p.Consumer)
	}
	for _, p := range r.m.pending {
		want = append(want, p.id+" "+p.owner)
	}
	if !slices.Equal(got, want) {
		r.t.Fatalf("pending entries %v, the model has %v", got, want)
	}
	groups, err := r.rdb.XInfoGroups(ctx, r.journal).Result()
	if err != nil || len(groups) != 1 {
		r.t.Fatalf("xinfo groups: %v %v", groups, err)
	}
	last := "0-0"
	if r.m.read > 0 {
		last = r.m.entries[r.m.read-1]
	}
	if groups[0].LastDeliveredID != last {
		r.t.Fatalf("the group read up to %s, the model up to %s", groups[0].LastDeliveredID, last)
	}
	need := slices.Clone(r.m.entries[r.m.read:])
	for _, p := range r.m.pending {
		need = append(need, p.id)
	}
	for _, id := range need {
		if msgs, err := r.rdb.XRange(ctx, r.journal, id, id).Result(); err != nil || len(msgs) != 1 {
			r.t.Fatalf("entry %s, pending or unread, is gone from the journal (%v)", id, err)
		}
	}
}

// TestConsume_model drives consumers of one group on one journal through
// random sequences of rounds, handlers that finish (the acknowledgement
// follows), crashes (a handler failed or the process died: the batch
// stays pending under its name), restarts under the same name, stalls
// past MinIdle (others take the batch over; the stalled one acknowledges
// late), new journal entries, and Checkpoint with Trim. After every step
// the group's pending entries in Redis are exactly the model's: who holds
// what. Every batch handed out follows the order rule (nothing handed out
// while an older entry is held by another; a consumer's own pending entries
// first, others' only once idle for MinIdle, new ones only with nothing
// pending). At the end all consumers crash, and one more, after MinIdle,
// drains the group: every entry of the journal was acknowledged (at least
// once).
func TestConsume_model(t *testing.T) {
	runConsumeModel(t, 30)
}

// TestChaos_consumeModel is the long run of TestConsume_model.
func TestChaos_consumeModel(t *testing.T) {
	runConsumeModel(t, 500*redistest.Chaos(t))
}

func runConsumeModel(t *testing.T, checks int) {
	redistest.SetRapidChecks(t, checks)
	srv := redistest.New(t, redistest.Options{})
	rdb := srv.Client()
	defer rdb.Close()
	runs := 0
	var ops int
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		inv := mustNew(t, rdb, stock.WithKeyPrefix(fmt.Sprintf("cm%d", runs)), stock.WithReclaimInterval(0))
		defer inv.Close()
		ctx := t.Context()
		r := &consumeRun{t: rt, ctx: ctx, inv: inv, rdb: rdb, sku: "m/sku", m: &consumeModel{acked: map[string]bool{}, index: map[string]int{}}}
		r.journal = inv.JournalKeyForTest(r.sku)
		if err := inv.Create(ctx, r.sku, 1000); err != nil {
			rt.Fatalf("create: %v", err)
		}
		if err := rdb.XGroupCreate(ctx, r.journal, "g", "0").Err(); err != nil {
			rt.Fatalf("group: %v", err)
		}
		r.learn()
		n := rapid.IntRange(2, 4).Draw(rt, "consumers")
		for i := range n {
			r.cs = append(r.cs, &consumerState{name: fmt.Sprintf("c%d", i), batch: rapid.Int64Range(1, 4).Draw(rt, "batch")})
		}
		pick := func(rt *rapid.T, ok func(*consumerState) bool) *consumerState {
			var can []*consumerState
			for _, c := range r.cs {
				if ok(c) {
					can = append(can, c)
				}
			}
			if len(can) == 0 {
				rt.Skip("no consumer can")
			}
			return rapid.SampledFrom(can).Draw(rt, "consumer")
		}
		restocks := 0
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				for range rapid.IntRange(1, 8).Draw(rt, "entries") {
					restocks++
					if _, err := inv.Restock(ctx, fmt.Sprintf("r%d", restocks), r.sku, 1); err != nil {
						rt.Fatalf("restock: %v", err)
					}
				}
				r.learn()
			},
			"round": func(rt *rapid.T) {
				r.fetch(pick(rt, func(c *consumerState) bool { return !c.down && c.hand == nil }))
			},
			"handler done": func(rt *rapid.T) {
				r.ack(pick(rt, func(c *consumerState) bool { return !c.down && c.hand != nil }))
			},
			"crash": func(rt *rapid.T) {
				c := pick(rt, func(c *consumerState) bool { return !c.down })
				c.down, c.hand = true, nil
			},
			"restart": func(rt *rapid.T) {
				pick(rt, func(c *consumerState) bool { return c.down }).down = false
			},
			"stall past MinIdle": func(rt *rapid.T) { r.waitIdle() },
			// Two consumers polling one right after the other once the
			// holders stalled: the takeover race.
			"stall, then two rounds": func(rt *rapid.T) {
				a := pick(rt, func(c *consumerState) bool { return !c.down && c.hand == nil })
				b := pick(rt, func(c *consumerState) bool { return !c.down && c.hand == nil && c != a })
				r.waitIdle()
				r.fetch(a)
				r.fetch(b)
			},
			"checkpoint and trim": func(rt *rapid.T) {
				if _, err := inv.Checkpoint(ctx, r.sku); err != nil {
					rt.Fatalf("checkpoint: %v", err)
				}
				if _, err := inv.Trim(ctx, r.sku); err != nil {
					rt.Fatalf("trim: %v", err)
				}
				r.learn()
			},
			"": func(rt *rapid.T) { r.check() },
		})

		// Every consumer crashes; a new one drains the group.
		for _, c := range r.cs {
			c.down, c.hand = true, nil
		}
		r.waitIdle()
		drain := &consumerState{name: "drain", batch: 3}
		for range 10000 {
			r.fetch(drain)
			if drain.hand == nil {
				break
			}
			r.ack(drain)
			r.check()
		}
		r.check()
		if len(r.m.pending) != 0 || r.m.read != len(r.m.entries) {
			rt.Fatalf("drained, yet %d pending and %d of %d read", len(r.m.pending), r.m.read, len(r.m.entries))
		}
		for _, id := range r.m.entries {
			if !r.m.acked[id] {
				rt.Fatalf("entry %s was never acknowledged", id)
			}
		}
		ops += r.ops
	})
	t.Logf("%d sequences, %d rounds and acknowledgements checked", runs, ops)
}
