package wallet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// TestLedger_Cluster_masterKilledForGood: the master serving a slot group
// is killed with SIGKILL and left down (its replica promoted; two replicas
// per master, so the new master has one to acknowledge), and the
// application's ClusterClient, which nothing refreshes, still names the
// dead address. On go-redis defaults and on send-once, without and with
// replica acknowledgement, the first Credit after every live node agreed
// on the new master succeeds, then a Transfer within the group and Balance.
// Before, each failed ("connection refused", with ErrUnknownOutcome on
// defaults) until go-redis's periodic map reload a minute later.
func TestLedger_Cluster_masterKilledForGood(t *testing.T) {
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for i, shape := range redistest.ClientShapes {
		t.Run(shape.Name, func(t *testing.T) {
			g := []string{"k0", "k1"}[i] // on shards of their own
			type variant struct {
				name string
				led  *wallet.Ledger
			}
			var vs []variant
			for _, v := range []struct {
				name string
				opts []wallet.Option
			}{{"no-ack", nil}, {"replica-ack", []wallet.Option{wallet.WithReplicaAck(1, time.Second)}}} {
				led := mustNew(t, c.AppClient(shape.Adjust), v.opts...)
				defer led.Close()
				for _, a := range []string{"a", "b"} {
					require.NoError(t, led.Open(ctx, fmt.Sprintf("%s/%s-%s", g, v.name, a), wallet.WithCurrency("CNY")))
				}
				_, err := led.Credit(ctx, wallet.Tx{ID: "warm-" + v.name, Account: g + "/" + v.name + "-a", Amount: 100})
				require.NoError(t, err)
				vs = append(vs, variant{v.name, led})
			}
			_, err := c.KillMaster(ctx, "{"+g+"}")
			require.NoError(t, err)
			for _, v := range vs {
				from, to := g+"/"+v.name+"-a", g+"/"+v.name+"-b"
				agreed := time.Now()
				_, err := v.led.Credit(ctx, wallet.Tx{ID: "first-" + v.name, Account: from, Amount: 10})
				require.NoError(t, err, "%s: the first Credit after the cluster agreed on the new master", v.name)
				t.Logf("%s %s: first Credit answered %v after the cluster agreed", shape.Name, v.name, time.Since(agreed))
				_, err = v.led.Transfer(ctx, wallet.Transfer{ID: "move-" + v.name, From: from, To: to, Amount: 30})
				require.NoError(t, err, v.name)
				require.EqualValues(t, 80, balanceOf(t, v.led, from).Available, v.name)
				require.EqualValues(t, 30, balanceOf(t, v.led, to).Available, v.name)
			}
		})
	}
}

// TestChaos_Cluster_recovery measures, per Cluster fault and client shape,
// what Credit's callers see (half with replica acknowledgement): how long
// the fault lasted until the cluster agreed, how long after that every
// caller's next call was answered, the slowest call and the errors. It
// prints a "recovery table" line per fault; the README's Cluster table
// quotes them.
func TestChaos_Cluster_recovery(t *testing.T) {
	redistest.Chaos(t)
	c := redistest.NewCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 2,
		Options: redistest.Options{AOF: true, AppendFsync: "always", Config: []string{"cluster-node-timeout 1000"}}})
	ctx := t.Context()
	for si, shape := range redistest.ClientShapes {
		plain := mustNew(t, c.AppClient(shape.Adjust))
		acked := mustNew(t, c.AppClient(shape.Adjust), wallet.WithReplicaAck(1, time.Second))
		defer plain.Close()
		defer acked.Close()
		for w := range 4 {
			require.NoError(t, plain.Open(ctx, fmt.Sprintf("rc/%d-%d", si, w), wallet.WithCurrency("CNY")))
		}
		for fi, f := range redistest.RecoveryFaults() {
			rec := c.MeasureRecovery(t, ctx, "{rc}", f, redistest.RecoveryRun{Callers: 4,
				Kinds: map[string]error{"outcome unknown": wallet.ErrUnknownOutcome, "replica ack not reached": wallet.ErrReplicaAck},
				Call: func(ctx context.Context, w, i int) error {
					led := plain
					if w%2 == 1 {
						led = acked
					}
					_, err := led.Credit(ctx, wallet.Tx{ID: fmt.Sprintf("c-%d-%d-%d-%d", si, fi, w, i),
						Account: fmt.Sprintf("rc/%d-%d", si, w), Amount: 1})
					return err
				}})
			t.Logf("recovery table | wallet Credit | %s | %v", shape.Name, rec)
		}
	}
}
