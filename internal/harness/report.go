package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
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
	var cells []Shape
	seen := map[int64]bool{}
	seenCell := map[string]bool{}
	addCell := func(sh Shape) {
		if !seenCell[sh.String()] {
			seenCell[sh.String()] = true
			cells = append(cells, sh)
		}
	}
	addKey := func(key string) {
		if sh, err := ParseShape(key); err == nil {
			addCell(sh)
		}
	}
	for _, sh := range rep.Shapes {
		addCell(sh)
	}
	if len(rep.Shapes) == 0 {
		for _, v := range rep.Shares {
			addCell(ShareShape(v))
		}
	}
	for _, s := range rep.Summaries {
		if !seen[s.Limit] {
			seen[s.Limit] = true
			limits = append(limits, s.Limit)
		}
		if s.Shape != "" {
			addKey(s.Shape)
		} else {
			addCell(ShareShape(s.Share))
		}
	}
	for _, run := range rep.Runs {
		if !seen[run.Limit] {
			seen[run.Limit] = true
			limits = append(limits, run.Limit)
		}
		addKey(runCell(run))
	}
	if len(cells) == 0 {
		cells = []Shape{{Kind: Alone}}
	}
	rep.Shapes = cells
	if rep.Baseline == "" && len(rep.Loaders) > 0 {
		rep.Baseline = rep.Loaders[0].Name
	}
	rep.Summaries = summarize(rep.Runs, rep.Loaders, limits, cells, rep.Baseline)
	return &rep, nil
}

// MergeReports joins reports of the same plan made by separate runs of the harness
// (the same loaders, names and commands, in the same order) into one: the runs of each
// later report follow the earlier ones with their rounds renumbered after them, and
// the summaries are recomputed. Date, host and settings are the first report's; the
// rounds are the sum.
func MergeReports(reps ...*Report) (*Report, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("harness: merge reports: none")
	}
	out := *reps[0]
	out.Runs = append([]Result(nil), reps[0].Runs...)
	for i, r := range reps[1:] {
		if len(r.Loaders) != len(out.Loaders) {
			return nil, fmt.Errorf("harness: merge reports: report %d has %d loaders, the first %d", i+2, len(r.Loaders), len(out.Loaders))
		}
		for j, l := range r.Loaders {
			if l.Name != out.Loaders[j].Name || strings.Join(l.Argv, "\x00") != strings.Join(out.Loaders[j].Argv, "\x00") {
				return nil, fmt.Errorf("harness: merge reports: report %d: loader %d is %s (%q), the first report's %s (%q)",
					i+2, j+1, l.Name, l.Argv, out.Loaders[j].Name, out.Loaders[j].Argv)
			}
		}
		offset := out.Rounds
		for _, run := range r.Runs {
			run.Round += offset
			out.Runs = append(out.Runs, run)
		}
		out.Rounds += r.Rounds
		for _, sh := range r.Shares {
			if !slices.Contains(out.Shares, sh) {
				out.Shares = append(out.Shares, sh)
			}
		}
		for _, sh := range r.Shapes {
			if !slices.Contains(out.Shapes, sh) {
				out.Shapes = append(out.Shapes, sh)
			}
		}
		if out.CoTenant == nil {
			out.CoTenant = r.CoTenant
		}
	}
	var js strings.Builder
	if err := out.WriteJSON(&js); err != nil {
		return nil, err
	}
	return ReadReport(strings.NewReader(js.String()))
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
	if len(r.Prewarm) > 0 {
		cache += fmt.Sprintf("; before each run `%s` ran outside the run's cgroup (what it reads is cached and charged there, not to the run)", strings.Join(r.Prewarm, " "))
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
		if s.Stopped > 0 {
			why = append(why, fmt.Sprintf("%d stopped below floor", s.Stopped))
		}
		if n := s.Runs - s.Finished - s.TimedOut - s.OOMKilled - s.Stopped; n > 0 {
			why = append(why, fmt.Sprintf("%d failed", n))
		}
		if len(why) > 0 {
			fin += " (" + strings.Join(why, ", ") + ")"
		}
		limit := FormatBytes(s.Limit)
		if r.withCells() {
			limit += ", " + s.cellLabel()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n",
			limit, s.Loader, fin,
			fmtStat(s.SamplesPerSec, 1, "%.0f"), fmtSpeedRatio(s, r.Baseline),
			fmtStat(s.P50, 1, "%.0f"), fmtStat(s.P99, 1, "%.0f"),
			fmtStat(s.Peak, 1<<20, "%.0f"), fmtRatio(s.PeakRatio), s.OOMKills)
	}
	b.WriteString("\nMedians over finished runs, range over rounds in parentheses; × baseline: samples/s over the baseline's in the same round (both ran back to back), else the ratio of the medians; peak memory (the cgroup's, all processes, page cache included) over all runs; DNF: no run finished.\n")
	if r.withCells() {
		r.writeCoTenant(&b)
	}
	b.WriteString("\nCommands:\n\n")
	for _, l := range r.Loaders {
		fmt.Fprintf(&b, "- %s: `%s`\n", l.Name, strings.Join(l.Argv, " "))
	}
	if r.CoTenant != nil && len(r.CoTenant.Argv) > 0 && r.hasKind(Ramp, Spike) {
		fmt.Fprintf(&b, "- co-tenant: `%s -bytes SHARE×LIMIT -ramp %v` (a spike adds `-hold HOLD -after AFTER×LIMIT`)\n", strings.Join(r.CoTenant.Argv, " "), r.CoTenant.Ramp)
	}
	if r.hasKind(Trainer) {
		fmt.Fprintf(&b, "- trainers: %s in a loader's arguments is BALLAST × LIMIT in bytes (0 alone)\n", BallastArg)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("harness: write Markdown report: %w", err)
	}
	return nil
}

