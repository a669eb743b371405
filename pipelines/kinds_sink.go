package pipelines

import (
	"context"
	"fmt"
	"time"

	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/tensor"
)

// sinkKinds are the sink kinds: discard for any element, and package sink's
// sinks for batches.
func sinkKinds() []Kind {
	return []Kind{
		{
			Name: "discard", Role: SinkRole, In: AnyType,
			Doc:   "counts and drops every element (benchmarks, tests, dry runs); batches go to package sink's Null",
			Build: buildDiscard,
		},
		{
			Name: "arrow", Role: SinkRole, In: "batch",
			Doc: "batches as an Arrow IPC file (one row per sample: key, label, data; written under a temporary name, renamed at a clean end) or stream to the first client of a Unix socket",
			Params: []Param{
				StringParam("path", "", "the Arrow IPC file to write (one of path and socket)"),
				StringParam("socket", "", "a Unix socket to stream to (one of path and socket)"),
				BoolParam("overwrite", false, "replace a file already at path (else a non-empty one is refused)"),
			},
			Build: buildBatchSink(openArrow),
		},
		{
			Name: "parquet", Role: SinkRole, In: "batch",
			Doc: "batches as Parquet files part-NNNNN.parquet in a folder (one row per sample: key, label, data; one row group per batch)",
			Params: []Param{
				StringParam("dir", "", "the folder (created if missing)").Require(),
				IntParam("rows_per_file", 8192, 1, 1<<40, "start a new file once a file holds this many rows"),
				BoolParam("overwrite", false, "write into a folder that is not empty, replacing its parts at a clean end"),
			},
			Build: buildBatchSink(func(_ *Build, cfg *Config) (sink.Sink, error) {
				return sink.NewParquet(sink.ParquetConfig{Dir: cfg.String("dir"), RowsPerFile: cfg.Int("rows_per_file"), Overwrite: cfg.Bool("overwrite")})
			}),
		},
		{
			Name: "torch", Role: SinkRole, In: "batch",
			Doc: "batches to a Python training loop (python/psiflow) through shared memory and a Unix socket; makes the socket and waits for the consumer once the start-up checks passed, before the first epoch",
			Params: []Param{
				StringParam("socket", "", "the Unix socket to listen on").Require(),
				IntParam("slots", 0, 0, 1<<10, "batches outstanding in Python at once (the shared-memory ring's length); 0: sized from the first batch, as many as fit in 64 MiB, 2 to 4"),
				BoolParam("keys", false, "send each sample's key (its file path) with the batch"),
				DurationParam("accept_timeout", time.Minute, time.Millisecond, 24*time.Hour, "give up when no consumer connects within this time"),
			},
			Build: buildBatchSink(openTorch),
		},
	}
}

// buildDiscard drops every element it is given: batches through package
// sink's Null (the sink the launcher measures a pipeline with), any other
// element counted here.
func buildDiscard(b *Build, cfg *Config, in Stream) (Stream, error) {
	if in.Type == BatchType {
		return buildBatchSink(func(*Build, *Config) (sink.Sink, error) { return sink.NewNull(), nil })(b, cfg, in)
	}
	t := in.Type
	in.Sink(b.Name, func(_ context.Context, v any) error {
		return b.Deliver(t.Count(v))
	})
	return Stream{}, nil
}

// buildBatchSink is the constructor of a sink kind over package sink's sinks:
// the sink is opened once per run, every batch it accepts is counted as
// delivered, and Run closes it with how the run ended.
func buildBatchSink(open func(*Build, *Config) (sink.Sink, error)) BuildFunc {
	return func(b *Build, cfg *Config, in Stream) (Stream, error) {
		batches, err := Unwrap[*tensor.Batch](in)
		if err != nil {
			return Stream{}, err
		}
		s, err := b.OpenSink(func() (sink.Sink, error) { return open(b, cfg) })
		if err != nil {
			return Stream{}, err
		}
		if d, ok := s.(tensor.Destination); ok {
			// collate writes batches straight into the sink's memory
			b.run.mu.Lock()
			b.run.dest = d
			b.run.mu.Unlock()
		}
		in, err = Wrap(BatchType, batches)
		if err != nil {
			return Stream{}, err
		}
		in.Sink(b.Name, func(ctx context.Context, v any) error {
			bt := v.(*tensor.Batch)
			if err := s.Consume(ctx, bt); err != nil {
				return err // not delivered: the summary counts what the sink accepted
			}
			return b.Deliver(int64(bt.Len()), bt.Size())
		})
		return Stream{}, nil
	}
}

func openArrow(_ *Build, cfg *Config) (sink.Sink, error) {
	path, sock := cfg.String("path"), cfg.String("socket")
	if (path == "") == (sock == "") {
		return nil, fmt.Errorf("give exactly one of path and socket (path %q, socket %q)", path, sock)
	}
	return sink.NewArrow(sink.ArrowConfig{Path: path, Socket: sock, Overwrite: cfg.Bool("overwrite")})
}

// openTorch makes the torch sink; its socket is made, and the Python consumer
// waited for, only once the start-up checks passed (Build.WhenReady), so that
// nothing is read before someone takes the batches and nobody connects to a
// run that is about to fail its checks.
func openTorch(b *Build, cfg *Config) (sink.Sink, error) {
	sock := cfg.String("socket")
	t, err := sink.NewTorch(sink.TorchConfig{Socket: sock, Slots: int(cfg.Int("slots")), Keys: cfg.Bool("keys"), ListenOnAccept: true})
	if err != nil {
		return nil, err
	}
	b.WhenReady(func() error {
		if err := t.Listen(); err != nil {
			return err
		}
		if n := cfg.Int("slots"); n > 0 {
			b.Info("listening on %s (%d slots)", sock, n)
		} else {
			b.Info("listening on %s (slots sized from the first batch: as many as fit in 64 MiB, 2 to 4)", sock)
		}
		ctx, cancel := context.WithTimeout(b.Context(), cfg.Duration("accept_timeout"))
		defer cancel()
		if err := t.Accept(ctx); err != nil {
			return fmt.Errorf("no consumer connected to %s within %v: %w", sock, cfg.Duration("accept_timeout"), err)
		}
		return nil
	})
	return t, nil
}
