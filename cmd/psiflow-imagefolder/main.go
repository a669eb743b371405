package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/internal/metrics"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

func main() {
	reexec.Init() // first: this binary is also its own cgroup and pressure helpers
	em := protocol.NewEmitter(os.Stdout)
	cfg, addr, err := parseCommand(os.Args[1:])
	var set *metrics.Set
	if err == nil && addr != "" {
		set, err = serve(addr)
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = runWith(ctx, cfg, em, set)
		stop()
	}
	_ = em.Done(err)
	if err != nil {
		fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", err)
		if errors.Is(err, memory.ErrBelowFloor) {
			os.Exit(protocol.ExitBelowFloor)
		}
		os.Exit(1)
	}
}

// parseArgs turns the command line into the pipeline's configuration.
func parseArgs(args []string) (imagefolder.Config, error) {
	c, _, err := parseCommand(args)
	return c, err
}

// serve starts the metrics endpoint for -metrics ADDR; it lives until the process ends.
func serve(addr string) (*metrics.Set, error) {
	set, err := metrics.New()
	if err != nil {
		return nil, err
	}
	ms, err := set.Serve(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "psiflow-imagefolder: metrics at", ms.URL())
	return set, nil
}

// parseCommand turns the command line into the pipeline's configuration and the
// -metrics address ("" when not given).
func parseCommand(args []string) (imagefolder.Config, string, error) {
	c := imagefolder.DefaultConfig("")
	fs := flag.NewFlagSet("psiflow-imagefolder", flag.ContinueOnError)
	fs.StringVar(&c.Dir, "data", "", "image folder root with class subdirectories (required)")
	flagval.IntVar(fs, &c.BatchSize, "batch", 64, 1, 1<<20, "batch size")
	flagval.IntVar(fs, &c.Workers, "workers", runtime.GOMAXPROCS(0), 1, 4096, "decode goroutines")
	flagval.IntVar(fs, &c.Readers, "readers", 0, 0, 4096, "file readers (0: package source's default)")
	flagval.SizeVar(fs, &c.Budget, "budget", 32<<20, 1, 1<<50, "graph byte budget (bytes in flight from read to decode), with K, M, G suffixes: the largest with -memory elastic; with -memory fixed a quarter of the memory limit unless given")
	memoryMode := fs.String("memory", "elastic", "memory runtime: elastic (budget follows the cgroup's headroom, memory given back under pressure) or fixed (64 MiB registered read pool, a quarter of the limit as budget, nothing given back)")
	fs.BoolVar(&c.Pressure, "pressure", true, "gate the source and its reads on the cgroup's memory pressure")
	belowFloor := fs.String("below-floor", "pause", "with -memory elastic, when the cgroup leaves the loader less than its floor: pause (no reads until the memory is back; the consumer waits), stop (exit status 3 with a message naming the memory left) or run (on at the floor)")
	pauseFor := flagval.Duration(fs, "pause-timeout", pause.DefaultTimeout, 0, 24*time.Hour, "with -below-floor pause: a pause longer than this ends the run with exit status 3 and the memory left; 0: wait without end")
	lockText := fs.Bool("lock-text", true, "with -memory elastic: lock the program's code in memory as it is faulted in (mlock2 MLOCK_ONFAULT), so reclaim does not evict the monitor; the locked pages are charged to the cgroup that first reads them")
	oomVictim := fs.Bool("oom-victim", true, "with -memory elastic: make the loader the OOM killer's first choice in its cgroup (oom_score_adj 1000), so the trainer beside it is spared")
	flagval.IntVar(fs, &c.Queue, "queue", 4, 1, 1<<20, "default edge queue size (elements); batch edges hold 1")
	flagval.IntVar(fs, &c.Resize, "resize", 256, 1, 65536, "Resize: shorter side")
	flagval.IntVar(fs, &c.Crop, "crop", 224, 1, 65536, "CenterCrop size")
	flagval.Int64Var(fs, &c.Limit, "limit", 0, 0, 1<<62, "stop after this many samples (0: all)")
	fs.BoolVar(&c.Ordered, "ordered", false, "keep file order through decoding")
	fs.BoolVar(&c.Shuffle, "shuffle", false, "shuffle every epoch (a permutation of the folder per seed and epoch)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the shuffle")
	fs.BoolVar(&c.DropCache, "drop-cache", true, "drop each file's page cache after reading it")
	fs.BoolVar(&c.Direct, "direct", true, "read with O_DIRECT, past the page cache (file systems that refuse it, such as tmpfs, are read buffered)")
	backend := fs.String("backend", "auto", "JPEG decoder: auto (TurboJPEG if available) or std")
	flagval.IntVar(fs, &c.Epochs, "epochs", 1, 1, 1<<20, "passes over the folder")
	cache := fs.String("cache", "off", "keep samples between epochs in preemptible memory: decoded, encoded or off")
	flagval.SizeVar(fs, &c.CacheMax, "cache-max", 0, 0, 1<<50, "bound of the sample cache, with K, M, G suffixes (0: half of the cgroup memory limit)")
	addr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics while running, e.g. localhost:9464")
	onError := fs.String("on-error", "stop", "a bad image: stop (end with an error naming it) or skip (name it on stderr, count it, go on)")
	flagval.Int64Var(fs, &c.MaxSkips, "max-skips", 0, 0, 1<<62, "with -on-error skip: stop after this many skipped images per epoch (0: no limit)")
	flagval.FloatVar(fs, &c.MaxSkipRate, "max-skip-rate", 0, 0, 1, "with -on-error skip: stop when more than this fraction of an epoch's images is skipped (0: no limit)")
	flagval.Int64Var(fs, &c.MaxPixels, "max-pixels", decode.DefaultMaxPixels, -1, 1<<62, "refuse images larger than this many pixels, from their header (Pillow's limit; -1: none)")
	if err := fs.Parse(args); err != nil {
		return c, "", err
	}
	if fs.NArg() > 0 {
		return c, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// The launcher's process actions, each with its flag.
	c.Process = memory.ProcessActions{GoMemoryLimit: true, OOMVictim: *oomVictim, LockText: *lockText}
	var err error
	if c.BelowFloor, err = memory.ParseFloorPolicy(*belowFloor); err != nil {
		return c, "", fmt.Errorf("-below-floor: %w", err)
	}
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "pause-timeout" })
	switch {
	case c.BelowFloor == memory.PauseBelowFloor && *pauseFor == 0:
		c.PauseTimeout = pause.Forever
	case c.BelowFloor == memory.PauseBelowFloor:
		c.PauseTimeout = *pauseFor
	case timeoutSet:
		return c, "", fmt.Errorf("-pause-timeout needs -below-floor pause, not %s", c.BelowFloor)
	}
	if c.Memory, err = memory.ParseMode(*memoryMode); err != nil {
		return c, "", fmt.Errorf("-memory: %w", err)
	}
	budgetSet := false
	fs.Visit(func(f *flag.Flag) { budgetSet = budgetSet || f.Name == "budget" })
	if c.Memory == memory.Fixed && !budgetSet {
		if c.Budget, _, err = memory.DefaultByteBudget(0); err != nil {
			return c, "", fmt.Errorf("-memory fixed: %w", err)
		}
	}
	if c.OnError, err = stage.ParseOnError(*onError); err != nil {
		return c, "", fmt.Errorf("-on-error: %w", err)
	}
	if c.MaxPixels == 0 {
		return c, "", fmt.Errorf("-max-pixels 0: must be positive, or -1 for no limit")
	}
	if (c.MaxSkips != 0 || c.MaxSkipRate != 0) && c.OnError != stage.Skip {
		return c, "", errors.New("-max-skips and -max-skip-rate need -on-error skip")
	}
	switch *backend {
	case "auto":
		c.Backend = decode.BackendAuto
	case "std":
		c.Backend = decode.BackendStd
	default:
		return c, "", fmt.Errorf("-backend %q: want auto or std", *backend)
	}
	if c.Cache, err = imagefolder.ParseCacheMode(*cache); err != nil {
		return c, "", fmt.Errorf("-cache: %w", err)
	}
	if c.Dir == "" {
		return c, "", errors.New("-data is required")
	}
	sh, err := source.EnvSharding()
	if err != nil {
		return c, "", err
	}
	if sh.FromEnv { // stdout carries the protocol: say it on stderr, first
		fmt.Fprintln(os.Stderr, "psiflow-imagefolder: sharding:", sh)
	}
	c.Rank, c.WorldSize = sh.Rank, sh.WorldSize
	return c, *addr, c.Validate()
}