// withCells reports whether the report has co-tenant cells other than alone.
func (r *Report) withCells() bool {
	return r.CoTenant != nil || r.hasKind(Ramp, Spike, Trainer)
}

// hasKind reports whether a cell of the report is of one of kinds (a report without
// shapes has ramps to its shares).
func (r *Report) hasKind(kinds ...ShapeKind) bool {
	cells := r.Shapes
	if len(cells) == 0 {
		for _, v := range r.Shares {
			cells = append(cells, ShareShape(v))
		}
	}
	for _, c := range cells {
		if slices.Contains(kinds, c.Kind) {
			return true
		}
	}
	return false
}

// cellLabel is the summary's cell for tables (reports before shapes: its share).
func (s Summary) cellLabel() string {
	if s.Label != "" {
		return s.Label
	}
	return fmtShare(s.Share)
}

// writeCoTenant writes the co-tenant table: per limit, cell and loader, what became of
// the co-tenant and of the loader, the slowdown against the loader's alone run, its
// pauses, whether every sample arrived exactly once, the group's memory stall and the
// steady-state fluctuation of its memory.
func (r *Report) writeCoTenant(b *strings.Builder) {
	var kinds []string
	ramp := time.Duration(0)
	if r.CoTenant != nil {
		ramp = r.CoTenant.Ramp
	}
	if r.hasKind(Ramp) {
		kinds = append(kinds, fmt.Sprintf("SHARE%%: a co-tenant touches SHARE × the limit of anonymous memory evenly over %v, started with the loader, and holds it until the loader ends", ramp))
	}
	if r.hasKind(Spike) {
		kinds = append(kinds, fmt.Sprintf("spike PEAK HOLD → AFTER: a co-tenant rises to PEAK × the limit over %v, holds it for HOLD, gives back all but AFTER × the limit at once and holds that until the loader ends", ramp))
	}
	if r.hasKind(Trainer) {
		kinds = append(kinds, "ballast SHARE: the loader is a trainer (a training loop consuming the batches) holding SHARE × the limit as ballast; its own OOM kill counts as the co-tenant's")
	}
	fmt.Fprintf(b, "\nWith a co-tenant in the same memory cgroup (%s):\n\n", strings.Join(kinds, "; "))
	b.WriteString("| limit | co-tenant | loader | loader finished | co-tenant OOM kills | loader OOM kills | × alone (wall) | samples/s × alone | paused s (pauses) | exactly once | ≤ alone + 1.5 × spike | PSI some % | PSI full % | fluctuation % |\n")
	b.WriteString("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Summaries {
		alone := s.Shape == aloneKey || (s.Shape == "" && s.Share == 0)
		kills, slow, speed, spike := "–", "1.00", "1.00", "–"
		if !alone {
			kills = fmt.Sprintf("%d/%d", s.CoTenantOOMKilled, s.Runs)
			slow, speed = fmtStatOr(s.Slowdown, "%.2f"), fmtStatOr(s.SpeedVsAlone, "%.2f")
		}
		if s.SpikeRuns > 0 {
			spike = fmt.Sprintf("%d/%d", s.WithinSpike, s.SpikeRuns)
		}
		paused := "0"
		if s.Pauses > 0 {
			paused = fmt.Sprintf("%s (%d)", fmtStat(s.Paused, 1, "%.1f"), s.Pauses)
		}
		once := "–"
		if s.KeysChecked > 0 {
			once = fmt.Sprintf("%d/%d", s.ExactlyOnce, s.KeysChecked)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d/%d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			FormatBytes(s.Limit), s.cellLabel(), s.Loader, s.Finished, s.Runs, kills, s.LoaderOOMKills, slow, speed, paused, once, spike,
			fmtStatOr(s.PSISome, "%.1f"), fmtStatOr(s.PSIFull, "%.1f"), fmtStatOr(s.Fluctuation, "%.1f"))
	}
	b.WriteString("\nco-tenant OOM kills: runs in which the kernel's OOM killer chose the co-tenant (told apart from the loader's own kills and from the harness's SIGKILL at a timeout), over runs; × alone: the loader's wall time (and samples/s) over its own run without a co-tenant in the same round, where both finished; paused: seconds paused below the floor per run, from the loader's pause and resume events (pauses over all runs in parentheses); exactly once: runs in which every sample of every epoch arrived once, from the batches' keys, over runs that sent keys; ≤ alone + 1.5 × spike: finished spike runs whose wall time was at most the alone run's plus 1.5 × the spike's hold; PSI: growth of the group's memory.pressure some/full totals over the run, in % of its wall time; fluctuation: stddev/mean of the group's memory.current (20 Hz) from the end of the warm-up and of the co-tenant's ramp to the last batch. Medians, range over rounds in parentheses.\n")
}

// fmtShare writes a co-tenant share: "alone" for 0, else a percentage.
func fmtShare(v float64) string {
	if v <= 0 {
		return "alone"
	}
	return fmt.Sprintf("%g%%", math.Round(1000*v)/10)
}

// fmtStatOr is fmtStat with "–" where there are no values (no PSI file, no steady
// state) rather than DNF.
func fmtStatOr(s Stat, f string) string {
	if s.N == 0 {
		return "–"
	}
	return fmtStat(s, 1, f)
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

// FormatBytes writes a memory limit for people: "none" for 0 or less, else
// [bytesize.Human] ("256 MiB", "2 GiB").
func FormatBytes(n int64) string {
	if n <= 0 {
		return "none"
	}
	return bytesize.Human(n)
}
