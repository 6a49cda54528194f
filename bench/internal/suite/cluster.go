package suite

import (
	"context"
	"fmt"
	"time"
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
	return out
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
