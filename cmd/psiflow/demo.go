package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/demo"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/metrics"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
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
	flagval.IntVar(fs, &cfg.Items, "items", cfg.Items, 1, 1<<40, "samples to generate")
	flagval.IntVar(fs, &cfg.ItemBytes, "size", cfg.ItemBytes, 16, 1<<30, "bytes per sample")
	flagval.IntVar(fs, &cfg.Workers, "workers", cfg.Workers, 1, 4096, "decode workers")
	flagval.IntVar(fs, &cfg.BatchSize, "batch", cfg.BatchSize, 1, 1<<20, "samples per batch")
	flagval.SizeVar(fs, &cfg.Budget, "budget", 0, 0, 1<<50, "byte budget of the graph (bytes in flight, e.g. 256M); 0: a quarter of this process's cgroup memory limit (MemTotal when unlimited)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the generated data")
	progress := fs.Bool("progress", isTerminal(stdout), "show a live progress line (default: when stdout is a terminal)")
	data := fs.String("data", "", "read this image folder (JPEG/PNG, e.g. from 'psiflow gen jpeg') through the real reader and decoder instead of generating samples")
	epochs := flagval.Int(fs, "epochs", 1, 1, 1<<20, "with -data: passes over the folder")
	cacheMode := fs.String("cache", "off", "with -data: keep samples between epochs in preemptible memory: decoded (skips read, decode and resize), encoded (skips the read) or off")
	cacheMax := flagval.Size(fs, "cache-max", 0, 0, 1<<50, "with -data: bound of the sample cache, with K, M, G suffixes (0: half of the cgroup memory limit)")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics (psiflow_*) at http://ADDR/metrics while running, e.g. localhost:9464")
	onError := fs.String("on-error", "stop", "with -data, a bad image: stop (end with an error naming it) or skip (name it, count it, go on)")
	maxSkips := fs.Int64("max-skips", 0, "with -on-error skip: stop after this many skipped images per epoch (0: no limit)")
	maxPixels := fs.Int64("max-pixels", decode.DefaultMaxPixels, "with -data: refuse images larger than this many pixels, from their header (-1: none)")
	sinkSpec := fs.String("sink", "", "with -data: where batches go: null, arrow:PATH, arrow:unix:PATH, parquet:DIR or torch:SOCKET (python/psiflow connects); default: dropped")
	overwrite := fs.Bool("overwrite", false, "with -sink arrow:PATH or parquet:DIR: replace what is there once the run ends cleanly (without it a file or folder that holds data is refused)")
	gated := fs.Bool("pressure", true, "gate the sources on this cgroup's memory pressure (PSI triggers, vmpressure or polling, whichever the host allows)")
	memoryMode := fs.String("memory", "elastic", "with -data: elastic (the budget follows the cgroup's headroom, memory is given back under pressure) or fixed (a 64 MiB registered read pool and nothing given back)")
	floor := addFloorFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	mode, err := memory.ParseMode(*memoryMode)
	if err != nil {
		return fmt.Errorf("%w: -memory: %v", errUsage, err)
	}
	belowFloor, pauseTimeout, err := floor.apply(fs)
	if err != nil {
		return err
	}
	cache, err := imagefolder.ParseCacheMode(*cacheMode)
	if err != nil {
		return fmt.Errorf("%w: -cache: %v", errUsage, err)
	}
	if *data == "" && cache != imagefolder.CacheOff {
		return fmt.Errorf("%w: -cache needs -data", errUsage)
	}
	policy, err := stage.ParseOnError(*onError)
	switch {
	case err != nil:
		return fmt.Errorf("%w: -on-error: %v", errUsage, err)
	case *maxSkips < 0:
		return fmt.Errorf("%w: -max-skips %d: must be 0 (no limit) or more", errUsage, *maxSkips)
	case *maxSkips > 0 && policy != stage.Skip:
		return fmt.Errorf("%w: -max-skips needs -on-error skip", errUsage)
	case *maxPixels == 0 || *maxPixels < -1:
		return fmt.Errorf("%w: -max-pixels %d: must be positive, or -1 for no limit", errUsage, *maxPixels)
	}
	if *sinkSpec != "" && *data == "" {
		return fmt.Errorf("%w: -sink needs -data", errUsage)
	}
	if err := cfg.Validate(); err != nil && cfg.Budget != 0 {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var sh source.Sharding // RANK and WORLD_SIZE: read here, by the front-end, not by the library
	if *data != "" {
		var err error
		if sh, err = source.EnvSharding(); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		fmt.Fprintf(stdout, "psiflow demo: %s → read → decode → Resize(256) → CenterCrop(224) → batch %d, %d decode workers\n", *data, cfg.BatchSize, cfg.Workers)
		if sh.FromEnv {
			fmt.Fprintf(stdout, "  sharding: %s\n", sh)
		}
	} else {
		fmt.Fprintf(stdout, "psiflow demo: %d generated samples of %s → decode → batch %d → consume, %d decode workers\n",
			cfg.Items, bytesize.Human(int64(cfg.ItemBytes)), cfg.BatchSize, cfg.Workers)
	}
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
	reg := prometheus.NewRegistry()
	var set *metrics.Set
	if *metricsAddr != "" {
		var err error
		if set, err = metrics.New(); err != nil {
			return err
		}
		reg = set.Registry
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
	cfg.Graph.Options = append(cfg.Graph.Options, flow.WithRegistry(reg))
	if *gated && *data == "" {
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

	if *data != "" {
		fc := imagefolder.DefaultConfig(*data)
		fc.Workers, fc.BatchSize, fc.Epochs, fc.Budget = cfg.Workers, cfg.BatchSize, *epochs, cfg.Budget
		fc.Cache, fc.CacheMax = cache, *cacheMax
		fc.Memory, fc.Pressure, fc.Process = mode, *gated, memory.LauncherProcess()
		fc.BelowFloor, fc.PauseTimeout = belowFloor, pauseTimeout
		fc.OnError, fc.MaxSkips, fc.MaxPixels = policy, *maxSkips, *maxPixels
		fc.Rank, fc.WorldSize = sh.Rank, sh.WorldSize
		var rt *memory.Runtime
		hooks := imagefolder.Hooks{
			Options: cfg.Graph.Options, Registerer: reg,
			Info:     func(s string) { fmt.Fprintln(stdout, "  "+s) },
			Progress: show, Interval: 250 * time.Millisecond,
			Runtime: func(r *memory.Runtime) { rt = r },
		}
		if set != nil {
			hooks.Reads, hooks.Decodes = set.Reads, set.Decodes
		}
		var out sink.Sink
		if *sinkSpec != "" {
			if out, err = sink.OpenWith(*sinkSpec, sink.OpenOptions{Overwrite: *overwrite}); err != nil {
				return fmt.Errorf("%w: -sink: %v", errUsage, err)
			}
			hooks.Consume = out.Consume
			fmt.Fprintf(stdout, "  batches go to %s\n", *sinkSpec)
		}
		sum, err = imagefolder.Run(ctx, fc, hooks)
		if rt != nil {
			defer printRuntimeReport(stdout, rt)
		}
		if out != nil {
			if errors.Is(err, sink.ErrConsumerClosed) {
				err = nil // the Python consumer stopped: a clean end
			}
			if cerr := out.Close(err); err == nil {
				err = cerr
			}
		}
		if err == nil {
			printEpochs(stdout, sum.Epochs, cache != imagefolder.CacheOff)
		}
	} else {
		sum, err = demo.Run(ctx, cfg, 250*time.Millisecond, show)
	}
	if *progress {
		fmt.Fprintln(stdout)
	}
	printDemoSummary(stdout, sum)
	return err
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
	fmt.Fprintf(w, "\n%d samples in %d batches in %.2fs: %.0f samples/s, %s/s; peak budget in use %s\n\n",
		s.Items, s.Batches, sec, float64(s.Items)/sec, bytesize.Human(int64(float64(s.Bytes)/sec)), bytesize.Human(s.Peak))
	if s.Skipped > 0 {
		fmt.Fprintf(w, "%d bad samples skipped (each named on standard error)\n\n", s.Skipped)
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
