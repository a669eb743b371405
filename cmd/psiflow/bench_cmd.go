package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/harness"
)

func init() {
	register(command{
		name:    "bench",
		summary: "run loaders side by side in memory-limited cgroups and print a comparison table",
		run:     runBench,
	})
}

const benchUsage = `Usage: psiflow bench [flags] -- NAME=PROGRAM [ARGS...] [-- NAME=PROGRAM [ARGS...]]...
       psiflow bench [flags] -spec FILE

Runs each loader in a fresh cgroup (memory limit optional), started blocked so that
all its memory is charged there, kills the whole group when -timeout passes, and
prints a Markdown table: samples/s (after -warmup batches), p50/p99 batch gaps,
cgroup peak memory, OOM kills, and ratios to the baseline (the first loader unless
-baseline). Each round runs every loader once, in reverse order on odd rounds.

Loaders print JSON lines on stdout (see package internal/harness/protocol):
  {"event":"batch","n":64,"t":1.23}   per batch delivered (t: seconds since start)
  {"event":"done","samples":2000,"t":9.8}
"{data}" in a loader's arguments is replaced by -data. Loaders on the command line
are separated by a lone "--"; use -spec when a loader's own arguments contain one.
A spec file is JSON: {"loaders":[{"name":"dataloader","argv":["/usr/bin/python3",
"benchmarks/peers/dataloader.py","--data","{data}"],"env":["K=V"],"dir":""}]}.

Without -cold or -warm the page cache is left as earlier runs left it; a loader that
drops its files' cache after reading (psiflow's reader does) then makes the next run
cold. A file read for the first time is charged to the cgroup that read it. That holds
for a runtime's libraries too (torch's are hundreds of MiB), and a host may evict them
between runs: -prewarm runs a command that reads them (e.g. a script that imports torch)
before each run, outside the run's cgroup, so every run starts with them cached and
none is charged for them.

With -cotenant, each round also runs every loader next to a co-tenant, the stand-in
for a trainer sharing its memory limit: "psiflow cotenant", started in the same cgroup
just before the loader (blocked until it is in the group), touches SHARE × the limit of
anonymous memory evenly over -cotenant-ramp and holds it until the loader ends. Share 0
is the loader alone; every share runs in every round. A second table then gives, per
limit, share and loader: co-tenant OOM kills (told apart from the loader's own and from
the harness's kill at a timeout), whether the loader finished, its wall time over its
own alone run in the same round, the group's memory.pressure some/full stall in % of
the run, and the steady-state fluctuation of memory.current (stddev/mean).

Creating cgroups needs root (or a delegated cgroup subtree). Groups are named
psiflow/bench-<loader>-<n>-<pid>; those of a bench that was killed are swept at start.

Example (a co-tenant at 0, 50, 70 and 85% of 256 MiB):
  psiflow bench -data /tmp/imgs -limit 256M -cotenant 0,0.5,0.7,0.85 -cotenant-ramp 5s \
    -rounds 5 -timeout 2m -- psiflow=bin/psiflow-imagefolder -data {data}

Example (spikes to 90% for 5 and 10 s, then back to 40%, at 1 GiB):
  psiflow bench -data /tmp/imgs -limit 1G -cotenant-ramp 2s -rounds 3 \
    -cotenant-shape alone,spike:0.9/5s/0.4,spike:0.9/10s/0.4 -- psiflow=bin/psiflow-imagefolder -data {data}

Example (a PyTorch trainer holding 50/70/85% of 2 GiB, fed by psiflow and by the DataLoader):
  psiflow bench -data /tmp/imgs -limit 2G -cotenant-shape alone,trainer:0.5,trainer:0.7,trainer:0.85 -- \
    psiflow=/usr/bin/python3 benchmarks/peers/trainer.py --loader psiflow --data {data} --ballast {ballast} -- \
    dataloader=/usr/bin/python3 benchmarks/peers/trainer.py --loader dataloader --data {data} --ballast {ballast}

Example (the DataLoader against psiflow, unconstrained and at 256 MiB, cold):
  go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
  psiflow bench -data /tmp/imgs -limit none,256M -rounds 3 -cold -timeout 5m -- \
    dataloader=/usr/bin/python3 benchmarks/peers/dataloader.py --data {data} -- \
    psiflow=bin/psiflow-imagefolder -data {data}

Flags:
`

// benchSpec is the -spec file.
type benchSpec struct {
	Loaders []harness.Loader `json:"loaders"`
}

