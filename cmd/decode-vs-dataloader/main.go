//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"syscall"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: decode_vs_dataloader loader|compare|wrap [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "loader":
		err = runLoader(ctx, os.Args[2:])
	case "compare":
		err = runCompare(ctx, os.Args[2:])
	case "wrap":
		err = runWrap(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want loader or compare)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "decode_vs_dataloader:", err)
		os.Exit(1)
	}
}

// runLoader is the psiflow side: it speaks the harness protocol on stdout.
func runLoader(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loader", flag.ContinueOnError)
	data := fs.String("data", "", "image folder root with class subdirectories")
	workers := fs.Int("workers", 2, "decode workers")
	batch := fs.Int("batch", 64, "batch size")
	size := fs.Int("size", 256, "Resize: shorter side")
	crop := fs.Int("crop", 224, "CenterCrop size")
	budget := fs.Int64("budget", 8<<20, "graph byte budget for encoded bytes in flight")
	memFrac := fs.Float64("memlimit-frac", 0.5, "Go memory limit as a fraction of the cgroup's limit (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	em := protocol.NewEmitter(os.Stdout)
	err := load(ctx, em, *data, *workers, *batch, *size, *crop, *budget, *memFrac)
	if derr := em.Done(err); derr != nil && err == nil {
		err = derr
	}
	return err
}

func load(ctx context.Context, em *protocol.Emitter, data string, workers, batch, size, crop int, budget int64, memFrac float64) error {
	if lim, _, err := cgroup.SelfMemoryLimit(); err == nil && lim > 0 && lim < 1<<50 && memFrac > 0 {
		// The Go heap is what grows under a limit here: keep the collector
		// ahead of the cgroup (the rest is read buffers and page cache).
		debug.SetMemoryLimit(int64(float64(lim) * memFrac))
	}
	ds, err := source.Dir(data, ".jpg", ".jpeg", ".JPEG", ".png")
	if err != nil {
		return err
	}
	// ImageFolder's labels: class directories in sorted order.
	classes := map[string]int64{}
	var names []string
	for _, p := range ds.Paths() {
		c := filepath.Base(filepath.Dir(p))
		if _, ok := classes[c]; !ok {
			classes[c] = 0
			names = append(names, c)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		classes[n] = int64(i)
	}
	dec, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		return err
	}
	defer dec.Close()
	if r := dec.FallbackReason(); r != nil {
		fmt.Fprintln(os.Stderr, "decode: using the standard library:", r)
	}
	g := flow.New("psiflow-decode", flow.WithBudget(budget), flow.WithQueueSize(8))
	files := flowsrc.Files(g, "read", ds, source.Options{
		Workers: 1,
		Reader:  source.ReaderOptions{QueueDepth: 8, DropCache: true},
	})
	st, err := decode.NewStage("decode", dec, decode.StageConfig{
		Workers:   workers,
		Transform: decode.Transform{Resize: size, CenterCrop: crop, Layout: decode.CHW},
	}, func(s *source.Sample) decode.Encoded {
		var b []byte
		if len(s.Fields) > 0 {
			b = s.Fields[0].Data
		}
		return decode.Encoded{Key: s.Key, Data: b, Label: classes[filepath.Base(filepath.Dir(s.Key))]}
	})
	if err != nil {
		return err
	}
	samples := flow.Via(files, st)
	batches := flow.Via(samples, stage.Batch[*decode.Sample]("batch", batch, 0), flow.QueueSize(1))
	collated := flow.Via(batches, decode.Collate("collate"), flow.QueueSize(2))
	flow.Sink(collated, "consume", func(ctx context.Context, b *decode.Batch) error {
		return em.Batch(len(b.Keys)) // the graph releases b when this returns
	})
	return g.Run(ctx)
}
