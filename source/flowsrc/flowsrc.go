package flowsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage"
)

// Files adds a source named name emitting the samples of one epoch of ds. Its reads
// pass through the graph's gate; a sample read is emitted without waiting on the
// gate again.
func Files(g *flow.Graph, name string, ds *source.Files, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Sample] {
	return iter(g, name, ds.Samples, opts, true, nodeOpts...)
}

// Tar adds a source named name emitting the samples of one epoch of the tar shards
// ds; like [Files], its reads pass through the gate and its samples are emitted
// without waiting on it again.
func Tar(g *flow.Graph, name string, ds *source.TarShards, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Sample] {
	return iter(g, name, ds.Samples, opts, true, nodeOpts...)
}

// Tables adds a source named name emitting the record batches of one epoch of ds.
func Tables(g *flow.Graph, name string, ds *source.Tables, opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[*source.Batch] {
	return Iter(g, name, ds.Batches, opts, nodeOpts...)
}

// Iter adds a source named name that opens an iterator with open(opts) when
// the graph runs and emits its elements until io.EOF. An error from the
// iterator ends the graph with that error.
//
// Inputs the iterator skips (opts.Skip, or opts.SkipPolicy: the decode
// stage's policy, read errors included) count in the source's stage counters
// (psiflow_stage_skipped_total) and reach opts.OnSkip, or the policy's Log
// when OnSkip is nil.
//
// Unless opts sets them, the iterator is charged to the graph's byte budget and
// its reads pass through the graph's gate: a reader that reads ahead asks the
// gate before each read, so reads stop when the gate closes (Full), not only
// emissions. The element is then emitted with a permit of its own, taken after
// the read: the source never waits on the gate while the reader needs a permit
// for the read it waits for.
func Iter[T any](g *flow.Graph, name string, open func(source.Options) (source.Iterator[T], error), opts source.Options, nodeOpts ...flow.NodeOption) flow.Stream[T] {
	return iter(g, name, open, opts, false, nodeOpts...)
}

// iter is Iter; gatedReads says that the iterator asks opts.Gate before each read
// (files, tar), so an element read is emitted with [flow.Emitter.EmitAdmitted]: at
// Full the reads stop, but what was read flows on and gives its memory back.
func iter[T any](g *flow.Graph, name string, open func(source.Options) (source.Iterator[T], error), opts source.Options, gatedReads bool, nodeOpts ...flow.NodeOption) flow.Stream[T] {
	if opts.Budget == nil {
		if b := g.Budget(); b != nil {
			opts.Budget = b
		}
	}
	if opts.Gate == nil {
		if gt := g.Gate(); gt != nil {
			opts.Gate = gt
		}
	}
	if opts.Buffers == nil {
		// The graph's runtime owns the read buffers (package memory's read pools).
		if rb, ok := g.Runtime().(interface{ ReadBuffers() source.BufferProvider }); ok {
			opts.Buffers = rb.ReadBuffers()
		}
	}
	return flow.Source(g, name, func(ctx context.Context, out *flow.Emitter[T]) (err error) {
		// Every skip counts in the source's stage counters, and reaches the
		// caller's OnSkip, which names it, or else the skip policy's Log.
		o := opts
		o.OnSkip = func(err error) {
			out.Skipped(1)
			switch {
			case opts.OnSkip != nil:
				opts.OnSkip(err)
			case opts.SkipPolicy.Log != nil:
				key := ""
				var sk *source.Skipped
				if errors.As(err, &sk) {
					key = sk.Path
				}
				opts.SkipPolicy.Log(key, err)
			}
		}
		it, err := open(o)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := closeIter(ctx, name, it, opts.Reader.Logger); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", name, cerr)
			}
		}()
		for {
			v, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if gatedReads && opts.Gate != nil {
				// The read took its own permit and the iterator charged the bytes.
				if err := out.EmitAdmitted(ctx, v); err != nil {
					return err
				}
				continue
			}
			// Reserve nothing: the iterator charged the bytes (opts.Budget); the
			// permit is the emission's own.
			if err := out.Reserve(ctx, 0); err != nil {
				if r, ok := any(v).(stage.Releaser); ok {
					r.Release() // never emitted: the graph never owned it
				}
				return err
			}
			if err := out.Emit(ctx, v); err != nil {
				return err
			}
		}
	}, nodeOpts...)
}

// CloseGrace is how long a cancelled source waits for its iterator to close
// (for the reads it has in flight to be cancelled, or to finish) before the
// graph ends without it. A read that storage never answers (a hung NFS or
// FUSE server) cannot be taken back from the kernel: the graph then ends
// anyway, and the iterator closes, returning its buffers and bytes, when the
// kernel lets go of the read. The source says so in the log.
const CloseGrace = time.Second

// closeIter closes it; when ctx has ended it waits at most CloseGrace.
func closeIter[T any](ctx context.Context, name string, it source.Iterator[T], logger *slog.Logger) error {
	if ctx.Err() == nil {
		return it.Close()
	}
	done := make(chan error, 1)
	go func() { done <- it.Close() }()
	t := time.NewTimer(CloseGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		if logger == nil {
			logger = slog.Default()
		}
		var waiting []string
		if w, ok := any(it).(source.WaitReporter); ok {
			waiting = w.Waiting()
		}
		logger.Warn("psiflow: a read is still in the kernel after the graph was cancelled (storage not answering?); the graph ends without waiting for it",
			"source", name, "waited", CloseGrace, "files", waiting)
		return nil
	}
}
