package pipelines

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma/umacache"
)

// Hooks let the caller add to a run: a Go consumer of the batches, graph
// options (metrics), where the memory runtime's metrics go and what it may do
// to the process, observers, informational lines and live progress. The zero
// value runs the pipeline as its spec says and reports nothing.
type Hooks struct {
	// Batches, when set, receives every batch before the pipeline's sink (the
	// pipeline must end in batches); its error ends the run, and a batch it
	// failed on is not delivered to the sink nor counted. The graph releases the
	// batch after the sink: copy what must outlive the call.
	Batches func(ctx context.Context, b *tensor.Batch) error
	// Destination, when set, lends the memory collate stages write batches
	// into (the torch sink's shared slots, whose Consume is Batches): each
	// batch is written once, where its consumer reads it.
	Destination tensor.Destination
	// DeviceBatches, when set, receives every batch on the device before the
	// pipeline's sink, as Batches does for a pipeline that ends on the host (the
	// pipeline must end in device_batch: pin → h2d → mark_preemptible). The
	// batch's copy is complete after mark_preemptible; the graph releases it
	// (its device buffer goes back to the pool) after the sink.
	DeviceBatches func(ctx context.Context, b *h2d.DeviceBatch) error
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
	// OnCache, when set, receives the sample cache (resources.cache) once it is
	// made, before the first graph runs: to read its statistics, or to ask the
	// kernel to take entries back (tests of reclaim).
	OnCache func(*umacache.Cache)
	// Sink, when set, is told of every sink a sink kind opens, once per run,
	// before anything is sent to it (psiflow serve sends its plan messages
	// through the torch sink and reports its counts).
	Sink func(node string, s sink.Sink)
	// Ready, when set, is called once the start-up checks passed (the memory
	// limit holds the floor, the first graph is built: its files listed, its
	// rank's share found), before anything runs or Plan is told: psiflow serve
	// waits for its consumer here, so that a run that cannot start fails before
	// anyone connects. Its error ends the run.
	Ready func() error
	// Plan, when set, is told of each epoch's share of a files source before
	// the epoch's graph runs (rank, world size, samples, start).
	Plan func(epoch int, share source.Share) error
	// OnEpoch, when set, is called after each epoch (numbered from 0) with what
	// it delivered, before the next one starts.
	OnEpoch func(n int, e progress.Epoch)
	// Next, when set, chooses the epochs after the first instead of the
	// pipeline's epochs count: it is asked after each epoch (after OnEpoch)
	// and returns the next epoch's number (as start_epoch: it selects the
	// shuffle) and the position it starts at (as start_at), or more false to
	// end the run. The first epoch is the pipeline's start_epoch from
	// start_at. psiflow serve asks its consumer, so that one run (its memory
	// runtime, its sample cache, its shared ring) serves every epoch of a
	// Python DataLoader. Its error ends the run.
	Next func(ctx context.Context) (epoch int, start int64, more bool, err error)
	// Reads and Decodes, when set, are told of every read and every decoded
	// image (package metrics implements both).
	Reads   source.ReadObserver
	Decodes decode.Observer
	// Option, when set, names a node's parameter as the front-end's user knows
	// it (a flag such as -max-pixels for decode's max_pixels), for messages
	// that say what to change; "" (or nil) names the pipeline file's key.
	Option func(node, param string) string
	// Info receives one line for each choice made at start (budget, reader, decoder).
	Info func(string)
	// OnPause, when set, is told of every pause below the floor, resume and pause
	// timeout of the memory runtime (after Info has its line).
	OnPause func(pause.Event)
	// Skipped receives every input a node skipped as bad (a tar shard's rest, a
	// member, an image under decode's on_error: skip), named by err; without it
	// the skips are only counted (Summary.Skipped, ReadSkipped and
	// DecodeSkipped; psiflow_stage_skipped_total). A Reads or Decodes observer
	// that is also a [SkipObserver] is told of each skip of a source (Reads) or
	// of a stage (Decodes): package metrics counts them in
	// psiflow_read_skipped_total and psiflow_decode_skipped_total.
	Skipped func(node string, err error)
	// Progress, when not nil, is called about every Interval from a goroutine
	// that ends before Run returns.
	Progress func(progress.Snapshot)
	Interval time.Duration
}

// ErrLimit ends a graph once the file's limit of samples was delivered; [Run]
// does not return it.
var ErrLimit = errors.New("sample limit reached")

