package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// SeedEnv names the environment variable that replays a run: its value is
// the seed a failing test printed.
const SeedEnv = "RELIABILITY_SEED"

// Seed returns the seed of a test's random choices (operations, keys,
// amounts, the order and timing of faults): RELIABILITY_SEED when set,
// otherwise a fresh random one. It logs the seed and how to replay it.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	if s := os.Getenv(SeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		tb.Logf("seed %d (from %s)", n, SeedEnv)
		return n
	}
	n := rand.Uint64() >> 1
	tb.Logf("seed %d (replay: %s)", n, ReplayHint(tb, n))
	return n
}

// ReplayHint is the command line that replays tb with seed.
func ReplayHint(tb testing.TB, seed uint64) string {
	parts := strings.Split(tb.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	name := strings.Join(parts, "/")
	cmd := fmt.Sprintf("%s=%d go test -race -count=1 -timeout 60m -run '%s' ./reliability/", SeedEnv, seed, name)
	if strings.Contains(name, "Chaos") {
		cmd = "RUN_CHAOS=1 " + cmd
	}
	return cmd
}

// CheckTimeout bounds the linearizability check of one partition. A check
// that runs out of time fails: a history that cannot be decided proves
// nothing.
const CheckTimeout = time.Minute

// CheckLinearizable checks every partition of h against model with
// porcupine. A partition that is not linearizable, or whose check timed
// out, fails tb; its visualisation is written to a file named in the
// failure message (see VisualizationPath), with the seed to replay it.
// It returns the number of operations checked.
func CheckLinearizable(tb testing.TB, what string, model porcupine.Model, h *History, seed uint64) int {
	tb.Helper()
	parts := h.Partitions()
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := 0
	for _, k := range keys {
		ops := parts[k]
		n += len(ops)
		res, info := porcupine.CheckOperationsVerbose(model, ops, CheckTimeout)
		if res == porcupine.Ok {
			continue
		}
		path := VisualizationPath(tb, what+"-"+k, seed)
		verr := porcupine.VisualizePath(model, info, path)
		if verr != nil {
			path = fmt.Sprintf("(not written: %v)", verr)
		}
		tb.Errorf("%s %q: %d operations: porcupine says %s (Unknown: the check timed out after %v).\n%s"+
			"  visualisation: %s\n  seed %d; replay: %s",
			what, k, len(ops), res, CheckTimeout, stuck(model, ops, info), path, seed, ReplayHint(tb, seed))
	}
	return n
}

// VisualizationPath is where a failing history is written: the test's
// temporary directory is deleted after the test, so it goes to
// os.TempDir()/redkit-reliability-<test>-<what>-<seed>.html.
func VisualizationPath(tb testing.TB, what string, seed uint64) string {
	clean := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, tb.Name()+"-"+what)
	return filepath.Join(os.TempDir(), fmt.Sprintf("redkit-reliability-%s-%d.html", clean, seed))
}

// stuck describes where the longest linearization porcupine found ends: the
// state it reached, its last operations and the operations that could not
// come next (the earliest ones left).
func stuck(model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var best []int
	for _, p := range info.PartialLinearizations() {
		for _, lin := range p {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	state := model.Init()
	placed := map[int]bool{}
	for _, id := range best {
		_, state = model.Step(state, ops[id].Input, ops[id].Output)
		placed[id] = true
	}
	desc := func(id int) string {
		op := ops[id]
		return fmt.Sprintf("    client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, model.DescribeOperation(op.Input, op.Output))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  longest linearization: %d of %d operations, ending in state %s after:\n", len(best), len(ops), describeState(model, state))
	for _, id := range best[max(0, len(best)-5):] {
		b.WriteString(desc(id))
	}
	var left []int
	for id := range ops {
		if !placed[id] {
			left = append(left, id)
		}
	}
	slices.SortFunc(left, func(a, c int) int { return int(ops[a].Call - ops[c].Call) })
	b.WriteString("  earliest operations left over:\n")
	for _, id := range left[:min(len(left), 6)] {
		b.WriteString(desc(id))
	}
	return b.String()
}

func describeState(model porcupine.Model, state any) string {
	if model.DescribeState == nil {
		return fmt.Sprint(state)
	}
	return model.DescribeState(state)
}
