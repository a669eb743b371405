package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/frontend"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/internal/stopsig"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/reexec"
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
		ctx, stop := stopsig.Context(context.Background())
		err = runWith(ctx, cfg, em, set)
		if sig := stopsig.StoppedBy(ctx, err); sig != nil {
			// Stopped by SIGINT or SIGTERM: say which, once, and end with 128 +
			// its number, as job schedulers expect.
			stop()
			_ = em.Done(sig)
			fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", sig)
			os.Exit(sig.ExitCode())
		}
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

// command is what the command line asks for: the pipeline (the shipped image
// pipeline with the flags as overrides) and the launcher's process actions.
type command struct {
	p       *pipelines.Pipeline
	process memory.ProcessActions
	option  func(node, param string) string
}

// parseArgs turns the command line into the pipeline to run.
func parseArgs(args []string) (command, error) {
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

// parseCommand turns the command line into the pipeline to run and the
// -metrics address ("" when not given): the flags are psiflow's one image
// vocabulary (internal/frontend), overrides of pipelines/imagefolder.yaml.
func parseCommand(args []string) (command, string, error) {
	fs := flag.NewFlagSet("psiflow-imagefolder", flag.ContinueOnError)
	ff := frontend.Register(fs)
	addr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics while running, e.g. localhost:9464")
	if err := fs.Parse(args); err != nil {
		return command{}, "", err
	}
	if fs.NArg() > 0 {
		return command{}, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !ff.IsSet("data") {
		return command{}, "", errors.New("-data is required")
	}
	p, err := ff.Pipeline()
	if err != nil {
		return command{}, "", err
	}
	return command{p: p, process: ff.Process(), option: ff.Option}, *addr, nil
}

func run(ctx context.Context, c command, em *protocol.Emitter) error {
	return runWith(ctx, c, em, nil)
}

// runWith runs the pipeline, with its metrics in set when set is not nil.
func runWith(ctx context.Context, c command, em *protocol.Emitter, set *metrics.Set) error {
	var rt *memory.Runtime
	hooks := pipelines.Hooks{
		Process: c.process, Option: c.option,
		// Keys and epoch ends let the harness check that every sample arrives once.
		Batches: func(_ context.Context, b *tensor.Batch) error { return em.BatchKeys(b.Keys) },
		OnEpoch: func(n int, e progress.Epoch) {
			_ = em.EndEpoch(n + 1)
			fmt.Fprintf(os.Stderr, "psiflow-imagefolder: epoch %d: %.0f samples/s, cache hits %.0f%%\n", n+1, e.Rate(), e.HitRate())
		},
		Info: func(s string) {
			if strings.Contains(s, "standard library") {
				fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", s)
			}
		},
		Skipped: func(node string, err error) {
			if msg := err.Error(); strings.HasPrefix(msg, "skipped") { // a reader's skip says so itself
				fmt.Fprintf(os.Stderr, "psiflow-imagefolder: %s: %s\n", node, msg)
			} else {
				fmt.Fprintf(os.Stderr, "psiflow-imagefolder: %s: skipped: %s\n", node, msg)
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
	_, err := pipelines.Run(ctx, c.p, hooks)
	if rt != nil {
		fmt.Fprintf(os.Stderr, "psiflow-imagefolder: memory %s, pressure gate %v; shed actions run: %s\n", rt.Mode(), c.p.Resource.Pressure, shedLine(rt))
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