// Run builds and runs the pipeline once per epoch under its memory runtime
// (resources: memory_mode, budget, pressure, below_floor; the floor summed over
// its kinds) and returns what its sink accepted. Every graph takes the runtime
// once (flow.WithRuntime): its budget, gate, read buffers and epoch boundary
// come with it.
func Run(ctx context.Context, p *Pipeline, hooks Hooks) (sum progress.Summary, err error) {
	if p == nil || p.Source == nil || p.Sink == nil {
		return progress.Summary{}, errors.New("pipelines: Run needs a pipeline from Load or Parse")
	}
	if hooks.Batches != nil && p.Sink.Kind.In != AnyType && p.Sink.Kind.In != BatchType.Name {
		return progress.Summary{}, fmt.Errorf("pipeline %s: Hooks.Batches needs a pipeline that ends in batches, not %s", p.Name, p.Sink.Kind.In)
	}
	if hooks.DeviceBatches != nil && p.Sink.Kind.In != AnyType && p.Sink.Kind.In != DeviceBatchType.Name {
		return progress.Summary{}, fmt.Errorf("pipeline %s: Hooks.DeviceBatches needs a pipeline that ends in device_batch, not %s", p.Name, p.Sink.Kind.In)
	}
	r := &runState{ctx: ctx, hooks: hooks, limit: p.Limit, kept: map[string]any{}, infoSeen: map[string]bool{}, plans: map[int]source.Share{},
		dest: hooks.Destination, at: []epochAt{{number: p.StartEpoch, start: p.StartAt}}}
	var rt *memory.Runtime
	defer func() {
		// Sinks first (they are told how the run ended), then the services, then
		// the runtime whose UMA the services' memory lives in (its Close fails if
		// any lease is still out: a leak surfaces here).
		err = errors.Join(err, r.closeSinks(err))
		for i := len(r.closers) - 1; i >= 0; i-- {
			err = errors.Join(err, r.closers[i]())
		}
		if rt != nil {
			err = errors.Join(err, rt.Close())
		}
	}()
	floor, err := floorOf(p, r)
	if err != nil {
		return progress.Summary{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if rt, err = newRuntime(p, hooks, floor); err != nil {
		return progress.Summary{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if hooks.Runtime != nil {
		hooks.Runtime(rt)
	}
	if err := r.openCache(p, rt); err != nil {
		return progress.Summary{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
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
	// pass runs one graph of epoch: the whole epoch, or (repass) the cached
	// samples the kernel reclaimed during the epoch's first graph.
	pass := func(epoch int, repass []string) error {
		r.mu.Lock()
		r.repass = repass
		r.mu.Unlock()
		g := flow.New(p.Name, append([]flow.Option{flow.WithRuntime(rt), flow.WithQueueSize(p.Resource.Queue)}, hooks.Options...)...)
		if err := build(g, p, epoch, rt, r); err != nil {
			return fmt.Errorf("pipeline %s: %w", p.Name, err)
		}
		if epoch == 0 && repass == nil {
			if hooks.Ready != nil {
				if err := hooks.Ready(); err != nil {
					return err
				}
			}
			r.mu.Lock()
			ready := r.ready
			r.ready = nil
			r.mu.Unlock()
			for _, f := range ready {
				if err := f(); err != nil {
					return fmt.Errorf("pipeline %s: %w", p.Name, err)
				}
			}
		}
		if sh, ok := r.plans[epoch]; ok && hooks.Plan != nil && repass == nil {
			if err := hooks.Plan(r.epochAt(epoch).number, sh); err != nil {
				return err
			}
		}
		r.mu.Lock()
		current = g
		r.mu.Unlock()
		if epoch == 0 && repass == nil {
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
		err := g.Run(ctx)
		r.mu.Lock()
		r.sum.Stages = g.Stats()
		r.sum.Peak = max(r.sum.Peak, g.Budget().MaxInUse())
		for _, st := range r.sum.Stages {
			r.sum.Skipped += st.Skipped
			r.epochSkipped += st.Skipped
			if st.Kind == "source" {
				r.sum.ReadSkipped += st.Skipped
			} else {
				r.sum.DecodeSkipped += st.Skipped
			}
		}
		r.mu.Unlock()
		return err
	}
	for epoch := 0; hooks.Next != nil || epoch < p.Epochs; epoch++ {
		if epoch > 0 && hooks.Next != nil {
			number, start, more, err := hooks.Next(ctx)
			if err != nil {
				return result(), err
			}
			if !more {
				return result(), nil
			}
			if number < 0 || start < 0 {
				return result(), fmt.Errorf("pipeline %s: the next epoch asked for is %d from %d: want non-negative numbers", p.Name, number, start)
			}
			r.mu.Lock()
			r.at = append(r.at, epochAt{number: number, start: start})
			r.mu.Unlock()
		}
		epochStart := time.Now()
		r.mu.Lock()
		itemsBefore := r.sum.Items
		r.epochSkipped = 0
		r.mu.Unlock()
		hits, lookups := r.cache.stats()
		err := pass(epoch, nil)
		for err == nil {
			late := r.cache.takeLate()
			if len(late) == 0 {
				break
			}
			r.info(fmt.Sprintf("epoch %d: %d cached samples were reclaimed by the kernel; reading them again", epoch+1, len(late)))
			err = pass(epoch, late)
		}
		hitsAfter, lookupsAfter := r.cache.stats()
		r.mu.Lock()
		ep := progress.Epoch{Items: r.sum.Items - itemsBefore, Elapsed: time.Since(epochStart), CacheHits: hitsAfter - hits, CacheLookups: lookupsAfter - lookups}
		r.sum.Epochs = append(r.sum.Epochs, ep)
		skipped := r.epochSkipped
		r.mu.Unlock()
		if err == nil && skipped > 0 && ep.Items == 0 {
			// Skipping is for a few bad inputs, not for a dataset that cannot be read.
			err = fmt.Errorf("pipeline %s: epoch %d: every one of the %d samples was skipped as bad (see the skipped lines)", p.Name, epoch+1, skipped)
		}
		if hooks.OnEpoch != nil && (err == nil || errors.Is(err, ErrLimit)) {
			hooks.OnEpoch(epoch, ep)
		}
		if errors.Is(err, ErrLimit) {
			return result(), nil
		}
		if err != nil {
			return result(), err
		}
	}
	return result(), nil
}

// runState is what one Run keeps across its graphs.
type runState struct {
	ctx          context.Context
	hooks        Hooks
	mu           sync.Mutex
	sum          progress.Summary
	epochSkipped int64
	limit        int64
	kept         map[string]any
	closers      []func() error
	sinks        []sink.Sink
	infoSeen     map[string]bool
	plans        map[int]source.Share // by epoch index, set by the files source
	repass       []string             // the paths of a repass graph (reclaimed cache entries)
	cache        *sampleCache         // nil: no cache
	dest         tensor.Destination   // a sink that lends batch memory (the torch sink's slots); nil: none
	ready        []func() error       // Build.WhenReady's, run once the start-up checks passed
	at           []epochAt            // by epoch index: its number and start (Hooks.Next)
}

// epochAt is an epoch of a run: its number (it selects the shuffle) and the
// position it starts at.
type epochAt struct {
	number int
	start  int64
}

// epochAt returns the number and start of the run's epoch index.
func (r *runState) epochAt(index int) epochAt {
	r.mu.Lock()
	defer r.mu.Unlock()
	if index < len(r.at) {
		return r.at[index]
	}
	// not asked by Next: the epochs count on from the first, each from its start
	first := epochAt{}
	if len(r.at) > 0 {
		first = r.at[0]
	}
	return epochAt{number: first.number + index}
}

// destination is the memory collate stages write batches into: the run's
// lending sink, or nil (their own buffers).
func (r *runState) destination() tensor.Destination {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dest
}

func (r *runState) info(s string) {
	if r.hooks.Info != nil {
		r.hooks.Info(s)
	}
}

// closeSinks tells every sink how the run ended (a clean end when err is nil,
// the limit, or a consumer that stopped on purpose) and closes it.
func (r *runState) closeSinks(err error) error {
	if errors.Is(err, ErrLimit) || errors.Is(err, sink.ErrConsumerClosed) {
		err = nil
	}
	var errs []error
	for i := len(r.sinks) - 1; i >= 0; i-- {
		errs = append(errs, r.sinks[i].Close(err))
	}
	r.sinks = nil
	return errors.Join(errs...)
}

// optionName is how the user names node's parameter: the front-end's own
// (Hooks.Option) or the pipeline file's key.
func optionName(hooks Hooks, node, param string) string {
	if hooks.Option != nil {
		if s := hooks.Option(node, param); s != "" {
			return s
		}
	}
	return fmt.Sprintf("%s.%s in the pipeline file (-set %s.%s=N)", node, param, node, param)
}
