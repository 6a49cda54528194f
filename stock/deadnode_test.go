package stock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/stock"
)

// shardOf is the index of the shard of a cluster of n masters, slots split
// evenly as redistest does, that serves tag's slot (tag with its braces).
func shardOf(tag string, n int) int { return redistest.KeySlot(tag) * n / 16384 }

// TestDeduct_Cluster_masterKilledForGood: the master serving a SKU is
// killed with SIGKILL and left down (its replica promoted), and the
// application's own ClusterClient, which nothing refreshes, still names
// the dead address, which refuses connections. On go-redis defaults and on
// send-once, with and without replica acknowledgement, the first Deduct
// after every live node agreed on the new master succeeds, and so does
// Level. Before, each failed ("connection refused", with ErrUnknownOutcome
// on defaults) until go-redis's periodic map reload a minute later.
func TestDeduct_Cluster_masterKilledForGood(t *testing.T) {
	// Two replicas per master: the promoted one still has a replica to
	// acknowledge.
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			// One SKU per shape, on shards of their own, so each shape
			// meets a master killed for good.
			groups := []string{"k0", "k1"}
			require.NotEqual(t, shardOf("{k0}", 3), shardOf("{k1}", 3))
			sku := groups[i] + "/sku"
			plain := mustNew(t, c.AppClient(shape.Adjust))
			acked := mustNew(t, c.AppClient(shape.Adjust), stock.WithReplicaAck(1, time.Second))
			defer plain.Close()
			defer acked.Close()
			require.NoError(t, plain.Create(ctx, sku, 100))
			for _, inv := range []*stock.Inventory{plain, acked} {
				_, err := inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("warm-%p", inv), Buyer: "b", Items: []stock.Item{{SKU: sku, Qty: 1}}})
				require.NoError(t, err)
			}
			_, err := c.KillMaster(ctx, "{"+groups[i]+"}")
			require.NoError(t, err)
			for _, inv := range []struct {
				name string
				inv  *stock.Inventory
			}{{"no-ack", plain}, {"replica-ack", acked}} {
				agreed := time.Now()
				_, err := inv.inv.Deduct(ctx, stock.Order{ID: "first-" + inv.name, Buyer: "b", Items: []stock.Item{{SKU: sku, Qty: 1}}})
				require.NoError(t, err, "%s: the first Deduct after the cluster agreed on the new master", inv.name)
				t.Logf("%s %s: first Deduct answered %v after the cluster agreed", shape.Name, inv.name, time.Since(agreed))
			}
			lv, err := plain.Level(ctx, sku)
			require.NoError(t, err)
			require.EqualValues(t, 4, lv.Sold, "no order lost or applied twice")
		})
	}
}

// TestDeduct_Cluster_bucketRefillAfterFailover: a SKU split into 4 buckets
// over 3 shards, the buyer's home bucket empty, so every order refills it
// from the others; before each order, a shard serving another bucket is
// failed over (CLUSTER FAILOVER), which the application's ClusterClient is
// not told about. On both client shapes every order succeeds: the reads
// and pipelines around the refill (the buckets' state, the bucket count,
// the transfers) are retried on a reloaded map. Before, on send-once, the
// refill's pipelined read returned a bare MOVED to the caller.
func TestDeduct_Cluster_bucketRefillAfterFailover(t *testing.T) {
	// Redis's masters vote for a shard's failover at most once per twice
	// cluster-node-timeout: rounds fail over the other shards in turn.
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	const buckets, rounds = 4, 4
	for _, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			g := "rf-" + shape.Name
			sku := g + "/sku"
			tags := make([]string, buckets)
			for k := range tags {
				tags[k] = "{" + stock.BucketTagForTest(g, k) + "}"
			}
			// A home bucket on a shard that some other bucket is not on.
			buyer, homeShard := "", -1
			for k := 0; k < buckets && buyer == ""; k++ {
				for _, t2 := range tags {
					if shardOf(t2, 3) != shardOf(tags[k], 3) {
						buyer, homeShard = buyerOfBucket(k, buckets), shardOf(tags[k], 3)
						break
					}
				}
			}
			require.NotEmpty(t, buyer)
			inv := mustNew(t, c.AppClient(shape.Adjust))
			defer inv.Close()
			// 8 units per bucket; the buyer empties their home bucket.
			require.NoError(t, inv.Create(ctx, sku, 8*buckets, stock.WithBuckets(buckets)))
			for i := range 8 {
				_, err := inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("drain-%d", i), Buyer: buyer, Items: []stock.Item{{SKU: sku, Qty: 1}}})
				require.NoError(t, err)
			}
			sold := int64(8)
			var others []string // a bucket on each other shard
			seen := map[int]bool{homeShard: true}
			for _, t2 := range tags {
				if s := shardOf(t2, 3); !seen[s] {
					seen[s] = true
					others = append(others, t2)
				}
			}
			for r := range rounds {
				// Fail over a shard serving another bucket than the home one.
				require.NoError(t, c.Failover(ctx, others[r%len(others)], redistest.FailoverPlain))
				_, err := inv.Deduct(ctx, stock.Order{ID: fmt.Sprintf("refill-%d", r), Buyer: buyer, Items: []stock.Item{{SKU: sku, Qty: 1}}})
				require.NoError(t, err, "order %d: refilled after a failover", r)
				sold++
			}
			// Checked through a client the cluster keeps up to date.
			check := mustNew(t, c.Client())
			defer check.Close()
			rep, err := check.Audit(ctx, sku)
			require.NoError(t, err)
			require.True(t, rep.OK(), rep.Problems)
			require.Equal(t, stock.Levels{Available: 8*buckets - sold, Sold: sold}, level(t, check, sku))
		})
	}
}

// TestChaos_Cluster_recovery measures, per Cluster fault and client shape,
// what Deduct's callers see (half with replica acknowledgement): how long
// the fault lasted until the cluster agreed, how long after that every
// caller's next call was answered, the slowest call and the errors. It
// prints a "recovery table" line per fault; the README's Cluster table
// quotes them.
func TestChaos_Cluster_recovery(t *testing.T) {
	redistest.Chaos(t)
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{AOF: true, AppendFsync: "always", Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	const sku = "rc/sku"
	for _, shape := range redistest.ClientShapes {
		plain := mustNew(t, c.AppClient(shape.Adjust))
		acked := mustNew(t, c.AppClient(shape.Adjust), stock.WithReplicaAck(1, time.Second))
		defer plain.Close()
		defer acked.Close()
		if shape.Name == redistest.ClientShapes[0].Name {
			require.NoError(t, plain.Create(ctx, sku, 1_000_000))
		}
		for fi, f := range redistest.RecoveryFaults() {
			rec := c.MeasureRecovery(t, ctx, "{rc}", f, redistest.RecoveryRun{Callers: 4,
				Kinds: map[string]error{"outcome unknown": stock.ErrUnknownOutcome, "replica ack not reached": stock.ErrReplicaAck},
				Call: func(ctx context.Context, w, i int) error {
					inv := plain
					if w%2 == 1 {
						inv = acked
					}
					o := stock.Order{ID: fmt.Sprintf("%s-%d-%d-%d", shape.Name, fi, w, i), Buyer: "b",
						Items: []stock.Item{{SKU: sku, Qty: 1}}}
					_, err := inv.Deduct(ctx, o)
					return err
				}})
			t.Logf("recovery table | stock Deduct | %s | %v", shape.Name, rec)
		}
	}
}
