package reliability_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redkit-go/redkit/reliability"
)

// chaosScale reads CHAOS_SCALE: how many times the default work the long
// tier does (default 1; a fraction such as 0.1 shrinks it for a quick look).
func chaosScale(t *testing.T) float64 {
	s := os.Getenv("CHAOS_SCALE")
	if s == "" {
		return 1
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		t.Fatalf("CHAOS_SCALE=%q: want a positive number", s)
	}
	return f
}

func scaled(n int, scale float64) int { return max(1, int(float64(n)*scale)) }

// TestChaos is the long tier (make chaos): every fault on its own with
// thousands of operations per workload, 10 million IDs from Segments and
// Snowflakes sharing a name, a million wallet transfers and a million stock
// orders in batches under faults, and the split brain measurements. It
// prints the report table and writes it to $CHAOS_OUT when set.
func TestChaos(t *testing.T) {
	if os.Getenv("RUN_CHAOS") == "" {
		t.Skip("long tier: RUN_CHAOS=1 (make chaos)")
	}
	scale := chaosScale(t)
	seed := reliability.Seed(t)
	began := time.Now()
	var rows []reliability.Row
	ops := scaled(1000, scale)

	t.Run("faults", func(t *testing.T) {
		single := func(t *testing.T) *reliability.Single { return reliability.NewSingle(t) }
		for _, tc := range []struct {
			name  string
			fault func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool)
		}{
			{"kill-9", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.Kill9(time.Second)}, false
			}},
			{"sigstop", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.Pause(2 * time.Second)}, false
			}},
			{"held-replies", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.HoldReplies(300*time.Millisecond, 2*time.Second)}, false
			}},
			{"dropped-replies", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.DropReplies(300 * time.Millisecond)}, false
			}},
			{"resets", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.Resets(300 * time.Millisecond)}, false
			}},
			{"client-kills", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.KillClients()}, false
			}},
			{"partition", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := single(t)
				return d, []reliability.Fault{d.Partition(1500 * time.Millisecond)}, false
			}},
			{"paused-holder", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				return single(t), nil, true
			}},
			{"failover", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := reliability.NewPair(t)
				return d, []reliability.Fault{d.Failover()}, false
			}},
			{"crash-failover", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := reliability.NewPair(t)
				return d, []reliability.Fault{d.CrashFailover(time.Second)}, false
			}},
			{"cluster-shard-failover", func(t *testing.T) (reliability.Deployment, []reliability.Fault, bool) {
				d := reliability.NewCluster(t)
				return d, []reliability.Fault{d.ShardFailover(reliability.GroupKeys()...)}, false
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d, faults, stall := tc.fault(t)
				sc := reliability.Scenario{Deploy: d, Faults: faults, Stall: stall, Ops: ops, Seed: seed, MinFaults: 3,
					Quiet: [2]time.Duration{300 * time.Millisecond, time.Second}}
				if stall {
					sc.Quiet = [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
				}
				rows = append(rows, reliability.Run(t, sc)...)
			})
		}
	})

	t.Run("split-brain", func(t *testing.T) {
		rows = append(rows, splitBrain(t, reliability.Scenario{
			Seed: seed, Ops: ops, MinFaults: 2, MaxFaults: 2,
			Quiet: [2]time.Duration{100 * time.Millisecond, 500 * time.Millisecond},
		})...)
	})

	t.Run("ids", func(t *testing.T) {
		d := reliability.NewSingle(t)
		faults := []reliability.Fault{d.Kill9(time.Second), d.Pause(2 * time.Second), d.Resets(300 * time.Millisecond)}
		for _, kind := range []string{reliability.IDSegment, reliability.IDSnowflake} {
			rep := reliability.RunIDs(t, reliability.IDRun{
				Deploy: d, Kind: kind, Generators: 8, PerGenerator: scaled(10_000_000, scale) / 8,
				Duration: time.Duration(float64(time.Minute) * scale), Faults: faults, Seed: seed,
				Quiet: [2]time.Duration{time.Second, 3 * time.Second},
			})
			rows = append(rows, reliability.IDRow(rep, d, faults))
		}
	})

	t.Run("bulk", func(t *testing.T) {
		d := reliability.NewSingle(t)
		faults := []reliability.Fault{d.Kill9(time.Second), d.Resets(300 * time.Millisecond), d.HoldReplies(300*time.Millisecond, 2*time.Second)}
		run := reliability.BulkRun{Deploy: d, Ops: scaled(1_000_000, scale), Faults: faults, Seed: seed}
		rows = append(rows, reliability.RunWalletBulk(t, run), reliability.RunStockBulk(t, run))
	})

	table := reliability.FormatTable(rows)
	t.Logf("long tier, CHAOS_SCALE=%v, seed %d, %v:\n%s", scale, seed, time.Since(began).Round(time.Second), table)
	if path := os.Getenv("CHAOS_OUT"); path != "" {
		head := "# redkit reliability: long tier\n\nCHAOS_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64) +
			", seed " + strconv.FormatUint(seed, 10) + ", " + time.Since(began).Round(time.Second).String() + ".\n\n"
		if err := os.WriteFile(path, []byte(head+table), 0o644); err != nil {
			t.Errorf("CHAOS_OUT: %v", err)
		}
	}
}
