package imagefolder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

// runner runs the epochs of one [Run] once its files, decoder, memory and cache are
// set up: one graph per pass over an epoch's files.
type runner struct {
	cfg       Config
	hooks     Hooks
	files     *source.Files
	dec       *decode.Decoder
	labelOf   func(string) int64
	bufs      source.BufferProvider
	graphOpts []flow.Option
	workers   *memory.Workers
	cache     *sampleCache
	start     time.Time

	mu       sync.Mutex
	sum      progress.Summary // what Run returns
	current  *flow.Graph      // the graph running now, for the live snapshot
	epochNow int64            // the running epoch's number, set before its graph starts
}

// snapshot is the live progress of the run.
func (r *runner) snapshot() progress.Snapshot {
	r.mu.Lock()
	snap := progress.Snapshot{Items: r.sum.Items, Bytes: r.sum.Bytes, Elapsed: time.Since(r.start)}
	g := r.current
	r.mu.Unlock()
	snap.Observe(g)
	return snap
}

// encoded is what the decode stage decodes of a read file.
func (r *runner) encoded(h *memory.Held[*source.Sample]) decode.Encoded {
	s := h.V
	e := decode.Encoded{Key: s.Key, Label: r.labelOf(s.Key), Index: s.Index, Epoch: r.epochNow}
	if len(s.Fields) > 0 {
		e.Data = s.Fields[0].Data
	}
	r.mu.Lock()
	r.sum.Bytes += int64(len(e.Data))
	r.mu.Unlock()
	if r.cache != nil && r.cache.mode == CacheEncoded && !fromCache(s) {
		_ = r.cache.putEncoded(e.Key, e.Data)
	}
	return e
}

// skipped reports a sample the skip policy passed over: to Hooks.Skipped, or on
// stderr.
func (r *runner) skipped(key string, err error) {
	switch {
	case r.hooks.Skipped != nil:
		r.hooks.Skipped(key, err)
	case strings.Contains(err.Error(), key):
		fmt.Fprintf(os.Stderr, "psiflow: skipped a bad sample: %v\n", err)
	default:
		fmt.Fprintf(os.Stderr, "psiflow: skipped bad sample %s: %v\n", key, err)
	}
}

// consume counts a batch and hands it to Hooks.Consume; errLimit ends the run once
// Config.Limit samples were delivered.
func (r *runner) consume(ctx context.Context, b *tensor.Batch) error {
	r.mu.Lock()
	r.sum.Items += int64(len(b.Keys))
	r.sum.Batches++
	done := r.cfg.Limit > 0 && r.sum.Items >= r.cfg.Limit
	r.mu.Unlock()
	if r.hooks.Consume != nil {
		if err := r.hooks.Consume(ctx, b); err != nil {
			return err
		}
	}
	if done {
		return errLimit
	}
	return nil
}

