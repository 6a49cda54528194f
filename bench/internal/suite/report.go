package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints results as one aligned table, then every violation,
// failure and skipped case below it. A ratio to another case is the median
// of the per-run ratios, followed by their spread; "~" marks one whose runs
// lie on both sides of 1 (no difference beyond the spread).
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\t   ops/s\tspread (min–max)\t  ratio (per-run spread)\tyardstick\tRT/op\tsrv CPU µs/op\tcli CPU µs/op\t    p50\t    p99\tviol\tnotes")
	for _, r := range results {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(tw, "%s\t skipped\t\t\t\t\t\t\t\t\t\t%s\n", r.Case, r.Skipped)
			continue
		case r.Failed != "" && r.Median == 0:
			fmt.Fprintf(tw, "%s\t  FAILED\t\t\t\t\t\t\t\t\t\t%s\n", r.Case, oneLine(r.Failed, 80))
			continue
		}
		ratio, yard := "", ""
		if r.Ratio > 0 {
			ratio, yard = ratioText(r.Ratio, r.RatioMin, r.RatioMax), r.Yardstick
		}
		viol := "0"
		if len(r.Violations) > 0 {
			viol = fmt.Sprintf("%d !!", len(r.Violations))
		}
		fmt.Fprintf(tw, "%s\t%8s\t%s–%s\t%s\t%s\t%5s\t%8s\t%9s\t%7s\t%7s\t%s\t%s\n", r.Case, count(r.Median),
			count(r.Min), count(r.Max), ratio, yard, trips(r), micros(r.ServerTime), micros(r.ClientCPU),
			latency(r.P50), latency(r.P99), viol, notes(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Failed != "" {
			fmt.Fprintf(w, "FAILED %s: %s\n", r.Case, r.Failed)
		}
	}
	for _, v := range Violations(results) {
		fmt.Fprintf(w, "!!! VIOLATION %s\n", v)
	}
	return nil
}

// WriteJSON writes results as one indented JSON document.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func count(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 10e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func micros(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func trips(r Result) string {
	if r.TripsPerOp == 0 {
		return "0"
	}
	if r.TripsPerOp < 0.1 {
		return fmt.Sprintf("%.2g", r.TripsPerOp)
	}
	return fmt.Sprintf("%.2f", r.TripsPerOp)
}

// latency formats milliseconds with a unit that keeps 2–3 digits.
func latency(v float64) string {
	switch {
	case v == 0:
		return ""
	case v >= 10:
		return fmt.Sprintf("%.0fms", v)
	case v >= 1:
		return fmt.Sprintf("%.1fms", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2fms", v)
	case v >= 0.001:
		return fmt.Sprintf("%.0fµs", v*1e3)
	}
	return fmt.Sprintf("%.0fns", v*1e6)
}

func notes(r Result) string {
	var parts []string
	if r.CmdsPerOp > 0 && r.CmdsPerOp-r.TripsPerOp > 0.005 {
		parts = append(parts, fmt.Sprintf("cmds/op %.2f", r.CmdsPerOp))
	}
	for _, f := range r.Extra {
		if f.Unit == "ms" {
			parts = append(parts, f.Name+" "+latency(f.Value))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", f.Name, num(f.Value), f.Unit))
	}
	for _, f := range r.Ratios {
		parts = append(parts, ratioText(f.Value, f.Min, f.Max)+" "+f.Name)
	}
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("errors %d (%s)", r.Errors, oneLine(r.FirstError, 60)))
	}
	return strings.Join(parts, ", ")
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)) && v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// ratioText formats a ratio with the spread of its per-run values, marked
// "~" when they lie on both sides of 1.
func ratioText(v, lo, hi float64) string {
	mark := ""
	if Even(lo, hi) {
		mark = "~"
	}
	if lo == 0 || hi == 0 || lo == hi {
		return fmt.Sprintf("%s%.2fx", mark, v)
	}
	return fmt.Sprintf("%s%.2fx (%.2f–%.2f)", mark, v, lo, hi)
}
