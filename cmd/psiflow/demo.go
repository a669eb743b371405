package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/demo"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/frontend"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/sink"
)

func init() {
	register(command{
		name:    "demo",
		summary: "run a synthetic pipeline (generate → decode → batch → consume) anywhere",
		run:     runDemo,
	})
}

func runDemo(ctx context.Context, stdout io.Writer, args []string) error {
	cfg := demo.DefaultConfig()
	fs := newFlagSet("demo", stdout)
	// The image pipeline's flags (the same as serve's and psiflow-imagefolder's);
	// without -data, -workers, -batch, -budget, -seed and -pressure size the
	// synthetic graph.
	ff := frontend.Register(fs)
	flagval.IntVar(fs, &cfg.Items, "items", cfg.Items, 1, 1<<40, "without -data: samples to generate")
	flagval.IntVar(fs, &cfg.ItemBytes, "size", cfg.ItemBytes, 16, 1<<30, "without -data: bytes per sample")
	progress := fs.Bool("progress", isTerminal(stdout), "show a live progress line (default: when stdout is a terminal)")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics (psiflow_*) at http://ADDR/metrics while running, e.g. localhost:9464")
	sinkSpec := fs.String("sink", "", "with -data: where batches go: null, arrow:PATH, arrow:unix:PATH, parquet:DIR or torch:SOCKET (python/psiflow connects); default: dropped")
	overwrite := fs.Bool("overwrite", false, "with -sink arrow:PATH or parquet:DIR: replace what is there once the run ends cleanly (without it a file or folder that holds data is refused)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	data := ff.IsSet("data")
	if !data {
		for _, name := range ff.SetFlags() {
			if !slices.Contains([]string{"workers", "batch", "budget", "seed", "pressure"}, name) {
				return fmt.Errorf("%w: -%s needs -data", errUsage, name)
			}
		}
		if *sinkSpec != "" {
			return fmt.Errorf("%w: -sink needs -data", errUsage)
		}
	}
	reg := prometheus.NewRegistry()
	var set *metrics.Set
	if *metricsAddr != "" {
		var err error
		if set, err = metrics.New(); err != nil {
			return err
		}
		reg = set.Registry
	}
	var show func(demo.Snapshot)
	if *progress {
		show = func(s demo.Snapshot) {
			sec := s.Elapsed.Seconds()
			fmt.Fprintf(stdout, "\r%8d samples  %9.0f samples/s  %9s/s  budget %9s / %-9s  bottleneck %s (%.0f%% busy)\x1b[K",
				s.Items, float64(s.Items)/sec, bytesize.Human(int64(float64(s.Bytes)/sec)), bytesize.Human(s.BudgetInUse), bytesize.Human(s.BudgetLimit),
				s.Bottleneck, s.BottleneckBusyPct)
		}
	}
	var sum demo.Summary
	var err error
	nothingKept := false // the file sink failed and removed the output
	if data {
		p, perr := ff.Pipeline()
		if perr != nil {
			return fmt.Errorf("%w: %v", errUsage, perr)
		}
		fmt.Fprintf(stdout, "psiflow demo: %s: %s\n", p.Source.Config.String("dir"), describePipeline(p))
		if sh := ff.Sharding(); sh.FromEnv {
			fmt.Fprintf(stdout, "  sharding: %s\n", sh)
		}
		closeMetrics, merr := serveDemoMetrics(stdout, set, *metricsAddr)
		if merr != nil {
			return merr
		}
		defer closeMetrics()
		var rt *memory.Runtime
		hooks := ff.Hooks()
		hooks.Options, hooks.Registerer = []flow.Option{flow.WithRegistry(reg)}, reg
		hooks.Info = func(s string) { fmt.Fprintln(stdout, "  "+s) }
		hooks.Progress, hooks.Interval = show, 250*time.Millisecond
		hooks.Runtime = func(r *memory.Runtime) { rt = r }
		hooks.Skipped = func(node string, err error) { fmt.Fprintf(os.Stderr, "psiflow demo: %s\n", skipLine(node, err)) }
		if set != nil {
			hooks.Reads, hooks.Decodes = set.Reads, set.Decodes
		}
		var out sink.Sink
		if *sinkSpec != "" {
			if out, err = sink.OpenWith(*sinkSpec, sink.OpenOptions{Overwrite: *overwrite}); err != nil {
				return fmt.Errorf("%w: -sink: %v", errUsage, err)
			}
			hooks.Batches = out.Consume
			fmt.Fprintf(stdout, "  batches go to %s\n", *sinkSpec)
		}
		sum, err = pipelines.Run(ctx, p, hooks)
		if rt != nil {
			defer printRuntimeReport(stdout, rt)
		}
		if out != nil {
			if errors.Is(err, sink.ErrConsumerClosed) {
				err = nil // the Python consumer stopped: a clean end
			}
			cerr := out.Close(err)
			var nw *sink.NotWrittenError
			switch {
			case err == nil:
				err = cerr
			case errors.As(cerr, &nw):
				// The stop or the failure cost the sink's output: say which.
				err = errors.Join(err, cerr)
			}
			nothingKept = errors.Is(cerr, sink.ErrNothingKept) && nw == nil
		}
		if err == nil {
			printEpochs(stdout, sum.Epochs, p.Resource.Cache != "off")
		}
	} else {
		cfg.Workers, cfg.BatchSize, cfg.Budget, cfg.Seed = int(ff.Int("workers")), int(ff.Int("batch")), ff.Int("budget"), uint64(ff.Int("seed"))
		if cfg.Workers == 0 {
			cfg.Workers = runtime.GOMAXPROCS(0)
		}
		if err := cfg.Validate(); err != nil && cfg.Budget != 0 {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		fmt.Fprintf(stdout, "psiflow demo: %d generated samples of %s → decode → batch %d → consume, %d decode workers\n",
			cfg.Items, bytesize.Human(int64(cfg.ItemBytes)), cfg.BatchSize, cfg.Workers)
		if cfg.Budget == 0 {
			bytes, source, err := memory.DefaultByteBudget(0)
			if err != nil {
				return err
			}
			cfg.Budget = bytes
			fmt.Fprintf(stdout, "  budget: %s in flight, a quarter of the memory limit (%s)\n", bytesize.Human(bytes), source)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		} else {
			fmt.Fprintf(stdout, "  budget: %s in flight\n", bytesize.Human(cfg.Budget))
		}
		closeMetrics, merr := serveDemoMetrics(stdout, set, *metricsAddr)
		if merr != nil {
			return merr
		}
		defer closeMetrics()
		cfg.Graph.Options = append(cfg.Graph.Options, flow.WithRegistry(reg))
		if ff.Value("pressure").(bool) {
			// The synthetic demo's memory runtime: its budget as given and the gate.
			rt, err := memory.New(memory.Config{Mode: memory.Fixed, Pressure: true, MaxBudget: cfg.Budget, Workers: cfg.Workers,
				ReadRegistered: -1, Registerer: reg})
			if err != nil {
				return err
			}
			defer rt.Close()
			cfg.Graph.Runtime = rt
			fmt.Fprintln(stdout, "  sources gated on this cgroup's memory pressure (-pressure=false to turn off)")
			defer func() {
				fmt.Fprintln(stdout, "\nMemory pressure while running:")
				_ = rt.Recorder().Snapshot(time.Now()).WriteReport(stdout)
			}()
		}
		sum, err = demo.Run(ctx, cfg, 250*time.Millisecond, show)
	}
	if *progress {
		fmt.Fprintln(stdout)
	}
	printDemoSummary(stdout, sum)
	if nothingKept {
		fmt.Fprint(stdout, notKept)
	}
	return err
}

// notKept follows the summary of a run whose file sink failed: the samples it
// counts were accepted by the sink, which then removed the run's output.
const notKept = "none of these samples were kept: the sink failed and removed this run's output\n\n"

// serveDemoMetrics starts set's endpoint at addr (set nil: none); close ends it.
func serveDemoMetrics(stdout io.Writer, set *metrics.Set, addr string) (close func(), err error) {
	if set == nil {
		return func() {}, nil
	}
	ms, err := set.Serve(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "  metrics: %s (live view: psiflow top %s)\n", ms.URL(), ms.Addr())
	if set.NoCgroup != nil {
		fmt.Fprintf(stdout, "  no cgroup metrics: %v\n", set.NoCgroup)
	}
	return func() { _ = ms.Close() }, nil
}

// printRuntimeReport prints the pressure levels and the shed actions of an image run.
func printRuntimeReport(w io.Writer, rt *memory.Runtime) {
	if rec := rt.Recorder(); rec != nil {
		fmt.Fprintln(w, "\nMemory pressure while running:")
		_ = rec.Snapshot(time.Now()).WriteReport(w)
	}
	runs := rt.ShedRuns()
	fmt.Fprintf(w, "\nMemory %s: budget %s at the end; shed actions run:", rt.Mode(), bytesize.Human(rt.Budget().Limit()))
	for _, a := range memory.Actions {
		fmt.Fprintf(w, " %s %.0f", a, runs[a])
	}
	fmt.Fprintln(w)
	if n, d := rt.PauseStats(); n > 0 {
		fmt.Fprintf(w, "Memory: %s\n", memory.PauseSummary(n, d))
	}
}

// printEpochs prints one line per epoch: its rate and, with a cache, its hit rate.
func printEpochs(w io.Writer, epochs []progress.Epoch, cached bool) {
	if len(epochs) < 2 && !cached {
		return
	}
	fmt.Fprintln(w)
	for i, e := range epochs {
		if cached {
			fmt.Fprintf(w, "epoch %d: %.0f samples/s, cache hits %.0f%%\n", i+1, e.Rate(), e.HitRate())
		} else {
			fmt.Fprintf(w, "epoch %d: %.0f samples/s\n", i+1, e.Rate())
		}
	}
}

func printDemoSummary(w io.Writer, s demo.Summary) {
	sec := s.Elapsed.Seconds()
	rates := "" // a run that never started took no time: no rate, not NaN or +Inf
	if sec > 0 {
		rates = fmt.Sprintf(": %.0f samples/s, %s/s", float64(s.Items)/sec, bytesize.Human(int64(float64(s.Bytes)/sec)))
	}
	fmt.Fprintf(w, "\n%d samples in %d batches in %.2fs%s; peak budget in use %s\n\n",
		s.Items, s.Batches, sec, rates, bytesize.Human(s.Peak))
	if s.Skipped > 0 {
		fmt.Fprintf(w, "%d bad samples skipped: %d at read, %d at decode (each named on standard error)\n\n", s.Skipped, s.ReadSkipped, s.DecodeSkipped)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STAGE\tKIND\tWORKERS\tIN\tOUT\tBYTES OUT\tBUSY s\tWAIT IN s\tWAIT OUT s\t")
	for _, st := range s.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%.2f\t%.2f\t%.2f\t\n",
			st.Name, st.Kind, st.Workers, st.ItemsIn, st.ItemsOut, bytesize.Human(st.BytesOut), st.Busy, st.WaitIn, st.WaitOut)
	}
	tw.Flush()
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
