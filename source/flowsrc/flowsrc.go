// Package flowsrc exposes psiflow datasets as typed sources of a flow graph.
//
// It owns only the adaptation: admission through the graph's gate and byte
// budget, emission, and shutdown. Reading, sharding, shuffling and resume
// are package source's; wiring and running graphs are package flow's.
//
// # Admission
//
// For every element the source first reserves a permit of the graph's gate
// ([flow.Emitter.Reserve] with zero bytes), then calls the iterator's Next,
// which charges the element's bytes to the byte budget before it takes a
// buffer and submits the read (files) or when the element leaves the
// iterator (tar shards, tables), and finally emits the element; the permit
// is released once it is queued. The graph's budget is used unless
// [source.Options.Budget] names another one. Elements release their buffers
// and bytes when the graph releases them (they are [stage.Releaser]s), so a
// finished or cancelled graph leaves the budget at zero.
//
// Reads run ahead of emission by at most Workers × QueueDepth elements (file
// datasets) or min(QueueDepth, 8) chunks (tar shards). Setting
// [source.Options.Gate] to the graph's own gate additionally gates every
// read; give that gate enough permits for the read-ahead plus one.
package flowsrc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
)

// Files adds a source named name emitting the samples of one epoch of ds.
func Files(g *flow.Graph, name string, ds *source.Files, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Sample] {
	return Iter(g, name, ds.Samples, opts, nodeOpts...)
}

// Tar adds a source named name emitting the samples of one epoch of the tar shards ds.
func Tar(g *flow.Graph, name string, ds *source.TarShards, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Sample] {
	return Iter(g, name, ds.Samples, opts, nodeOpts...)
}

// Tables adds a source named name emitting the record batches of one epoch of ds.
func Tables(g *flow.Graph, name string, ds *source.Tables, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Batch] {
	return Iter(g, name, ds.Batches, opts, nodeOpts...)
}

// Iter adds a source named name that opens an iterator with open(opts) when
// the graph runs and emits its elements until io.EOF. An error from the
// iterator ends the graph with that error.
func Iter[T any](g *flow.Graph, name string, open func(source.Options) (source.Iterator[T], error), opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[T] {
	if opts.Budget == nil {
		if b := g.Budget(); b != nil {
			opts.Budget = b
		}
	}
	return flow.Source(g, name, func(ctx context.Context, out *flow.Emitter[T]) (err error) {
		it, err := open(opts)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := it.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", name, cerr)
			}
		}()
		for {
			if err := out.Reserve(ctx, 0); err != nil {
				return err
			}
			v, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				out.Cancel()
				return nil
			}
			if err != nil {
				out.Cancel()
				return err
			}
			if err := out.Emit(ctx, v); err != nil {
				return err
			}
		}
	}, nodeOpts...)
}
