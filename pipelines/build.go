package pipelines

import (
	"context"
	"fmt"
	"strings"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

// Build is what a kind's constructor gets: the graph being built, the node's
// name, the epoch, the memory runtime the graph runs under, and services kept
// across the epochs of one run. Its methods are the run's services: shared
// values, the sample cache, sinks opened once, delivery counting, observers.
type Build struct {
	// Graph is the graph being built (nil when a kind's Floor is asked).
	Graph *flow.Graph
	Name  string
	// Epoch is the epoch's number as the sources see it (it selects the
	// shuffle): the file's start_epoch plus the epochs run before.
	Epoch    int
	Pipeline *Pipeline
	// Runtime is the run's memory runtime (the graph's, through
	// flow.WithRuntime): kinds take its decode-worker limit from it (nil when
	// a kind's Floor is asked).
	Runtime *memory.Runtime
	index   int  // the epoch's index in this run (0 first)
	source  bool // the node is the pipeline's source: its skips are read skips
	run     *runState
}

// SkipObserver is told of every input a node skipped as bad: the Reads
// observer of [Hooks] of the skips of the source (read skips), the Decodes
// observer of those of the stages (decode skips), when they implement it.
type SkipObserver interface {
	ObserveSkip()
}

// Context is the run's context: what a kind waits on while it builds (a sink
// waiting for its consumer to connect).
func (b *Build) Context() context.Context { return b.run.ctx }

// Info reports a line through Hooks.Info once per run (the same line in later
// epochs is dropped).
func (b *Build) Info(format string, args ...any) {
	s := b.Name + ": " + fmt.Sprintf(format, args...)
	b.run.mu.Lock()
	seen := b.run.infoSeen[s]
	b.run.infoSeen[s] = true
	b.run.mu.Unlock()
	if !seen {
		b.run.info(s)
	}
}

// Skipped reports an input this node skipped as bad through Hooks.Skipped.
func (b *Build) Skipped(err error) {
	var o any = b.run.hooks.Decodes
	if b.source {
		o = b.run.hooks.Reads
	}
	if so, ok := o.(SkipObserver); ok {
		so.ObserveSkip()
	}
	if b.run.hooks.Skipped != nil {
		b.run.hooks.Skipped(b.Name, err)
	}
}

// SkippedSample reports a sample named key this node skipped as bad: err
// names the sample (key is added when it does not).
func (b *Build) SkippedSample(key string, err error) {
	if !strings.Contains(err.Error(), key) {
		err = fmt.Errorf("%s: %w", key, err)
	}
	b.Skipped(err)
}

// Reads is the observer of every read (Hooks.Reads), or nil.
func (b *Build) Reads() source.ReadObserver { return b.run.hooks.Reads }

// Decodes is the observer of every decoded image (Hooks.Decodes), or nil.
func (b *Build) Decodes() decode.Observer { return b.run.hooks.Decodes }

// Resume is where the source of this epoch starts: the file's start_at in
// the run's first epoch, what Hooks.Next asked for in a later one, else 0.
func (b *Build) Resume() int64 {
	return b.run.epochAt(b.index).start
}

// Plan records the source's share of this epoch, told to Hooks.Plan before
// the graph runs.
func (b *Build) Plan(sh source.Share) {
	b.run.mu.Lock()
	b.run.plans[b.index] = sh
	b.run.mu.Unlock()
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

// OpenSink returns this node's sink, opened by open once per run and told to
// Hooks.Sink; Run closes it at the end with how the run ended.
func (b *Build) OpenSink(open func() (sink.Sink, error)) (sink.Sink, error) {
	v, err := b.Keep(func() (any, func() error, error) {
		s, err := open()
		if err != nil {
			return nil, nil, err
		}
		b.run.mu.Lock()
		b.run.sinks = append(b.run.sinks, s)
		b.run.mu.Unlock()
		if b.run.hooks.Sink != nil {
			b.run.hooks.Sink(b.Name, s)
		}
		return s, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(sink.Sink), nil
}

// WhenReady runs f once the start-up checks passed: after the run's first
// graph is built (its files listed, its rank's share found, every node made)
// and Hooks.Ready returned, before anything runs. A sink that waits for its
// consumer (the torch sink) makes its socket and accepts there, so that a run
// that cannot start fails before anyone can connect to it, as psiflow serve
// does. f's error, which names the node, ends the run.
func (b *Build) WhenReady(f func() error) {
	name := b.Name
	for _, c := range b.Pipeline.Nodes() {
		if c != nil && c.Name == b.Name {
			name = fmt.Sprintf("%s %q (kind %s, %s)", c.Kind.Role, c.Name, c.Kind.Name, c.Pos)
		}
	}
	b.run.mu.Lock()
	defer b.run.mu.Unlock()
	b.run.ready = append(b.run.ready, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
}

// Deliver counts items samples and bytes payload bytes as accepted by the sink
// (sinks call it for every element they accepted) and returns [ErrLimit] once
// the file's limit is reached.
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

// build wires the nodes of p into g for one epoch.
func build(g *flow.Graph, p *Pipeline, index int, rt *memory.Runtime, r *runState) error {
	nodes := p.Nodes()
	readers := map[string]int{}
	for _, c := range nodes[1:] {
		for _, in := range c.Inputs {
			readers[in]++
		}
	}
	outs := map[string][]Stream{}
	for _, c := range nodes {
		b := &Build{Graph: g, Name: c.Name, Epoch: r.epochAt(index).number, Pipeline: p, Runtime: rt, index: index, source: c.Kind.Role == SourceRole, run: r}
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
		if c.Kind.Role == SinkRole {
			var err error
			if in, err = beforeSink(in, r); err != nil {
				return fmt.Errorf("sink %q: %w", c.Name, err)
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

// beforeSink adds what every pipeline's sink input passes through: the limit
// (the element that reaches it is cut to it, the ones after are dropped), then
// the Go consumer of Hooks.Batches.
func beforeSink(in Stream, r *runState) (Stream, error) {
	if r.limit > 0 {
		r.mu.Lock()
		left := r.limit - r.sum.Items
		r.mu.Unlock()
		in = Stream{Type: in.Type, s: in.Type.limit(in.s, "limit", max(left, 0))}
	}
	if r.hooks.Batches != nil {
		batches, err := Unwrap[*tensor.Batch](in)
		if err != nil {
			return Stream{}, fmt.Errorf("Hooks.Batches: %w", err)
		}
		consume := r.hooks.Batches
		// Filter keeps the element and its handle: the sink still receives it.
		in, err = Wrap(BatchType, flow.Filter(batches, "consumer", func(ctx context.Context, b *tensor.Batch) (bool, error) {
			return true, consume(ctx, b)
		}))
		if err != nil {
			return Stream{}, err
		}
	}
	if r.hooks.DeviceBatches != nil {
		var err error
		if in, err = deviceConsumer(in, r.hooks.DeviceBatches); err != nil {
			return Stream{}, err
		}
	}
	return in, nil
}