func runBench(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench", stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "dataset directory: replaces {data} in loader arguments; its files are dropped from the page cache with -cold")
	limits := fs.String("limit", "none", "comma-separated memory limits to compare at: none, or bytes with a K, M, G suffix (binary: 256M = 256 MiB)")
	rounds := flagval.Int(fs, "rounds", 3, 1, 1000, "runs of each loader at each limit")
	timeout := flagval.Duration(fs, "timeout", 10*time.Minute, time.Second, 24*time.Hour, "wall-clock limit of one run; the group is killed and the run reported as did-not-finish")
	warmup := flagval.Int(fs, "warmup", 3, 0, 1<<20, "leading batches left out of samples/s and latency")
	cold := fs.Bool("cold", false, "drop the page cache of the -data files before each run (fadvise DONTNEED); their cache is then charged to the run")
	warm := fs.Bool("warm", false, "read the -data files into the page cache before each run, outside the run's cgroup (so the run's peak excludes it)")
	prewarm := fs.String("prewarm", "", "a command (split at spaces, {data} replaced) run before each run outside the run's cgroup, so that the files it reads (a runtime's libraries, as a script that imports torch reads them) are cached and charged to the harness, the same for every run; no shell quoting")
	baseline := fs.String("baseline", "", "loader the others are compared to (default: the first)")
	spec := fs.String("spec", "", "JSON file with the loaders (instead of the command line)")
	jsonOut := fs.String("json", "", "also write the full report (every run) as JSON to this file")
	mdOut := fs.String("md", "", "also write the Markdown table to this file")
	svgOut := fs.String("svg", "", "also plot each run's memory.current over time to this SVG file (implies -timeline)")
	loaderStderr := fs.Bool("loader-stderr", false, "copy the loaders' standard error to this command's")
	saved := fs.String("report", "", "instead of running, print the table (and -md, -svg, -json) of a report saved with -json; several, comma-separated, are merged (same loaders; rounds follow each other)")
	timeline := fs.Bool("timeline", false, "keep each run's memory.current samples (20 Hz) in the JSON report")
	cotenant := fs.String("cotenant", "", "comma-separated co-tenant memory shares of the limit, each in [0, 1), 0 = the loader alone (e.g. 0,0.5,0.7,0.85); needs -limit without none")
	cotenantRamp := fs.Duration("cotenant-ramp", 5*time.Second, "time over which the co-tenant touches its memory (its peak, for a spike), evenly")
	cotenantShape := fs.String("cotenant-shape", "", "comma-separated co-tenant cells besides -cotenant's: "+harness.ShapeSyntax)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *saved != "" {
		var reps []*harness.Report
		for _, path := range strings.Split(*saved, ",") {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			rep, err := harness.ReadReport(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			reps = append(reps, rep)
		}
		rep, err := harness.MergeReports(reps...)
		if err != nil {
			return fmt.Errorf("-report %s: %w", *saved, err)
		}
		return writeBenchReport(stdout, rep, *mdOut, *jsonOut, *svgOut)
	}
	loaders, err := benchLoaders(fs.Args(), *spec, *data)
	if err != nil {
		return err
	}
	lims, err := parseLimits(*limits)
	if err != nil {
		return err
	}
	if *cold && *warm {
		return fmt.Errorf("%w: -cold and -warm exclude each other", errUsage)
	}
	shares, err := parseShares(*cotenant)
	if err != nil {
		return err
	}
	shapes, err := harness.ParseShapes(*cotenantShape)
	if err != nil {
		return fmt.Errorf("%w: -cotenant-shape: %v", errUsage, err)
	}
	var co harness.CoTenant
	if len(shares) > 0 || len(shapes) > 0 {
		for _, l := range lims {
			if l <= 0 {
				return fmt.Errorf("%w: -cotenant and -cotenant-shape need a memory limit: drop none from -limit", errUsage)
			}
		}
		if *cotenantRamp < 0 {
			return fmt.Errorf("%w: -cotenant-ramp must be ≥ 0", errUsage)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("co-tenant: find this program: %w", err)
		}
		co = harness.CoTenant{Argv: []string{self, "cotenant"}, Ramp: *cotenantRamp}
	}
	// Refuse an output file that cannot be written before the runs, not after them.
	for _, o := range []struct{ flag, path string }{{"-json", *jsonOut}, {"-md", *mdOut}, {"-svg", *svgOut}} {
		if o.path == "" {
			continue
		}
		if st, err := os.Stat(filepath.Dir(o.path)); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: %s %s: folder %s does not exist", errUsage, o.flag, o.path, filepath.Dir(o.path))
		}
	}
	opts := harness.Options{Timeout: *timeout, Warmup: *warmup, Cold: *cold, Warm: *warm, Timeline: *timeline || *svgOut != ""}
	if *cold || *warm {
		if *data == "" {
			return fmt.Errorf("%w: -cold and -warm need -data", errUsage)
		}
		if opts.Data, err = harness.DataFiles(*data); err != nil {
			return err
		}
	}
	if *prewarm != "" {
		opts.Prewarm = strings.Fields(strings.ReplaceAll(*prewarm, "{data}", *data))
		if strings.Contains(*prewarm, "{data}") && *data == "" {
			return fmt.Errorf("%w: -prewarm uses {data} but -data is not set", errUsage)
		}
		if _, err := exec.LookPath(opts.Prewarm[0]); err != nil {
			return fmt.Errorf("%w: -prewarm: %v", errUsage, err)
		}
	}
	if *loaderStderr {
		opts.Stderr = os.Stderr
	}
	// Groups of an earlier bench that was killed before it could remove them.
	if tree, err := cgroup.DefaultTree(); err == nil {
		_, _ = tree.RemoveStale(harness.DefaultGroupPrefix + "-")
	}
	sweepOrphans("bench")
	progress := func(r harness.Result) {
		rate := fmt.Sprintf("%7.1f samples/s", r.SamplesPerSec)
		if r.Outcome != harness.Finished {
			rate = fmt.Sprintf("%4d batches delivered", r.Batches)
		}
		coText := ""
		if c := r.CoTenant; c != nil {
			coText = fmt.Sprintf("  co-tenant %g%%: %s (%s touched)", math.Round(1000*c.Share)/10, c.Fate, bytesize.Human(c.Touched))
		}
		if r.Ballast > 0 {
			coText += fmt.Sprintf("  ballast %s", bytesize.Human(r.Ballast))
			if r.TrainerOOMKilled {
				coText += " (trainer OOM-killed)"
			}
		}
		if r.Pauses > 0 {
			coText += fmt.Sprintf("  paused %d× %v", r.Pauses, r.Paused.Round(100*time.Millisecond))
		}
		if ok, known := r.Keys.ExactlyOnce(); known {
			if ok {
				coText += "  keys: exactly once"
			} else {
				coText += fmt.Sprintf("  keys: %d duplicates, %d missing", r.Keys.Duplicates, r.Keys.Missing)
			}
		}
		if r.PSI != nil {
			coText += fmt.Sprintf("  PSI some %.1f%% full %.1f%%", r.PSI.SomePct, r.PSI.FullPct)
		}
		cell := ""
		if r.Shape != "" && r.Shape != "alone" {
			cell = " " + r.Shape
		}
		fmt.Fprintf(os.Stderr, "bench: %-12s limit %-8s%s round %d: %-10s %s  p99 %-8v peak %4d MiB  OOM kills %d  wall %v%s%s\n",
			r.Loader, harness.FormatBytes(r.Limit), cell, r.Round, r.Outcome, rate, r.P99.Round(time.Millisecond),
			r.PeakBytes>>20, r.OOMKills, r.Wall.Round(100*time.Millisecond), coText, detailSuffix(r))
	}
	rep, runErr := harness.Compare(ctx, harness.Plan{Loaders: loaders, Limits: lims, Rounds: *rounds, Baseline: *baseline, Options: opts, Shares: shares, Shapes: shapes, CoTenant: co}, progress)
	if rep == nil {
		return runErr
	}
	if err := writeBenchReport(stdout, rep, *mdOut, *jsonOut, *svgOut); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	return unfinished(rep)
}

