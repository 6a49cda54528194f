package idgen_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// embedded is a wrapper of the kind instrumentation and multi-tenant code
// writes: a struct embedding *redis.Client, a valid redis.UniversalClient.
type embedded struct{ *redis.Client }

// unwrapping is embedded with ClientWrapper.
type unwrapping struct{ *redis.Client }

func (u unwrapping) Unwrap() redis.UniversalClient { return u.Client }

// twice wraps a wrapper.
type twice struct{ unwrapping }

func (w twice) Unwrap() redis.UniversalClient { return w.unwrapping }

// loop unwraps to itself.
type loop struct{ *redis.Client }

func (l loop) Unwrap() redis.UniversalClient { return l }

// A counter on a client type whose primary connection idgen cannot find
// would reserve without replica acknowledgement: NewSequence and NewSegment
// refuse it with ErrInvalid, sending nothing, unless it unwraps to a
// *redis.Client or *redis.ClusterClient.
func TestCounter_clientTypes_failClosed(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{}).Client()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": rdb.Options().Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	var calls scriptCounter
	rdb.AddHook(&calls)
	for name, c := range map[string]redis.UniversalClient{
		"embedded":         embedded{rdb},
		"ring":             ring,
		"nil unwrap":       unwrapping{},
		"unwraps to self":  loop{rdb},
		"typed nil client": (*redis.Client)(nil),
	} {
		_, err := idgen.NewSequence(c, "typed")
		require.ErrorIs(t, err, idgen.ErrInvalid, "NewSequence with %s", name)
		_, err = idgen.NewSegment(c, "typed")
		require.ErrorIs(t, err, idgen.ErrInvalid, "NewSegment with %s", name)
	}
	require.Zero(t, calls.n.Load(), "nothing was sent")
	for name, c := range map[string]redis.UniversalClient{"unwrapping": unwrapping{rdb}, "twice": twice{unwrapping{rdb}}} {
		seq, err := idgen.NewSequence(c, "typed")
		require.NoError(t, err, name)
		_, err = seq.Next(t.Context())
		require.NoError(t, err, name)
	}
	require.Positive(t, calls.n.Load(), "through the unwrapped client")
}

// replicaBehindProxy starts a primary and a replica that replicates it
// through a proxy, so that cutting the proxy partitions them for real: what
// the primary writes meanwhile never reaches the replica.
func replicaBehindProxy(t *testing.T) (primary, replica *redistest.Server, link *redistest.Proxy) {
	primary = redistest.New(t, redistest.Options{})
	replica = redistest.New(t, redistest.Options{})
	link = redistest.NewProxy(t, primary.Addr())
	host, port, err := net.SplitHostPort(link.Addr())
	require.NoError(t, err)
	r := replica.Client()
	require.NoError(t, r.Do(t.Context(), "REPLICAOF", host, port).Err())
	eventuallyT(t, func() bool {
		info, _ := r.Info(t.Context(), "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	}, "the replica in sync")
	return primary, replica, link
}

// A wrapped client with replica acknowledgement: the replica is cut off,
// the primary killed, the replica promoted, and a second process counts on
// the new primary. The first process's reservations while the replica was
// cut off were never acknowledged, so they must not have been handed out:
// no value is handed out twice, as with a plain client.
func TestCounter_wrappedClient_failover_noDuplicates(t *testing.T) {
	for _, kind := range []string{"sequence", "segment"} {
		t.Run(kind, func(t *testing.T) {
			primary, replica, link := replicaBehindProxy(t)
			first := unwrapping{primary.Client(func(o *redis.Options) { o.MaxRetries = -1 })}
			name := "wrapped-" + kind
			gen := func(rdb redis.UniversalClient) idgen.Generator {
				opts := []idgen.Option{idgen.WithReplicaAckTimeout(300 * time.Millisecond)}
				if kind == "sequence" {
					seq, err := idgen.NewSequence(rdb, name, opts...)
					require.NoError(t, err)
					return seq
				}
				seg, err := idgen.NewSegment(rdb, name, append(opts, idgen.WithMinStep(5), idgen.WithMaxStep(5))...)
				require.NoError(t, err)
				t.Cleanup(func() { _ = seg.Close() })
				return seg
			}
			g := gen(first)
			var got []int64
			take := func(g idgen.Generator, n int) (errs int) {
				for range n {
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					id, err := g.Next(ctx)
					cancel()
					if err != nil {
						errs++
						continue
					}
					got = append(got, id.Int64())
				}
				return errs
			}
			eventuallyT(t, func() bool { take(g, 1); return len(got) >= 10 }, "values the replica acknowledged")

			require.NoError(t, link.Cut(true)) // partitioned: the replica acknowledges nothing
			const cutOff = 20
			errs := take(g, cutOff)
			require.NoError(t, primary.Kill())
			r := replica.Client()
			require.NoError(t, r.Do(t.Context(), "REPLICAOF", "NO", "ONE").Err())
			second := gen(r)
			for range 100 {
				if id, err := second.Next(t.Context()); err == nil {
					got = append(got, id.Int64())
				}
			}
			slices.Sort(got)
			for i := 1; i < len(got); i++ {
				if got[i] == got[i-1] {
					t.Fatalf("BUG: %d handed out twice after the failover (%d calls of the wrapped client while the replica was cut off, %d refused)",
						got[i], cutOff, errs)
				}
			}
			// A Segment serves the runway acknowledged before the cut, then
			// refuses; every Sequence value needs an acknowledgement.
			require.Positive(t, errs, "the reservations no replica acknowledged are refused")
			if kind == "sequence" {
				require.Equal(t, cutOff, errs, "the reservations no replica acknowledged are refused")
			}
		})
	}
}
