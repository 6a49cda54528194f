package suite

import (
	"context"
	"fmt"
	"time"

	"github.com/redkit-go/redkit/redistest"
)

// clusterCases run on the loopback 3-master cluster and are compared with
// the same work on the single node.
func clusterCases() []Case {
	var out []Case
	for _, b := range []int{1, 6} {
		out = append(out, Case{
			Name:      fmt.Sprintf("cluster/stock-deduct-buckets-%d", b),
			What:      fmt.Sprintf("64 buyers, stock.Deduct on a 3-master cluster, hot SKU in %d bucket(s)", b),
			Needs:     "cluster",
			Yardstick: "flash/redkit-deduct",
			Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
				rdb, rt := clusterClient(env)
				defer rdb.Close()
				return redkitDeduct(ctx, rdb, rt, d, b)
			},
		})
	}
	for _, c := range []struct {
		name, what string
		mode       transferMode
	}{
		{"cluster/wallet-transfer", "16 goroutines, Transfer within a slot group on a 3-master cluster", transferSync},
		{"cluster/wallet-transfer-batch", "4 callers x TransferBatch of 100 on a 3-master cluster; ops = transfers", transferBatch},
		{"cluster/wallet-transfer-cross", "16 goroutines, Transfer across slot groups on a 3-master cluster", transferCross},
	} {
		yard := map[transferMode]string{transferSync: "wallet/transfer-sync", transferBatch: "wallet/transfer-batch",
			transferCross: "wallet/transfer-cross"}[c.mode]
		out = append(out, Case{
			Name: c.name, What: c.what, Needs: "cluster", Yardstick: yard,
			Run: transferCase(c.mode, true),
		})
	}
	// The same workloads while their slots move again and again, the way
	// redis-cli --cluster reshard moves them: the ratio is the cost of a
	// reshard running beside the traffic.
	out = append(out, Case{
		Name:      "cluster/stock-deduct-resharding",
		What:      "64 buyers, stock.Deduct on a 3-master cluster while the hot SKU's slot moves again and again (10 keys per MIGRATE, as redis-cli --cluster reshard)",
		Needs:     "cluster",
		Yardstick: "cluster/stock-deduct-buckets-1",
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			rdb, rt := clusterClient(env)
			defer rdb.Close()
			return resharding(ctx, env, []string{"{hot}"}, func() (Sample, error) { return redkitDeduct(ctx, rdb, rt, d, 1) })
		},
	}, Case{
		Name:      "cluster/wallet-transfer-resharding",
		What:      "16 goroutines, Transfer within a slot group on a 3-master cluster while 4 of the 16 groups' slots move again and again",
		Needs:     "cluster",
		Yardstick: "cluster/wallet-transfer",
		Run: func(ctx context.Context, env *Env, d time.Duration) (Sample, error) {
			rdb, rt := clusterClient(env)
			defer rdb.Close()
			return resharding(ctx, env, []string{"{g0}", "{g1}", "{g2}", "{g3}"},
				func() (Sample, error) { return transfers(ctx, rdb, rt, d, transferSync) })
		},
	})
	return out
}

// resharding runs work while the slots of tags move in the background, and
// adds the slots moved and keys migrated to the sample's notes.
func resharding(ctx context.Context, env *Env, tags []string, work func() (Sample, error)) (Sample, error) {
	stop := env.Cluster.Reshard(ctx, tags, redistest.MoveOptions{Batch: 10})
	s, err := work()
	st := stop()
	s.Extra = append(s.Extra, Figure{Name: "slots moved", Value: float64(st.Moves)},
		Figure{Name: "keys migrated", Value: float64(st.Keys)})
	if err == nil && st.Err != nil {
		err = fmt.Errorf("reshard: %w", st.Err)
	}
	return s, err
}

// Cases returns every case, in the order of the report.
func Cases() []Case {
	var out []Case
	out = append(out, serverCases()...)
	out = append(out, lockCases()...)
	out = append(out, flashCases()...)
	out = append(out, walletCases()...)
	out = append(out, idCases()...)
	out = append(out, clusterCases()...)
	return out
}