// errUnfinished is wrapped by the error bench returns when a run did not finish.
var errUnfinished = errors.New("not every run finished")

// unfinished returns an error naming the runs that did not finish (timed out,
// OOM-killed, failed), so that a benchmark where a loader failed exits non-zero.
func unfinished(rep *harness.Report) error {
	var bad []string
	for _, r := range rep.Runs {
		if r.Outcome != harness.Finished {
			bad = append(bad, fmt.Sprintf("%s at %s round %d: %s", r.Loader, harness.FormatBytes(r.Limit), r.Round, outcomeSaid(r)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return fmt.Errorf("%w: %d of %d runs: %s", errUnfinished, len(bad), len(rep.Runs), strings.Join(bad, "; "))
}

// outcomeSaid is a run's outcome with its exit status and what the loader said
// about why it ended (a loader stopped below its floor names the limit and the
// floor): "stopped (exit status 3): psiflow run: the memory limit of ...".
func outcomeSaid(r harness.Result) string {
	s := string(r.Outcome)
	if r.ExitCode > 0 {
		s += fmt.Sprintf(" (exit status %d)", r.ExitCode)
	}
	if r.Said != "" {
		s += ": " + r.Said
	}
	return s
}

// writeBenchReport prints the Markdown table and writes the files asked for.
func writeBenchReport(stdout io.Writer, rep *harness.Report, mdOut, jsonOut, svgOut string) error {
	if err := rep.WriteMarkdown(stdout); err != nil {
		return err
	}
	if mdOut != "" {
		if err := writeFileWith(mdOut, rep.WriteMarkdown); err != nil {
			return err
		}
	}
	if jsonOut != "" {
		if err := writeFileWith(jsonOut, rep.WriteJSON); err != nil {
			return err
		}
	}
	if svgOut != "" && len(rep.Runs) > 0 {
		if err := writeFileWith(svgOut, rep.WriteSVG); err != nil {
			return err
		}
	}
	return nil
}

// detailSuffix says why run r did not finish: what the loader said, whole (a
// stop below the floor names the limit, the floor and the way out), else the
// first 200 bytes of the result's detail.
func detailSuffix(r harness.Result) string {
	if r.Outcome == harness.Finished {
		return ""
	}
	if r.Said != "" {
		if r.ExitCode > 0 {
			return fmt.Sprintf("  (exit status %d: %s)", r.ExitCode, r.Said)
		}
		return "  (" + r.Said + ")"
	}
	d := r.Detail
	if d == "" {
		return ""
	}
	if len(d) > 200 {
		d = d[:200] + "…"
	}
	return "  (" + d + ")"
}

func writeFileWith(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

var loaderName = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_.-]*)=(.+)$`)

// benchLoaders reads the loaders from the spec file or from the arguments after "--"
// ("NAME=PROGRAM ARGS..." groups separated by "--"), replacing {data} in arguments.
func benchLoaders(args []string, spec, data string) ([]harness.Loader, error) {
	var loaders []harness.Loader
	switch {
	case spec != "" && len(args) > 0:
		return nil, fmt.Errorf("%w: give loaders either with -spec or after --, not both", errUsage)
	case spec != "":
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, err
		}
		var s benchSpec
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%w: spec %s: %v", errUsage, spec, err)
		}
		loaders = s.Loaders
		for i, l := range loaders {
			if l.Name == "" || len(l.Argv) == 0 {
				return nil, fmt.Errorf("%w: spec %s: loader %d needs a name and an argv", errUsage, spec, i)
			}
		}
	default:
		var cur *harness.Loader
		for _, a := range args {
			if a == "--" {
				cur = nil
				continue
			}
			if cur == nil {
				m := loaderName.FindStringSubmatch(a)
				if m == nil {
					return nil, fmt.Errorf("%w: loader %q: want NAME=PROGRAM, then its arguments", errUsage, a)
				}
				loaders = append(loaders, harness.Loader{Name: m[1], Argv: []string{m[2]}})
				cur = &loaders[len(loaders)-1]
				continue
			}
			cur.Argv = append(cur.Argv, a)
		}
	}
	if len(loaders) == 0 {
		return nil, fmt.Errorf("%w: no loaders (give them after --, or with -spec)", errUsage)
	}
	for i := range loaders {
		for j, a := range loaders[i].Argv {
			if strings.Contains(a, "{data}") {
				if data == "" {
					return nil, fmt.Errorf("%w: loader %s uses {data} but -data is not set", errUsage, loaders[i].Name)
				}
				loaders[i].Argv[j] = strings.ReplaceAll(a, "{data}", data)
			}
		}
	}
	return loaders, nil
}

// parseLimits parses "none,256M,1G" into bytes (0: unconstrained).
func parseLimits(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "none", "max", "0", "unconstrained":
			out = append(out, 0)
			continue
		case "":
			return nil, fmt.Errorf("%w: -limit %q: empty item", errUsage, s)
		}
		v, err := flagval.ParseSize(f)
		if err != nil || v <= 0 || v > maxMemory {
			return nil, fmt.Errorf("%w: -limit %q: item %s: want none or a size like 256M", errUsage, s, strconv.Quote(f))
		}
		out = append(out, v)
	}
	return out, nil
}

// parseShares parses "0,0.5,0.7,0.85" (co-tenant shares of the limit); "" is none.
func parseShares(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []float64
	seen := map[float64]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v >= 0 && v < 1) || seen[v] {
			return nil, fmt.Errorf("%w: -cotenant %q: item %s: want distinct shares of the limit in [0, 1), like 0.7", errUsage, s, strconv.Quote(f))
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, nil
}
