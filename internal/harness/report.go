package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report, every run included, as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("harness: write JSON report: %w", err)
	}
	return nil
}

// ReadReport reads a report written by [Report.WriteJSON] and recomputes its summaries
// from its runs, so that a report saved by an older harness is shown with the current
// statistics.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("harness: read JSON report: %w", err)
	}
	var limits []int64
	seen := map[int64]bool{}
	for _, s := range rep.Summaries {
		if !seen[s.Limit] {
			seen[s.Limit] = true
			limits = append(limits, s.Limit)
		}
	}
	for _, run := range rep.Runs {
		if !seen[run.Limit] {
			seen[run.Limit] = true
			limits = append(limits, run.Limit)
		}
	}
	if rep.Baseline == "" && len(rep.Loaders) > 0 {
		rep.Baseline = rep.Loaders[0].Name
	}
	rep.Summaries = summarize(rep.Runs, rep.Loaders, limits, rep.Baseline)
	return &rep, nil
}

// WriteMarkdown writes the report as Markdown for docs/BENCHMARKS.md: a line saying
// what ran where, one table row per loader and limit (medians with the range over
// rounds in parentheses, ratios to the baseline), and the commands.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cache := "page cache as left by earlier runs"
	switch {
	case r.Cold:
		cache = "cold (page cache of the data dropped before each run)"
	case r.Warm:
		cache = "warm (data read into the page cache, outside the run's cgroup, before each run)"
	}
	fmt.Fprintf(&b, "%s on %s (%d CPUs): %d round(s) per loader and limit, alternating order; warm-up %d batches; timeout %v; %s.\n\n",
		r.Date.Format("2006-01-02 15:04 MST"), r.Host, r.CPUs, r.Rounds, r.Warmup, r.Timeout, cache)
	b.WriteString("| limit | loader | finished | samples/s | × " + r.Baseline + " | p50 batch ms | p99 batch ms | peak MiB | peak × " + r.Baseline + " | OOM kills |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Summaries {
		fin := fmt.Sprintf("%d/%d", s.Finished, s.Runs)
		var why []string
		if s.TimedOut > 0 {
			why = append(why, fmt.Sprintf("%d timed out", s.TimedOut))
		}
		if s.OOMKilled > 0 {
			why = append(why, fmt.Sprintf("%d OOM-killed", s.OOMKilled))
		}
		if n := s.Runs - s.Finished - s.TimedOut - s.OOMKilled; n > 0 {
			why = append(why, fmt.Sprintf("%d failed", n))
		}
		if len(why) > 0 {
			fin += " (" + strings.Join(why, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n",
			FormatBytes(s.Limit), s.Loader, fin,
			fmtStat(s.SamplesPerSec, 1, "%.0f"), fmtSpeedRatio(s, r.Baseline),
			fmtStat(s.P50, 1, "%.0f"), fmtStat(s.P99, 1, "%.0f"),
			fmtStat(s.Peak, 1<<20, "%.0f"), fmtRatio(s.PeakRatio), s.OOMKills)
	}
	b.WriteString("\nMedians over finished runs, range over rounds in parentheses; × baseline: samples/s over the baseline's in the same round (both ran back to back), else the ratio of the medians; peak memory (the cgroup's, all processes, page cache included) over all runs; DNF: no run finished.\n\nCommands:\n\n")
	for _, l := range r.Loaders {
		fmt.Fprintf(&b, "- %s: `%s`\n", l.Name, strings.Join(l.Argv, " "))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("harness: write Markdown report: %w", err)
	}
	return nil
}

func fmtStat(s Stat, unit float64, f string) string {
	if s.N == 0 {
		return "DNF"
	}
	med := fmt.Sprintf(f, s.Median/unit)
	if s.N == 1 {
		return med
	}
	return fmt.Sprintf("%s ("+f+"–"+f+")", med, s.Min/unit, s.Max/unit)
}

// fmtSpeedRatio shows the per-round ratios where there are any, else the ratio of the
// medians.
func fmtSpeedRatio(s Summary, baseline string) string {
	if s.Loader == baseline && s.SpeedRatio != 0 {
		return "1.00"
	}
	if s.RoundRatios.N > 0 {
		return fmtStat(s.RoundRatios, 1, "%.2f")
	}
	return fmtRatio(s.SpeedRatio)
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// FormatBytes writes a memory limit for people: "none" for 0 or less, whole MiB or GiB
// where exact, else bytes.
func FormatBytes(n int64) string {
	switch {
	case n <= 0:
		return "none"
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
