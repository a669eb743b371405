package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/sink"
)

func init() {
	register(command{
		name:    "run",
		summary: "run a pipeline file (or a shipped one: demo, imagefolder, webdataset, tables), optionally in a fresh limited cgroup",
		run:     runRun,
	})
}

// envRunChild marks the child "psiflow run" started inside the -cgroup group.
const envRunChild = "PSIFLOW_RUN_CHILD"

// errStopped is returned when a signal stopped the run (after its summary); dispatch
// names the signal instead (see [stopsig.Of]).
var errStopped = errors.New("stopped by signal")

func runRun(ctx context.Context, stdout io.Writer, args []string) error {
	fset := newFlagSet("run", stdout)
	var sets setFlags
	fset.Var(&sets, "set", "override key=value (repeatable): epochs, limit, resources.KEY, source.KEY, sink.KEY, stages.N.KEY or STAGE.KEY")
	metricsAddr := fset.String("metrics", "", "serve Prometheus metrics (psiflow_*) at http://ADDR/metrics while running, e.g. localhost:9464")
	showProgress := fset.Bool("progress", isTerminal(stdout), "live progress line (default: when stdout is a terminal; else a plain line every -every)")
	every := fset.Duration("every", 2*time.Second, "interval of the plain progress lines when not on a terminal (0: none)")
	inCgroup := fset.Bool("cgroup", false, "run in a fresh child cgroup with the file's resources (memory, memory_high, cpus, pids), removed afterwards")
	files, err := parseInterleaved(fset, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return fmt.Errorf("%w: want one pipeline file (psiflow run [flags] FILE)", errUsage)
	}
	p, err := loadPipeline(files[0], sets)
	if err != nil {
		return err // every problem, with file:line:col; no graph was started
	}
	if *inCgroup && os.Getenv(envRunChild) == "" {
		return runPipelineInCgroup(ctx, stdout, p, args)
	}
	fmt.Fprintf(stdout, "psiflow run %s: %s\n", p.File, describePipeline(p))
	reg := prometheus.NewRegistry()
	var set *metrics.Set
	if *metricsAddr != "" {
		// The same metrics as psiflow demo's: the graph's, the runtime's, the
		// cgroup's, and every read and decoded image.
		if set, err = metrics.New(); err != nil {
			return err
		}
		reg = set.Registry
	}
	var rt *memory.Runtime
	hooks := pipelines.Hooks{
		Options:    []flow.Option{flow.WithRegistry(reg)},
		Registerer: reg,
		Process:    memory.LauncherProcess(),
		Info:       func(s string) { fmt.Fprintln(stdout, "  "+s) },
		Runtime:    func(r *memory.Runtime) { rt = r },
		Skipped:    func(node string, err error) { fmt.Fprintf(os.Stderr, "psiflow run: %s: %v\n", node, err) },
	}
	if set != nil {
		hooks.Reads, hooks.Decodes = set.Reads, set.Decodes
		ms, err := set.Serve(*metricsAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  metrics: %s (live view: psiflow top %s)\n", ms.URL(), ms.Addr())
		if set.NoCgroup != nil {
			fmt.Fprintf(stdout, "  no cgroup metrics: %v\n", set.NoCgroup)
		}
		defer ms.Close()
	}
	levelName := func() string {
		if rt == nil || rt.Recorder() == nil {
			return "off"
		}
		return rt.Level().String()
	}
	switch {
	case *showProgress:
		hooks.Interval = 250 * time.Millisecond
		hooks.Progress = func(s progress.Snapshot) {
			fmt.Fprintf(stdout, "\r%s\x1b[K", progressLine(s, levelName()))
		}
	case *every > 0:
		hooks.Interval = *every
		hooks.Progress = func(s progress.Snapshot) {
			fmt.Fprintf(stdout, "%6.1fs %s\n", s.Elapsed.Seconds(), progressLine(s, levelName()))
		}
	}
	sum, err := pipelines.Run(ctx, p, hooks)
	if *showProgress {
		fmt.Fprintln(stdout)
	}
	if rt != nil {
		printRuntimeReport(stdout, rt)
	}
	stopped := ctx.Err() != nil && errors.Is(err, context.Canceled)
	if stopped {
		fmt.Fprintln(stdout, "\nstopped; what ran until then:")
	}
	printDemoSummary(stdout, sum)
	var nw *sink.NotWrittenError
	if errors.Is(err, sink.ErrNothingKept) && !errors.As(err, &nw) {
		fmt.Fprint(stdout, notKept)
	}
	if stopped {
		// err still carries what the stop cost (a file sink's NotWrittenError),
		// which dispatch says after the signal.
		return errors.Join(errStopped, err)
	}
	return err
}

// progressLine is one live progress report.
func progressLine(s progress.Snapshot, level string) string {
	sec := max(s.Elapsed.Seconds(), 1e-9)
	return fmt.Sprintf("%8d samples  %9.0f samples/s  %9s/s  budget %9s / %-9s  bottleneck %s (%.0f%% busy)  pressure %s",
		s.Items, float64(s.Items)/sec, bytesize.Human(int64(float64(s.Bytes)/sec)), bytesize.Human(s.BudgetInUse), bytesize.Human(s.BudgetLimit),
		s.Bottleneck, s.BottleneckBusyPct, level)
}

// runPipelineInCgroup re-runs this command as a child in a fresh cgroup with the
// file's limits (sweeping first the groups of launchers that were killed, and guarded
// by a watchdog should this one be), forwards SIGINT, SIGTERM and SIGHUP to it (so it
// stops gracefully and prints its summary), kills the group if the child outlives
// runGrace, and removes the group afterwards.
func runPipelineInCgroup(ctx context.Context, stdout io.Writer, p *pipelines.Pipeline, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	g, cleanup, err := newLauncherGroup("run", "run-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		return err
	}
	defer cleanup()
	r := p.Resource
	if err := applyLimits(g, r.Memory, r.MemoryHigh, r.CPUs, 0, r.Pids); err != nil {
		return fmt.Errorf("cgroup %s: %w", g.Name(), err)
	}
	fmt.Fprintf(stdout, "psiflow run: in cgroup %s (%s): memory %s, memory high %s, cpus %s, pids %s\n", g.Name(), g.Layout(),
		limitString(r.Memory, true), limitString(r.MemoryHigh, true), cpusString(r.CPUs), limitString(r.Pids, false))
	cmd := exec.Command(self, append([]string{"run"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, os.Stderr
	cmd.Env = append(os.Environ(), envRunChild+"=1")
	gc := prepareGroupedCommand("run", g, cmd, runGrace)
	gc.quiet = true // the child says the signal it stopped on, once
	start := time.Now()
	if err := gc.start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	stopped := make(chan stopReport)
	go func() { stopped <- gc.supervise(ctx, exited, os.Stderr) }()
	waitErr := cmd.Wait()
	close(exited)
	rep := <-stopped
	printGroupSummary(stdout, g, time.Since(start))
	code, ended := commandStatus(waitErr)
	switch {
	case waitErr == nil:
		return nil
	case rep.killed || !ended:
		return rep.err(g, "the pipeline", waitErr)
	case rep.signal != nil && exitedWith(waitErr, code):
		// The child stopped on the forwarded signal and said so (and its summary),
		// exiting with 128 + the signal's number: end with its status, saying
		// nothing more.
		return &exitStatusError{code: code}
	}
	return &exitStatusError{code: code, err: fmt.Errorf("pipeline in cgroup %s: %w", g.Name(), waitErr)}
}

// runGrace is how long `run -cgroup` waits for its child to stop after a signal before
// it kills the group.
const runGrace = 15 * time.Second

func limitString(v int64, bytes bool) string {
	switch {
	case v < 0:
		return "none"
	case bytes:
		return bytesize.Human(v)
	}
	return strconv.FormatInt(v, 10)
}

func cpusString(c float64) string {
	if c <= 0 {
		return "none"
	}
	return strconv.FormatFloat(c, 'g', -1, 64)
}