func run(ctx context.Context, c imagefolder.Config, em *protocol.Emitter) error {
	return runWith(ctx, c, em, nil)
}

// runWith runs the pipeline, with its metrics in set when set is not nil.
func runWith(ctx context.Context, c imagefolder.Config, em *protocol.Emitter, set *metrics.Set) error {
	var rt *memory.Runtime
	hooks := imagefolder.Hooks{
		// Keys and epoch ends let the harness check that every sample arrives once.
		Consume: func(_ context.Context, b *tensor.Batch) error { return em.BatchKeys(b.Keys) },
		OnEpoch: func(n int, e progress.Epoch) {
			_ = em.EndEpoch(n + 1)
			fmt.Fprintf(os.Stderr, "psiflow-imagefolder: epoch %d: %.0f samples/s, cache hits %.0f%%\n", n+1, e.Rate(), e.HitRate())
		},
		Info: func(s string) {
			if strings.Contains(s, "standard library") {
				fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", s)
			}
		},
		Runtime: func(r *memory.Runtime) { rt = r },
		// Each pause and resume: a line on stderr and an event for the harness.
		OnPause: func(ev pause.Event) {
			fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", ev.Message())
			switch ev.Kind {
			case pause.Paused:
				_ = em.Emit(protocol.Event{Event: protocol.Pause})
			case pause.Resumed:
				_ = em.Emit(protocol.Event{Event: protocol.Resume})
			}
		},
	}
	if set != nil {
		hooks.Options = append(hooks.Options, flow.WithRegistry(set.Registry))
		hooks.Registerer, hooks.Reads, hooks.Decodes = set.Registry, set.Reads, set.Decodes
	}
	_, err := imagefolder.Run(ctx, c, hooks)
	if rt != nil {
		fmt.Fprintf(os.Stderr, "psiflow-imagefolder: memory %s, pressure gate %v; shed actions run: %s\n", c.Memory, c.Pressure, shedLine(rt))
		if n, d := rt.PauseStats(); n > 0 {
			fmt.Fprintf(os.Stderr, "psiflow-imagefolder: %s\n", memory.PauseSummary(n, d))
		}
	}
	return err
}

// shedLine lists how often each shed action ran, e.g. "budget=2 go_heap=0 ...".
func shedLine(rt *memory.Runtime) string {
	runs := rt.ShedRuns()
	parts := make([]string, 0, len(memory.Actions))
	for _, a := range memory.Actions {
		parts = append(parts, fmt.Sprintf("%s=%.0f", a, runs[a]))
	}
	return strings.Join(parts, " ")
}
