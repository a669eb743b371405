package pipelines

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/progress"
)

// Hooks let the caller add to a run: graph options (metrics), where the memory
// runtime's metrics go and what it may do to the process, informational lines
// and live progress. The zero value runs with the file's memory runtime and
// reports nothing.
type Hooks struct {
	// Options are added to every graph (flow.WithRegistry, for example); the
	// budget and the gate come from the memory runtime.
	Options []flow.Option
	// Registerer receives the memory runtime's metrics (psiflow_shed_action_*,
	// psiflow_elastic_*, psiflow_uma_*, psiflow_pressure_*).
	Registerer prometheus.Registerer
	// Process are the runtime's actions on the whole process: off for a library,
	// memory.LauncherProcess() in the launcher.
	Process memory.ProcessActions
	// Runtime, when set, is called with the memory runtime once it is made (to
	// report its pressure levels and shed actions, or to register more of them).
	Runtime func(*memory.Runtime)
	// Info receives one line for each choice made at start (budget, reader, decoder).
	Info func(string)
	// Skipped receives every input a node skipped as bad (a tar shard's rest, a
	// member), named by err; without it the skips are only counted
	// (Summary.Skipped, psiflow_stage_skipped_total).
	Skipped func(node string, err error)
	// Progress, when not nil, is called about every Interval from a goroutine
	// that ends before Run returns.
	Progress func(progress.Snapshot)
	Interval time.Duration
}

// ErrLimit ends a graph once the file's limit of samples was delivered; [Run]
// does not return it.
var ErrLimit = errors.New("sample limit reached")

// Build is what a kind's constructor gets: the graph being built, the node's
// name, the epoch, the memory runtime the graph runs under, and services kept
// across the epochs of one run.
type Build struct {
	Graph    *flow.Graph
	Name     string
	Epoch    int
	Pipeline *Pipeline
	// Runtime is the run's memory runtime (the graph's, through
	// flow.WithRuntime): kinds take its decode-worker limit from it.
	Runtime *memory.Runtime
	run     *runState
}

type runState struct {
	hooks    Hooks
	mu       sync.Mutex
	sum      progress.Summary
	limit    int64
	kept     map[string]any
	closers  []func() error
	infoSeen map[string]bool
}

// Info reports a line through Hooks.Info once per run (the same line in later
// epochs is dropped).
func (b *Build) Info(format string, args ...any) {
	s := b.Name + ": " + fmt.Sprintf(format, args...)
	b.run.mu.Lock()
	seen := b.run.infoSeen[s]
	b.run.infoSeen[s] = true
	b.run.mu.Unlock()
	if !seen && b.run.hooks.Info != nil {
		b.run.hooks.Info(s)
	}
}

// Skipped reports an input this node skipped as bad through Hooks.Skipped.
func (b *Build) Skipped(err error) {
	if b.run.hooks.Skipped != nil {
		b.run.hooks.Skipped(b.Name, err)
	}
}

// Keep returns the value open made for this node in an earlier epoch, or calls
// open now; close (when not nil) runs when Run ends.
func (b *Build) Keep(open func() (v any, close func() error, err error)) (any, error) {
	return b.Shared("node "+b.Name, open)
}

// Shared returns the run-wide value called key, made by open the first time any
// node of any epoch asks for it: a service several kinds share (the class index
// of a folder that the files source and the decode stage both read, for
// example). close (when not nil) runs when Run ends, after the graphs.
func (b *Build) Shared(key string, open func() (v any, close func() error, err error)) (any, error) {
	b.run.mu.Lock()
	v, ok := b.run.kept[key]
	b.run.mu.Unlock()
	if ok {
		return v, nil
	}
	v, closeFn, err := open()
	if err != nil {
		return nil, err
	}
	b.run.mu.Lock()
	b.run.kept[key] = v
	if closeFn != nil {
		b.run.closers = append(b.run.closers, closeFn)
	}
	b.run.mu.Unlock()
	return v, nil
}

// Deliver counts items samples and bytes payload bytes as delivered (sinks call
// it for every element) and returns [ErrLimit] once the file's limit is reached.
func (b *Build) Deliver(items, bytes int64) error {
	r := b.run
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Items += items
	r.sum.Bytes += bytes
	r.sum.Batches++
	if r.limit > 0 && r.sum.Items >= r.limit {
		return ErrLimit
	}
	return nil
}

