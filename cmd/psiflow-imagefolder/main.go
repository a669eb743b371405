package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/stage"
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
	c.ReadBuffers = 0 // package source's own buffers, as measured in docs/BENCHMARKS.md
	fs := flag.NewFlagSet("psiflow-imagefolder", flag.ContinueOnError)
	fs.StringVar(&c.Dir, "data", "", "image folder root with class subdirectories (required)")
	fs.IntVar(&c.BatchSize, "batch", 64, "batch size")
	fs.IntVar(&c.Workers, "workers", runtime.GOMAXPROCS(0), "decode goroutines")
	fs.IntVar(&c.Readers, "readers", 0, "file readers (0: package source's default)")
	budget := fs.String("budget", "32M", "graph byte budget (bytes in flight from read to decode), with K, M, G suffixes")
	fs.IntVar(&c.Queue, "queue", 4, "default edge queue size (elements); batch edges hold 1")
	fs.IntVar(&c.Resize, "resize", 256, "Resize: shorter side")
	fs.IntVar(&c.Crop, "crop", 224, "CenterCrop size")
	fs.Int64Var(&c.Limit, "limit", 0, "stop after this many samples (0: all)")
	fs.BoolVar(&c.Ordered, "ordered", false, "keep file order through decoding")
	fs.BoolVar(&c.DropCache, "drop-cache", true, "drop each file's page cache after reading it")
	backend := fs.String("backend", "auto", "JPEG decoder: auto (TurboJPEG if available) or std")
	fs.IntVar(&c.Epochs, "epochs", 1, "passes over the folder")
	onError := fs.String("on-error", "stop", "a bad image: stop (end with an error naming it) or skip (name it on stderr, count it, go on)")
	fs.Int64Var(&c.MaxSkips, "max-skips", 0, "with -on-error skip: stop after this many skipped images per epoch (0: no limit)")
	fs.Float64Var(&c.MaxSkipRate, "max-skip-rate", 0, "with -on-error skip: stop when more than this fraction of an epoch's images is skipped (0: no limit)")
	fs.Int64Var(&c.MaxPixels, "max-pixels", decode.DefaultMaxPixels, "refuse images larger than this many pixels, from their header (Pillow's limit; -1: none)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.OnError, err = stage.ParseOnError(*onError); err != nil {
		return c, fmt.Errorf("-on-error: %w", err)
	}
	if c.MaxSkips < 0 {
		return c, fmt.Errorf("-max-skips %d: must be 0 (no limit) or more", c.MaxSkips)
	}
	if math.IsNaN(c.MaxSkipRate) || c.MaxSkipRate < 0 || c.MaxSkipRate > 1 {
		return c, fmt.Errorf("-max-skip-rate %v: must be within [0, 1]", c.MaxSkipRate)
	}
	if c.MaxPixels == 0 || c.MaxPixels < -1 {
		return c, fmt.Errorf("-max-pixels %d: must be positive, or -1 for no limit", c.MaxPixels)
	}
	if (c.MaxSkips != 0 || c.MaxSkipRate != 0) && c.OnError != stage.Skip {
		return c, errors.New("-max-skips and -max-skip-rate need -on-error skip")
	}
	if c.Budget, err = parseSize(*budget); err != nil {
		return c, fmt.Errorf("-budget: %w", err)
	}
	switch *backend {
	case "auto":
		c.Backend = decode.BackendAuto
	case "std":
		c.Backend = decode.BackendStd
	default:
		return c, fmt.Errorf("-backend %q: want auto or std", *backend)
	}
	if c.Dir == "" {
		return c, errors.New("-data is required")
	}
	return c, c.Validate()
}

func run(ctx context.Context, c imagefolder.Config, em *protocol.Emitter) error {
	_, err := imagefolder.Run(ctx, c, imagefolder.Hooks{
		Consume: func(_ context.Context, b *decode.Batch) error { return em.Batch(len(b.Keys)) },
		Info: func(s string) {
			if strings.Contains(s, "standard library") {
				fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", s)
			}
		},
	})
	return err
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