// epochs runs Config.Epochs epochs, each a pass and, with a cache, a pass again over
// the entries the kernel reclaimed meanwhile.
func (r *runner) epochs(ctx context.Context) error {
	for epoch := range r.cfg.Epochs {
		epochStart := time.Now()
		r.mu.Lock()
		itemsBefore := r.sum.Items
		r.mu.Unlock()
		var hitsBefore int64
		if r.cache != nil {
			hitsBefore = r.cache.c.Stats().Hits
		}
		late, lookups, err := r.pass(ctx, epoch, nil)
		for err == nil && len(late) > 0 {
			r.hooks.info("epoch %d: %d cached samples were reclaimed by the kernel; reading them again", epoch+1, len(late))
			late, _, err = r.pass(ctx, epoch, late)
		}
		ep := progress.Epoch{Elapsed: time.Since(epochStart), CacheLookups: lookups}
		if r.cache != nil {
			ep.CacheHits = r.cache.c.Stats().Hits - hitsBefore
		}
		r.mu.Lock()
		ep.Items = r.sum.Items - itemsBefore
		r.sum.Epochs = append(r.sum.Epochs, ep)
		r.mu.Unlock()
		if r.hooks.OnEpoch != nil && (err == nil || errors.Is(err, errLimit)) {
			r.hooks.OnEpoch(epoch, ep)
		}
		if errors.Is(err, errLimit) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pass runs one graph over one epoch's files, or over paths when not nil (the
// entries the kernel reclaimed during the first pass); with a cache, hits are
// served from it. It returns the cache entries found reclaimed.
func (r *runner) pass(ctx context.Context, epoch int, paths []string) (late []string, lookups int64, err error) {
	cfg, cache := r.cfg, r.cache
	r.mu.Lock()
	itemsBefore := r.sum.Items
	r.mu.Unlock()
	g := flow.New("imagefolder", append(slices.Clone(r.graphOpts), r.hooks.Options...)...)
	// Decoded bytes are reserved from the graph's budget before decoding.
	r.epochNow = int64(cfg.StartEpoch + epoch)
	tr := decode.Transform{Resize: cfg.Resize, CenterCrop: cfg.Crop, Layout: tensor.CHW}
	if cfg.Transform != nil {
		tr = *cfg.Transform
	}
	st, err := decode.NewStage("decode", r.dec, decode.StageConfig{
		Workers: cfg.Workers, Ordered: cfg.Ordered, Observer: r.hooks.Decodes,
		Transform: tr,
		Budget:    g.Budget(), Skip: cfg.skipPolicy(r.skipped),
	}, r.encoded)
	if err != nil {
		return nil, 0, err
	}
	// narrow admits a file to decoding only while a decode slot is free: the
	// memory runtime narrows decoding under pressure.
	narrow := func(in flow.Stream[*source.Sample]) flow.Stream[*tensor.Sample] {
		return flow.Via(flow.Via(in, memory.Narrow[*source.Sample]("narrow", r.workers), flow.QueueSize(1)), st)
	}
	opts := source.Options{Epoch: cfg.StartEpoch + epoch, Seed: cfg.Seed, Shuffle: cfg.Shuffle, Rank: cfg.Rank, WorldSize: cfg.WorldSize, DropLast: cfg.DropLast, Workers: cfg.Readers, Buffers: r.bufs, Reader: source.ReaderOptions{DropCache: cfg.DropCache, Direct: cfg.Direct, Observer: r.hooks.Reads}}
	var start int64 // the first epoch resumes at StartAt
	if epoch == 0 && cfg.StartAt > 0 {
		start = cfg.StartAt
		opts.Resume = &source.Position{Epoch: opts.Epoch, Seed: cfg.Seed, Shuffle: cfg.Shuffle, Consumed: start}
	}
	if r.hooks.Plan != nil && paths == nil {
		sh, err := source.NewShare(r.files.Len(), opts, start)
		if err != nil {
			return nil, 0, err
		}
		if err := r.hooks.Plan(opts.Epoch, sh); err != nil {
			return nil, 0, err
		}
	}
	var decoded flow.Stream[*tensor.Sample]
	var lateMu sync.Mutex
	switch {
	case cache == nil:
		decoded = narrow(flowsrc.Files(g, "read", r.files, opts))
	default:
		if paths == nil {
			if paths, err = r.files.Order(opts); err != nil {
				return nil, 0, err
			}
			lookups = int64(len(paths))
		}
		hits, misses := cache.split(paths)
		// The order and sharding are already in paths: read them as they are.
		opts.Epoch, opts.Rank, opts.WorldSize, opts.Shuffle, opts.ShuffleBuffer, opts.Resume = 0, 0, 1, false, 0, nil
		read := flowsrc.Files(g, "read", source.NewFiles(misses), opts)
		switch {
		case cache.mode == CacheEncoded && len(hits) > 0:
			cached := hitSource(g, cache, hits, 0, &late, &lateMu, encodedHit)
			decoded = narrow(flow.Merge([]flow.Stream[*source.Sample]{read, cached}, "merge"))
		case cache.mode == CacheEncoded:
			decoded = narrow(read)
		case len(hits) > 0:
			sampleBytes := int64(3 * cfg.Crop * cfg.Crop)
			cached := hitSource(g, cache, hits, sampleBytes, &late, &lateMu, cache.decodedHit(cfg.Crop))
			decoded = flow.Merge([]flow.Stream[*tensor.Sample]{tapPut(cache, narrow(read)), cached}, "merge")
		default:
			decoded = tapPut(cache, narrow(read))
		}
	}
	batches := flow.Via(decoded, stage.Batch[*tensor.Sample]("batch", cfg.BatchSize, 0), flow.QueueSize(1))
	collated := flow.Via(batches, tensor.Collate("collate"), flow.QueueSize(1))
	flow.Sink(collated, "consume", r.consume)
	r.mu.Lock()
	r.current = g
	r.mu.Unlock()
	err = g.Run(ctx)
	r.mu.Lock()
	r.sum.Stages = g.Stats()
	r.sum.Peak = max(r.sum.Peak, g.Budget().MaxInUse())
	var skippedNow int64
	for _, s := range r.sum.Stages {
		skippedNow += s.Skipped
	}
	r.sum.Skipped += skippedNow
	delivered := r.sum.Items
	r.mu.Unlock()
	if err == nil && skippedNow > 0 && delivered == itemsBefore {
		// skipping is for a few bad files, not for a dataset that cannot be read
		err = fmt.Errorf("imagefolder: epoch %d: every one of the %d samples was skipped as bad (see the skipped lines)", epoch, skippedNow)
	}
	return late, lookups, err
}