// Run builds and runs the pipeline once per epoch under its memory runtime
// (resources: memory_mode, budget, pressure, below_floor) and returns what it
// delivered. Every graph takes the runtime once (flow.WithRuntime): its budget,
// gate, read buffers and epoch boundary come with it.
func Run(ctx context.Context, p *Pipeline, hooks Hooks) (_ progress.Summary, err error) {
	if p == nil || p.Source == nil || p.Sink == nil {
		return progress.Summary{}, errors.New("pipelines: Run needs a pipeline from Load or Parse")
	}
	rt, err := newRuntime(p, hooks)
	if err != nil {
		return progress.Summary{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	defer func() {
		// Close fails if any lease is still out: a leak surfaces here.
		err = errors.Join(err, rt.Close())
	}()
	if hooks.Runtime != nil {
		hooks.Runtime(rt)
	}
	r := &runState{hooks: hooks, limit: p.Limit, kept: map[string]any{}, infoSeen: map[string]bool{}}
	defer func() {
		for i := len(r.closers) - 1; i >= 0; i-- {
			err = errors.Join(err, r.closers[i]())
		}
	}()
	start := time.Now()
	var current *flow.Graph
	stop := func() {}
	defer func() { stop() }()
	result := func() progress.Summary {
		r.mu.Lock()
		defer r.mu.Unlock()
		s := r.sum
		s.Elapsed = time.Since(start)
		return s
	}
	for epoch := range p.Epochs {
		g := flow.New(p.Name, append([]flow.Option{flow.WithRuntime(rt), flow.WithQueueSize(p.Resource.Queue)}, hooks.Options...)...)
		if err := build(g, p, epoch, rt, r); err != nil {
			return result(), fmt.Errorf("pipeline %s: %w", p.Name, err)
		}
		r.mu.Lock()
		current = g
		r.mu.Unlock()
		if epoch == 0 {
			// Progress starts once the first graph is built (decoders loaded,
			// files listed), so rates measure the run, not the set-up.
			start = time.Now()
			stop = progress.Report(hooks.Interval, hooks.Progress, func() progress.Snapshot {
				r.mu.Lock()
				snap := progress.Snapshot{Items: r.sum.Items, Bytes: r.sum.Bytes, Elapsed: time.Since(start)}
				g := current
				r.mu.Unlock()
				snap.Observe(g)
				return snap
			})
		}
		err = g.Run(ctx)
		r.mu.Lock()
		r.sum.Stages = g.Stats()
		r.sum.Peak = max(r.sum.Peak, g.Budget().MaxInUse())
		for _, st := range r.sum.Stages {
			r.sum.Skipped += st.Skipped
		}
		r.mu.Unlock()
		if errors.Is(err, ErrLimit) {
			return result(), nil
		}
		if err != nil {
			return result(), err
		}
	}
	return result(), nil
}

// build wires the nodes of p into g for one epoch.
func build(g *flow.Graph, p *Pipeline, epoch int, rt *memory.Runtime, r *runState) error {
	nodes := p.Nodes()
	readers := map[string]int{}
	for _, c := range nodes[1:] {
		for _, in := range c.Inputs {
			readers[in]++
		}
	}
	outs := map[string][]Stream{}
	for _, c := range nodes {
		b := &Build{Graph: g, Name: c.Name, Epoch: epoch, Pipeline: p, Runtime: rt, run: r}
		var in Stream
		if len(c.Inputs) > 0 {
			ins := make([]Stream, len(c.Inputs))
			for i, name := range c.Inputs {
				q := outs[name]
				if len(q) == 0 {
					return fmt.Errorf("%s %q: input %q has no stream left (a bug in validation)", c.Kind.Role, c.Name, name)
				}
				ins[i], outs[name] = q[0], q[1:]
			}
			in = ins[0]
			if len(ins) > 1 {
				raw := make([]any, len(ins))
				for i, s := range ins {
					raw[i] = s.s
				}
				in = Stream{Type: ins[0].Type, s: ins[0].Type.merge(c.Name+".merge", raw)}
			}
		}
		out, err := c.Kind.Build(b, c.Config, in)
		if err != nil {
			return fmt.Errorf("%s %q (kind %s, %s): %w", c.Kind.Role, c.Name, c.Kind.Name, c.Pos, err)
		}
		if c.Kind.Role == SinkRole {
			continue
		}
		if out.Type == nil || out.Type.Name != c.Kind.Out {
			return fmt.Errorf("%s %q (kind %s): the constructor returned %v, not a stream of %s", c.Kind.Role, c.Name, c.Kind.Name, out.Type, c.Kind.Out)
		}
		switch n := readers[c.Name]; {
		case n == 1:
			outs[c.Name] = []Stream{out}
		case n > 1:
			split := out.Type.broadcast
			if c.Fanout == "roundrobin" {
				split = out.Type.roundRob
			}
			for _, s := range split(out.s, c.Name+".fanout", n) {
				outs[c.Name] = append(outs[c.Name], Stream{Type: out.Type, s: s})
			}
		}
	}
	return nil
}
