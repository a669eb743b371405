//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/tensor"
)

func main() {
	reexec.Init() // first: this binary is also its own cgroup and pressure helpers
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: decode-vs-dataloader loader|compare|wrap [flags]")
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
		fmt.Fprintln(os.Stderr, "decode-vs-dataloader:", err)
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

// load runs the shipped image-folder pipeline (the preset pipelines/imagefolder,
// run by pipelines.Run under its default elastic memory runtime):
// read → decode → Resize → CenterCrop → batch → collate, one epoch.
func load(ctx context.Context, em *protocol.Emitter, data string, workers, batch, size, crop int, budget int64, memFrac float64) error {
	if lim, _, err := cgroup.SelfMemoryLimit(); err == nil && lim > 0 && lim < 1<<50 && memFrac > 0 {
		// The Go heap is what grows under a limit here: keep the collector
		// ahead of the cgroup (the rest is read buffers and page cache).
		debug.SetMemoryLimit(int64(float64(lim) * memFrac))
	}
	p, err := imagefolder.New(data, fmt.Sprintf("decode.workers=%d", workers), fmt.Sprintf("batch.size=%d", batch),
		fmt.Sprintf("decode.resize=%d", size), fmt.Sprintf("decode.center_crop=%d", crop), fmt.Sprintf("resources.budget=%d", budget),
		"read.readers=1", "resources.queue=8")
	if err != nil {
		return err
	}
	_, err = pipelines.Run(ctx, p, pipelines.Hooks{
		Info: func(line string) { fmt.Fprintln(os.Stderr, "decode-vs-dataloader:", line) },
		Batches: func(_ context.Context, b *tensor.Batch) error {
			return em.Batch(len(b.Keys)) // the graph releases b after the sink
		},
	})
	return err
}
