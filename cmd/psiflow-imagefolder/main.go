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

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/pipelines/elastic"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/pressure"
	"github.com/psiflow/psiflow/stage/decode"
)

func main() {
	em := protocol.NewEmitter(os.Stdout)
	cfg, err := parseArgs(os.Args[1:])
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, cfg, em)
		stop()
	}
	_ = em.Done(err)
	if err != nil {
		fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", err)
		os.Exit(1)
	}
}

// parseArgs turns the command line into the pipeline's configuration.
func parseArgs(args []string) (imagefolder.Config, error) {
	c := imagefolder.DefaultConfig("")
	fs := flag.NewFlagSet("psiflow-imagefolder", flag.ContinueOnError)
	fs.StringVar(&c.Dir, "data", "", "image folder root with class subdirectories (required)")
	fs.IntVar(&c.BatchSize, "batch", 64, "batch size")
	fs.IntVar(&c.Workers, "workers", runtime.GOMAXPROCS(0), "decode goroutines")
	fs.IntVar(&c.Readers, "readers", 0, "file readers (0: package source's default)")
	budget := fs.String("budget", "32M", "graph byte budget (bytes in flight from read to decode), with K, M, G suffixes: the largest with -memory elastic; with -memory fixed a quarter of the memory limit unless given")
	memory := fs.String("memory", "elastic", "memory runtime: elastic (budget follows the cgroup's headroom, memory given back under pressure) or fixed (64 MiB registered read pool, a quarter of the limit as budget, nothing given back)")
	fs.BoolVar(&c.Pressure, "pressure", true, "gate the source and its reads on the cgroup's memory pressure")
	oomVictim := fs.Bool("oom-victim", true, "with -memory elastic: make the loader the OOM killer's first choice in its cgroup (oom_score_adj 1000), so the trainer beside it is spared")
	fs.IntVar(&c.Queue, "queue", 4, "default edge queue size (elements); batch edges hold 1")
	fs.IntVar(&c.Resize, "resize", 256, "Resize: shorter side")
	fs.IntVar(&c.Crop, "crop", 224, "CenterCrop size")
	fs.Int64Var(&c.Limit, "limit", 0, "stop after this many samples (0: all)")
	fs.BoolVar(&c.Ordered, "ordered", false, "keep file order through decoding")
	fs.BoolVar(&c.DropCache, "drop-cache", true, "drop each file's page cache after reading it")
	backend := fs.String("backend", "auto", "JPEG decoder: auto (TurboJPEG if available) or std")
	fs.IntVar(&c.Epochs, "epochs", 1, "passes over the folder")
	cache := fs.String("cache", "off", "keep samples between epochs in preemptible memory: decoded, encoded or off")
	fs.Int64Var(&c.CacheMax, "cache-max", 0, "bound of the sample cache in bytes (0: half of the cgroup memory limit)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.KeepOOMScore = !*oomVictim
	var err error
	if c.Budget, err = parseSize(*budget); err != nil {
		return c, fmt.Errorf("-budget: %w", err)
	}
	if c.Memory, err = elastic.ParseMode(*memory); err != nil {
		return c, fmt.Errorf("-memory: %w", err)
	}
	budgetSet := false
	fs.Visit(func(f *flag.Flag) { budgetSet = budgetSet || f.Name == "budget" })
	if c.Memory == elastic.Fixed && !budgetSet {
		if c.Budget, _, err = pressure.DefaultByteBudget(0); err != nil {
			return c, fmt.Errorf("-memory fixed: %w", err)
		}
	}
	switch *backend {
	case "auto":
		c.Backend = decode.BackendAuto
	case "std":
		c.Backend = decode.BackendStd
	default:
		return c, fmt.Errorf("-backend %q: want auto or std", *backend)
	}
	if c.Cache, err = imagefolder.ParseCacheMode(*cache); err != nil {
		return c, fmt.Errorf("-cache: %w", err)
	}
	if c.Dir == "" {
		return c, errors.New("-data is required")
	}
	return c, c.Validate()
}

func run(ctx context.Context, c imagefolder.Config, em *protocol.Emitter) error {
	var rt *elastic.Runtime
	_, err := imagefolder.Run(ctx, c, imagefolder.Hooks{
		Consume: func(_ context.Context, b *decode.Batch) error { return em.Batch(len(b.Keys)) },
		OnEpoch: func(n int, e progress.Epoch) {
			fmt.Fprintf(os.Stderr, "psiflow-imagefolder: epoch %d: %.0f samples/s, cache hits %.0f%%\n", n+1, e.Rate(), e.HitRate())
		},
		Info: func(s string) {
			if strings.Contains(s, "standard library") || strings.Contains(s, "floor of") {
				fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", s)
			}
		},
		Runtime: func(r *elastic.Runtime) { rt = r },
	})
	if rt != nil {
		fmt.Fprintf(os.Stderr, "psiflow-imagefolder: memory %s, pressure gate %v; shed actions run: %s\n", c.Memory, c.Pressure, shedLine(rt))
	}
	return err
}

// shedLine lists how often each shed action ran, e.g. "budget=2 go_heap=0 ...".
func shedLine(rt *elastic.Runtime) string {
	runs := rt.ShedRuns()
	parts := make([]string, 0, len(elastic.Actions))
	for _, a := range elastic.Actions {
		parts = append(parts, fmt.Sprintf("%s=%.0f", a, runs[a]))
	}
	return strings.Join(parts, " ")
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional K, M or G suffix", s)
	}
	return v * mult, nil
}
