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
